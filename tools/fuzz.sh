#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time
# (seconds, default 60) over its seed corpus:
#   safetensors_header_fuzz  the safetensors header and index parsers
#   http_headers_fuzz        the HTTP header values the Hub client parses
#   hub_json_fuzz            the Hub's JSON answers and the cache's tree files
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -eq 0 ]] && TARGETS=(safetensors_header_fuzz http_headers_fuzz hub_json_fuzz)
tools/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DHUBLOAD_FUZZ=ON -DHUBLOAD_WITH_TORCH=OFF \
  -DHUBLOAD_BUILD_TESTS=OFF -DHUBLOAD_BUILD_TOOLS=OFF -DHUBLOAD_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target "${TARGETS[@]}"
corpus=build-fuzz/corpus
mkdir -p "$corpus"
python3 tests/fuzz/make_seeds.py "$corpus/safetensors"
python3 tests/fuzz/make_hub_seeds.py "$corpus"
for t in "${TARGETS[@]}"; do
  case "$t" in
    safetensors_header_fuzz) dir="$corpus/safetensors"; extra=(-max_len=65536) ;;
    http_headers_fuzz) dir="$corpus/http_headers"; extra=(-max_len=4096 -dict=tests/fuzz/http_headers.dict) ;;
    hub_json_fuzz) dir="$corpus/hub_json"; extra=(-max_len=65536 -dict=tests/fuzz/hub_json.dict) ;;
    *) echo "unknown fuzz target $t" >&2; exit 2 ;;
  esac
  echo "=== $t (${SECS} s)"
  build-fuzz/tests/fuzz/"$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 "${extra[@]}" "$dir"
done
