#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a bounded time
# over its seed corpus. Usage: tools/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]
#   SECONDS_PER_TARGET  default 60; each target gets this budget (CI total =
#                       targets x seconds + the build)
#   TARGET              safetensors_header_fuzz, server_commit_fuzz,
#                       server_router_fuzz (default: all)
# Extra libFuzzer flags can be given in $HUBLOAD_FUZZ_FLAGS (e.g. -runs=1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-60}"
shift || true
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(safetensors_header_fuzz server_commit_fuzz server_router_fuzz)
tools/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DHUBLOAD_FUZZ=ON -DHUBLOAD_WITH_TORCH=OFF -DHUBLOAD_WITH_CUDA=OFF \
  -DHUBLOAD_BUILD_TESTS=OFF -DHUBLOAD_BUILD_TOOLS=OFF -DHUBLOAD_BUILD_BENCH=OFF >/dev/null
cmake --build build-fuzz --target "${TARGETS[@]}"
corpus=build-fuzz/corpus
mkdir -p "$corpus"
python3 tests/fuzz/make_seeds.py "$corpus/safetensors_header_fuzz"
python3 tests/fuzz/make_server_seeds.py "$corpus/server_commit_fuzz" "$corpus/server_router_fuzz"
for t in "${TARGETS[@]}"; do
  dict=()
  [[ $t == server_* ]] && dict=(-dict=tests/fuzz/server.dict)
  echo "=== $t (${SECS} s)"
  # shellcheck disable=SC2086
  build-fuzz/tests/fuzz/$t -max_total_time="$SECS" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 "${dict[@]}" ${HUBLOAD_FUZZ_FLAGS:-} "$corpus/$t"
done
