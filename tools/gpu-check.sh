#!/usr/bin/env bash
# GPU checks of issue #8 in one script: builds the CUDA staging path (own build
# folder, CUDA on), runs the device tests (the GPU tests included) and the GPU
# benchmark, prints a summary. Finishes within 8 minutes (every step runs
# under `timeout`, against one deadline).
#
# Without a GPU it still runs: the GPU tests skip with the backend's message,
# gpu_bench prints its "skipped" line, and the script exits 0.
#
#   tools/gpu-check.sh               build (or reuse prebuilt binaries), test, bench
#   tools/gpu-check.sh --build-only  build the binaries only (e.g. here, to carry them
#                                    to a GPU machine that lacks the build dependencies)
#
# Environment:
#   HUBLOAD_GPU_BUILD_DIR   build folder (default build-gpu)
#   HUBLOAD_GPU_TORCH       auto|ON|OFF: also build LibTorch and the hubload CLI, which the
#                           end-to-end part of gpu_bench runs (auto: ON when the Debian
#                           LibTorch is installed and the machine has >= 8 cores)
#   HUBLOAD_GPU_BENCH_ARGS  gpu_bench arguments (default: --mib 1536 --shards 4 --runs 3)
#   HUBLOAD_SKIP_DEPS=1     do not run tools/install-deps.sh
# Exit status: 0 when everything that could run passed (skips included), 1 otherwise.
#
# Prebuilt binaries: when configuring or building fails (e.g. a GPU machine without a
# package registry and without the Debian build dependencies), the script runs
# $BUILD/tests/device/device_tests and $BUILD/bench/gpu_bench if they are present, e.g.
# built elsewhere with --build-only and carried along.
set -uo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
DEADLINE=$((SECONDS + 465))  # 7 min 45 s: the summary still fits in 8 minutes
left() { local l=$((DEADLINE - SECONDS)); ((l < 1)) && l=1; echo "$l"; }
log() { printf '[gpu-check %3ds] %s\n' $((SECONDS - START)) "$*"; }

BUILD_ONLY=0
[[ "${1:-}" == "--build-only" ]] && BUILD_ONLY=1
B="${HUBLOAD_GPU_BUILD_DIR:-build-gpu}"
BENCH_ARGS="${HUBLOAD_GPU_BENCH_ARGS:---mib 1536 --shards 4 --runs 3}"
JOBS=$(nproc 2>/dev/null || echo 2)

# ---- GPU and toolkit ------------------------------------------------------------
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  log "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n 4 | tr '\n' ';')"
else
  log "no GPU visible (nvidia-smi absent or failing): GPU tests will skip"
fi
NVCC=""
for c in "${CUDACXX:-}" /usr/local/cuda/bin/nvcc "$(command -v nvcc 2>/dev/null)"; do
  if [[ -n "$c" && -x "$c" ]]; then NVCC="$c"; break; fi
done
CUDA=ON
if [[ -z "$NVCC" ]]; then
  CUDA=OFF
  log "no nvcc found: building without CUDA (MakeCudaBackend reports BuiltWithoutCuda)"
else
  log "nvcc: $NVCC ($("$NVCC" --version | tail -n 1))"
fi

# ---- dependencies ---------------------------------------------------------------
if [[ "${HUBLOAD_SKIP_DEPS:-0}" != 1 ]]; then
  if ! timeout "$(( $(left) < 150 ? $(left) : 150 ))" tools/install-deps.sh; then
    log "tools/install-deps.sh failed (no package registry?): continuing with what is installed"
  fi
fi
TORCH="${HUBLOAD_GPU_TORCH:-auto}"
if [[ "$TORCH" == auto ]]; then
  TORCH=OFF
  if compgen -G "/usr/lib/*/cmake/Torch/TorchConfig.cmake" >/dev/null || [[ -f /usr/share/cmake/Torch/TorchConfig.cmake ]]; then
    ((JOBS >= 8)) && TORCH=ON
  fi
fi
log "LibTorch + CLI (end-to-end bench): $TORCH"

# ---- configure and build --------------------------------------------------------
mkdir -p "$B"
BUILT=0
TARGETS=(device_tests gpu_bench)
[[ "$TORCH" == ON ]] && TARGETS+=(hubload_cli)
if timeout "$(( $(left) < 120 ? $(left) : 120 ))" cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DHUBLOAD_WITH_CUDA="$CUDA" ${NVCC:+-DCMAKE_CUDA_COMPILER="$NVCC"} -DHUBLOAD_WITH_TORCH="$TORCH" \
     -DHUBLOAD_BUILD_TESTS=ON -DHUBLOAD_BUILD_BENCH=ON -DHUBLOAD_BUILD_TOOLS=ON >"$B/gpu-check-configure.log" 2>&1; then
  log "configured $B (CUDA $CUDA); building ${TARGETS[*]} with $JOBS jobs"
  if timeout "$(( $(left) - 120 > 30 ? $(left) - 120 : 30 ))" ninja -C "$B" -j "$JOBS" "${TARGETS[@]}" >"$B/gpu-check-build.log" 2>&1; then
    BUILT=1
    log "build done"
  else
    log "build failed or timed out; last lines of $B/gpu-check-build.log:"
    tail -n 25 "$B/gpu-check-build.log"
  fi
