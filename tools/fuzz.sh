#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time over
# its seed corpus: safetensors_header_fuzz (safetensors header + index parsers)
# and pickle_fuzz (torch.save reader: zip, legacy, restricted unpickler).
# Usage: tools/fuzz.sh [SECONDS]   (per target, default 60); per-target budgets:
#   HUBLOAD_FUZZ_SECONDS_SAFETENSORS, HUBLOAD_FUZZ_SECONDS_PICKLE (override SECONDS).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
tools/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DHUBLOAD_FUZZ=ON -DHUBLOAD_WITH_TORCH=OFF \
  -DHUBLOAD_BUILD_TESTS=OFF -DHUBLOAD_BUILD_TOOLS=OFF -DHUBLOAD_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target safetensors_header_fuzz pickle_fuzz
FLAGS=(-max_len=65536 -timeout=10 -rss_limit_mb=2048)

corpus=build-fuzz/corpus
mkdir -p "$corpus"
python3 tests/fuzz/make_seeds.py "$corpus"
build-fuzz/tests/fuzz/safetensors_header_fuzz -max_total_time="${HUBLOAD_FUZZ_SECONDS_SAFETENSORS:-$SECS}" \
  "${FLAGS[@]}" "$corpus"

# Seeds with real torch.save files when Debian's python3-torch is installed.
pcorpus=build-fuzz/corpus-pickle
mkdir -p "$pcorpus"
/usr/bin/python3 tests/fuzz/make_pickle_seeds.py "$pcorpus"
build-fuzz/tests/fuzz/pickle_fuzz -max_total_time="${HUBLOAD_FUZZ_SECONDS_PICKLE:-$SECS}" "${FLAGS[@]}" "$pcorpus"
