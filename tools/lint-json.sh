#!/usr/bin/env bash
# Fails when hub/ or cache/ read JSON with nlohmann's throwing accessors
# instead of util::JsonIn (util/json.h): `.value(<key>...)`, `.get<...>`,
# `.get_to(...)`, `.at(...)`. Untrusted JSON (Hub answers, cache files) is
# parsed with util::ParseJson and read only through util::JsonIn; the only file
# allowed to call these is util/json.cc. hub/server/ (the test double, its own
# request parsing) is checked by its own rules and skipped here.
# Optional/Result `.value()` without an argument is not flagged.
# Usage: tools/lint-json.sh  (exit 1 and the offending lines when any)
set -euo pipefail
cd "$(dirname "$0")/.."
pattern='\.value\([^)]|\.get<|\.get_to\(|\.at\('
hits=$(grep -rnE "$pattern" hub cache --include='*.cc' --include='*.h' | grep -v '^hub/server/' || true)
if [[ -n "$hits" ]]; then
  echo "lint-json: JSON read without util::JsonIn (use util::ParseJson + util::JsonIn):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "lint-json: hub/ and cache/ read JSON only through util::JsonIn"
