#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time
# (seconds, default 60) over its seed corpus:
#   safetensors_header_fuzz  the safetensors header and index parsers
#   pickle_fuzz              the torch.save reader (zip, legacy, restricted unpickler)
#   http_headers_fuzz        the HTTP header values the Hub client parses
#   hub_json_fuzz            the Hub's JSON answers and the cache's tree files
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]   (per target); per-target budgets
# HUBLOAD_FUZZ_SECONDS_SAFETENSORS, HUBLOAD_FUZZ_SECONDS_PICKLE,
# HUBLOAD_FUZZ_SECONDS_HTTP, HUBLOAD_FUZZ_SECONDS_HUBJSON override SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -eq 0 ]] && TARGETS=(safetensors_header_fuzz pickle_fuzz http_headers_fuzz hub_json_fuzz)
tools/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DHUBLOAD_FUZZ=ON -DHUBLOAD_WITH_TORCH=OFF \
  -DHUBLOAD_BUILD_TESTS=OFF -DHUBLOAD_BUILD_TOOLS=OFF -DHUBLOAD_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target "${TARGETS[@]}"
FLAGS=(-timeout=10 -rss_limit_mb=2048)
corpus=build-fuzz/corpus
mkdir -p "$corpus"
for t in "${TARGETS[@]}"; do
  case "$t" in
    safetensors_header_fuzz)
      dir="$corpus/safetensors"; python3 tests/fuzz/make_seeds.py "$dir"
      secs="${HUBLOAD_FUZZ_SECONDS_SAFETENSORS:-$SECS}"; extra=(-max_len=65536) ;;
    pickle_fuzz)
      # Seeds with real torch.save files when Debian's python3-torch is installed.
      dir="$corpus/pickle"; mkdir -p "$dir"; /usr/bin/python3 tests/fuzz/make_pickle_seeds.py "$dir"
      secs="${HUBLOAD_FUZZ_SECONDS_PICKLE:-$SECS}"; extra=(-max_len=65536) ;;
    http_headers_fuzz)
      python3 tests/fuzz/make_hub_seeds.py "$corpus"; dir="$corpus/http_headers"
      secs="${HUBLOAD_FUZZ_SECONDS_HTTP:-$SECS}"; extra=(-max_len=4096 -dict=tests/fuzz/http_headers.dict) ;;
    hub_json_fuzz)
      python3 tests/fuzz/make_hub_seeds.py "$corpus"; dir="$corpus/hub_json"
      secs="${HUBLOAD_FUZZ_SECONDS_HUBJSON:-$SECS}"; extra=(-max_len=65536 -dict=tests/fuzz/hub_json.dict) ;;
    *) echo "unknown fuzz target $t" >&2; exit 2 ;;
  esac
  echo "=== $t (${secs} s)"
  build-fuzz/tests/fuzz/"$t" -max_total_time="$secs" "${FLAGS[@]}" "${extra[@]}" "$dir"
done
