#!/usr/bin/env bash
# Installs the pinned JS client (@huggingface/hub, see tests/js/package-lock.json)
# used as the independent judge of protocol fidelity. Skips when up to date.
set -euo pipefail
cd "$(dirname "$0")/../tests/js"
[[ -f package-lock.json ]] || exit 0
stamp=node_modules/.hubload-lock-sha
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [[ -f $stamp && "$(cat $stamp)" == "$want" ]]; then exit 0; fi
npm ci --no-audit --no-fund --loglevel=error >/dev/null
echo "$want" >"$stamp"
