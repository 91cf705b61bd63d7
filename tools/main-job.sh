#!/usr/bin/env bash
# The README's main-job command. Installs dependencies, builds hubload, then runs
# the main job (see README "Main job").
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
BUILD_DIR="${HUBLOAD_BUILD_DIR:-build}"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" --target hubload_cli
exec tools/demo.sh "$BUILD_DIR/tools/hubload/hubload" "$@"
