#!/usr/bin/env bash
# Builds the libFuzzer target for the safetensors header parser with clang and
# runs it for a bounded time (seconds, default 60) over the seed corpus.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
tools/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DHUBLOAD_FUZZ=ON -DHUBLOAD_WITH_TORCH=OFF \
  -DHUBLOAD_BUILD_TESTS=OFF -DHUBLOAD_BUILD_TOOLS=OFF -DHUBLOAD_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target safetensors_header_fuzz
corpus=build-fuzz/corpus
mkdir -p "$corpus"
python3 tests/fuzz/make_seeds.py "$corpus"
build-fuzz/tests/fuzz/safetensors_header_fuzz -max_total_time="$SECS" -max_len=65536 -timeout=10 -rss_limit_mb=2048 "$corpus"
