#!/usr/bin/env bash
# ctest entry: installs the pinned JS client (no-op when up to date), then runs
# interop.mjs against the given hubload binary. Usage: run.sh NODE HUBLOAD_BIN
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$here/../../tools/js-deps.sh"
cd "$here"
exec "$1" interop.mjs "$2"
