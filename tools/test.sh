#!/usr/bin/env bash
# The README's test command: installs dependencies, configures, builds and runs
# the whole test suite with ctest. Extra CMake options may be passed through
# HUBLOAD_CMAKE_ARGS; the build folder through HUBLOAD_BUILD_DIR (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/js-deps.sh
BUILD_DIR="${HUBLOAD_BUILD_DIR:-build}"
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja ${HUBLOAD_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${HUBLOAD_TEST_JOBS:-2}" ${HUBLOAD_CTEST_ARGS:-}