else
  log "configure failed (missing build dependencies?); last lines of $B/gpu-check-configure.log:"
  tail -n 15 "$B/gpu-check-configure.log"
fi
TESTS_BIN="$B/tests/device/device_tests"
BENCH_BIN="$B/bench/gpu_bench"
if ((BUILT == 0)); then
  if [[ -x "$TESTS_BIN" && -x "$BENCH_BIN" ]]; then
    log "using the prebuilt binaries in $B"
  else
    log "FAILED: nothing to run (no build, no prebuilt $TESTS_BIN and $BENCH_BIN)"
    exit 1
  fi
fi
if ((BUILD_ONLY)); then
  # The shared libraries a bare machine may lack (spdlog, fmt, curl, ...), for prebuilt use.
  mkdir -p "$B/lib"
  ldd "$TESTS_BIN" "$BENCH_BIN" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*|libcrypto|libssl|libz|libpthread|libdl|librt)\.so' |
    while read -r lib; do cp -L "$lib" "$B/lib/"; done
  log "--build-only: done; to run elsewhere carry $TESTS_BIN, $BENCH_BIN and $B/lib ($(ls "$B/lib" | tr '\n' ' '))"
  exit $((BUILT ? 0 : 1))
fi
[[ $BUILT == 0 && -d "$B/lib" ]] && export LD_LIBRARY_PATH="$PWD/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# ---- device tests ---------------------------------------------------------------
log "device tests (fake backend + GPU)"
timeout "$(( $(left) < 150 ? $(left) : 150 ))" "$TESTS_BIN" --gtest_color=no >"$B/gpu-check-tests.log" 2>&1
TEST_RC=$?
grep -E '^\[ *(RUN|OK|SKIPPED|FAILED) *\] Gpu\.|Skipped|no GPU for' "$B/gpu-check-tests.log" | head -n 40
grep -E '^\[==========\]|^\[  PASSED  \]|^\[  SKIPPED \] [0-9]|^\[  FAILED  \]' "$B/gpu-check-tests.log"
if ((TEST_RC != 0)); then
  log "device tests FAILED (rc $TEST_RC; 124 = timeout); failures:"
  grep -B 5 -E '^\[  FAILED  \]' "$B/gpu-check-tests.log" | head -n 60
fi

# ---- benchmark ------------------------------------------------------------------
log "gpu_bench $BENCH_ARGS"
HUBLOAD_BIN_PATH="$B/tools/hubload/hubload"
# shellcheck disable=SC2086
HUBLOAD_BIN="$(realpath "$HUBLOAD_BIN_PATH" 2>/dev/null || echo "$HUBLOAD_BIN_PATH")" \
  timeout "$(( $(left) - 5 > 10 ? $(left) - 5 : 10 ))" "$BENCH_BIN" $BENCH_ARGS 2>&1 | tee "$B/gpu-check-bench.log"
BENCH_RC=${PIPESTATUS[0]}

# ---- summary --------------------------------------------------------------------
echo
log "summary"
echo "  build:        $([[ $BUILT == 1 ]] && echo "ok ($B, CUDA $CUDA, LibTorch $TORCH)" || echo "prebuilt binaries")"
PASSED=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) tests?.*/\1/p' "$B/gpu-check-tests.log")
SKIPPED=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) tests?.*/\1/p' "$B/gpu-check-tests.log")
GPU_SKIPPED=$(grep -cE '^\[  SKIPPED \] Gpu\..*\([0-9]+ ms\)' "$B/gpu-check-tests.log")
echo "  device tests: $([[ $TEST_RC == 0 ]] && echo ok || echo "FAILED (rc $TEST_RC)"): ${PASSED:-0} passed, ${SKIPPED:-0} skipped (${GPU_SKIPPED} GPU tests skipped); log $B/gpu-check-tests.log"
echo "  gpu_bench:    $([[ $BENCH_RC == 0 ]] && echo ok || echo "FAILED (rc $BENCH_RC; 124 = timeout)"); log $B/gpu-check-bench.log"
echo "  elapsed:      $((SECONDS - START)) s"
((TEST_RC == 0 && BENCH_RC == 0)) && exit 0
exit 1
