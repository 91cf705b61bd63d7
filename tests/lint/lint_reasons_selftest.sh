#!/usr/bin/env bash
# Self-test of tools/lint-reasons.py: each known-bad snippet alone in a scratch
# tree must fail the lint, the known-good ones must pass, and so must the
# repository itself.
# Usage: tests/lint/lint_reasons_selftest.sh  (exit 0 when all cases behave)
set -uo pipefail
lint="$(cd "$(dirname "$0")/../.." && pwd)/tools/lint-reasons.py"
fails=0
check() {  # check EXPECTED_RC SNIPPET
  local root; root=$(mktemp -d); mkdir -p "$root/hub"
  printf '%s\n' "$2" > "$root/hub/x.cc"
  python3 "$lint" "$root" >/dev/null 2>&1; local rc=$?
  rm -rf "$root"
  if [[ $rc -ne $1 ]]; then echo "FAIL (rc $rc, expected $1): $2"; fails=$((fails + 1)); fi
}
check 1 'Status f() { return Status(Code::kNotFound, "gone", "NotFound"); }'
check 1 'Status st(Code::kIOError, "cannot " + what,
  "IOError", ctx);'
check 1 'bool f(const Status& s) { return s.Is("HashMismatch"); }'
check 1 'bool f(const Status& s) { return s.reason() == "HashMismatch"; }'
check 1 'bool f(const Status& s) { return "HashMismatch" != s.reason(); }'
check 0 'Status f() { return Status(Code::kNotFound, "gone", reason::kNotFound); }'
check 0 'Status f() { return Status(Code::kNotFound, "NotFound"); }  // a message, not a reason'
check 0 '// Status(Code::kNotFound, "gone", "NotFound") in a comment'
check 0 'bool f(const Status& s) { return s.Is(reason::kHashMismatch); }'
python3 "$lint" >/dev/null || { echo "FAIL: the repository does not pass the lint"; fails=$((fails + 1)); }
if [[ $fails -ne 0 ]]; then echo "lint-reasons self-test: $fails case(s) failed"; exit 1; fi
echo "lint-reasons self-test: all cases behave"
