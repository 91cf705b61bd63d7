#!/usr/bin/env bash
# The README's main-job command. Installs dependencies, builds hubload, then runs
# the main job (see README "Main job"). Extra CMake options may be passed through
# HUBLOAD_CMAKE_ARGS; the build folder through HUBLOAD_BUILD_DIR (default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
BUILD_DIR="${HUBLOAD_BUILD_DIR:-build}"
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo ${HUBLOAD_CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" --target hubload_cli
exec tools/demo.sh "$BUILD_DIR/tools/hubload/hubload" "$@"
