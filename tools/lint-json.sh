#!/usr/bin/env bash
# Fails when hub/ (the server hub/server/ included), cache/, loader/ or tools/
# (the CLI) touch JSON outside util/json.h:
#  - reads with nlohmann's throwing accessors instead of util::JsonIn:
#    `.value(<key>...)`, `.get<...>` (also `.template get<`), `.get_to(`,
#    `.at(`, `get_ref<`, `from_json(`, `json_pointer`, through `.` or `->`,
#    a call split over lines included; `j["key"]` used as a value (an implicit
#    conversion, or undefined behaviour on a const json without the key);
#  - `json::parse(` (untrusted text is parsed with util::ParseJson: no
#    exception, nesting bounded); nlohmann's sax_parse never throws and is allowed;
#  - `.dump(` without `error_handler_t::replace` (util::DumpJson: a name that
#    is not UTF-8 must not abort `cache ls --json`).
# Optional/Result `.value()` without an argument is not flagged. `.at(` is
# flagged on any type: use find() on maps too, so the rule stays one pattern.
# Every C++ extension is scanned (.cc .h .hpp .inc .cu ...); comments and
# string literals are not. Libraries also compile with
# JSON_USE_IMPLICIT_CONVERSIONS=0 (cmake/HubloadHelpers.cmake).
#
# One narrow exception: the safetensors core (loader/safetensors/header.cc,
# index.cc) depends on nothing, util/ included, so it cannot use JsonIn. There a
# `get<T>()` or `get_ref<const T&>()` is accepted only on a line marked
# `// json: checked (is_X)`, where is_X is the nlohmann type check that makes it
# safe, and the lint checks that `is_X()` really appears on that line or on one
# of the 8 lines above it, and that T is the type is_X guarantees; and
# `json::parse(...)` only with `/*allow_exceptions=*/false`.
# Usage: tools/lint-json.sh [ROOT]  (exit 1 and the offending lines when any;
# ROOT defaults to the repository; tests/lint/lint_json_selftest.sh feeds it
# known-bad and known-good snippets).
set -euo pipefail
exec python3 "$(dirname "$0")/lint-json.py" "$@"
