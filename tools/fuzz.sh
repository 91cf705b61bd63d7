#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time over
# its seed corpus. Usage: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 60; each target gets this budget (CI total =
#                       targets x seconds + the build); per-target overrides:
#                       HUBLOAD_FUZZ_SECONDS_SAFETENSORS, _PICKLE, _HTTP, _HUBJSON,
#                       _SERVER_COMMIT, _SERVER_ROUTER
#   TARGET              safetensors_header_fuzz (safetensors header + index parsers),
#                       pickle_fuzz (torch.save reader: zip, legacy, restricted unpickler),
#                       http_headers_fuzz (the HTTP header values the Hub client parses),
#                       hub_json_fuzz (the Hub's JSON answers and the cache's tree files),
#                       server_commit_fuzz (hubload serve request bodies, NDJSON commit),
#                       server_router_fuzz (hubload serve router and handlers); default: all
# Extra libFuzzer flags can be given in $HUBLOAD_FUZZ_FLAGS (e.g. -runs=1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(safetensors_header_fuzz pickle_fuzz http_headers_fuzz hub_json_fuzz server_commit_fuzz server_router_fuzz)
tools/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DHUBLOAD_FUZZ=ON -DHUBLOAD_WITH_TORCH=OFF -DHUBLOAD_WITH_CUDA=OFF \
  -DHUBLOAD_BUILD_TESTS=OFF -DHUBLOAD_BUILD_TOOLS=OFF -DHUBLOAD_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target "${TARGETS[@]}"
FLAGS=(-max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
corpus=build-fuzz/corpus
mkdir -p "$corpus"
for t in "${TARGETS[@]}"; do
  extra=()
  dir="$corpus/$t"
  case $t in
    safetensors_header_fuzz)
      python3 tests/fuzz/make_seeds.py "$corpus/$t"
      secs=${HUBLOAD_FUZZ_SECONDS_SAFETENSORS:-$SECS} ;;
    pickle_fuzz)
      # Seeds with real torch.save files when Debian's python3-torch is installed.
      /usr/bin/python3 tests/fuzz/make_pickle_seeds.py "$corpus/$t"
      secs=${HUBLOAD_FUZZ_SECONDS_PICKLE:-$SECS} ;;
    http_headers_fuzz)
      python3 tests/fuzz/make_hub_seeds.py "$corpus"; dir="$corpus/http_headers"
      extra=(-max_len=4096 -dict=tests/fuzz/http_headers.dict)
      secs=${HUBLOAD_FUZZ_SECONDS_HTTP:-$SECS} ;;
    hub_json_fuzz)
      python3 tests/fuzz/make_hub_seeds.py "$corpus"; dir="$corpus/hub_json"
      extra=(-dict=tests/fuzz/hub_json.dict)
      secs=${HUBLOAD_FUZZ_SECONDS_HUBJSON:-$SECS} ;;
    server_commit_fuzz | server_router_fuzz)
      python3 tests/fuzz/make_server_seeds.py "$corpus/server_commit_fuzz" "$corpus/server_router_fuzz"
      extra=(-dict=tests/fuzz/server.dict)
      if [[ $t == server_commit_fuzz ]]; then secs=${HUBLOAD_FUZZ_SECONDS_SERVER_COMMIT:-$SECS}
      else secs=${HUBLOAD_FUZZ_SECONDS_SERVER_ROUTER:-$SECS}; fi ;;
    *) echo "fuzz.sh: unknown target $t" >&2; exit 2 ;;
  esac
  echo "=== $t (${secs} s)"
  # shellcheck disable=SC2086
  build-fuzz/tests/fuzz/$t -max_total_time="$secs" "${FLAGS[@]}" "${extra[@]}" ${HUBLOAD_FUZZ_FLAGS:-} "$dir"
done
