#!/usr/bin/env python3
"""The JSON lint (run through tools/lint-json.sh; see there for the rule).

Usage: lint-json.py [ROOT]   (default: the repository root)
Scans ROOT/hub, ROOT/cache, ROOT/loader and ROOT/tools (every C++ source or
header extension). Exit 1 with "file:line: text   <- why" lines when a file
reads JSON outside util::JsonIn, parses it outside util::ParseJson, or turns
JSON into text outside util::DumpJson.
"""
import os
import re
import sys

EXTS = {".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".inc", ".inl", ".ipp", ".tcc", ".cu", ".cuh"}
DIRS = ("hub", "cache", "loader", "tools")
# The safetensors core depends on nothing (util/ included): get<T> there only
# on a line marked `// json: checked (is_X)` with is_X() on it or the 8 lines above.
CORE = re.compile(r"^loader/safetensors/(header|index)\.cc$")
CHECK_TYPES = {"is_number_unsigned": "uint64_t", "is_number_float": "double", "is_string": "std::string",
               "is_boolean": "bool"}
# get<T> or get_ref<const T&> only.

# Calls matched on the text with comments and string contents blanked; a
# call may be split over lines (\s matches newlines).
ACC = r"(?:\.|->)\s*"
PATTERNS = [
    (re.compile(ACC + r"value\s*\(\s*[^)\s]"), "value(key, default) (throws on a wrong type)"),
    (re.compile(ACC + r"(?:template\s+)?get\s*<"), "get<T>() (throws on a wrong type)"),
    (re.compile(ACC + r"get_to\s*\("), "get_to() (throws on a wrong type)"),
    (re.compile(ACC + r"at\s*\("), "at() (throws on a missing key; use find())"),
    (re.compile(r"\bget_ref\s*<"), "get_ref<T>() (throws on a wrong type)"),
    # (sax_parse reports errors to its handler and never throws: allowed.)
    (re.compile(r"\b(?:ordered_)?json\s*::\s*parse\s*\("), "json::parse (use util::ParseJson)"),
    (re.compile(r"\bfrom_json\s*\("), "from_json() (throws on a wrong type)"),
    (re.compile(r"\bjson_pointer\b"), "json_pointer (throws on a missing path)"),
]
DUMP = re.compile(ACC + r"dump\s*\(")
# j["key"] read as a value (a write is `j["key"] = ...`, `j["a"]["b"] = ...`,
# `j["key"].push_back(...)`): an implicit conversion, or undefined on a const
# json without the key.
SUBSCRIPT = re.compile(r"\[\s*\"(?:[^\"\\\n]|\\.)*\"\s*\]")
WRITE_AFTER = re.compile(r"\s*(?:=(?!=)|\[|\.\s*(?:push_back|emplace_back|emplace|update|erase)\s*\(|\+=)")


def blank(text, keep_strings):
    """Comments (and, unless keep_strings, string/char contents) replaced by spaces; newlines kept."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i + m.end())
            end = n if end < 0 else end + len(m.group(1)) + 2
            if not keep_strings:
                for k in range(i + 2, end - 1):
                    if out[k] != "\n":
                        out[k] = " "
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if not keep_strings:
                for k in range(i + 1, min(j, n)):
                    out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def call_args(text, open_paren):
    """The text between the parenthesis at open_paren and its match."""
    depth, i = 0, open_paren
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[open_paren + 1:i]
        i += 1
    return text[open_paren + 1:]


def core_marked(lines, num, code_line, raw_line):
    """"" when a get<T> on core line `num` (1-based) is acceptable, else why not."""
    m = re.search(r"//\s*json:\s*checked\s*\((is_[a-z_]+)\)", raw_line)
    if not m:
        return "no '// json: checked (is_X)' marker"
    check = m.group(1)
    want = CHECK_TYPES.get(check)
    if not want:
        return "unknown check " + check
    for t in re.findall(r"get(?:_ref)?\s*<\s*([^>]*?)\s*>", code_line):
        if t != want and t != "const " + want + "&":
            return "get<> of another type than %s guarantees (%s)" % (check, want)
    window = "\n".join(lines[max(0, num - 9):num - 1]) + "\n" + raw_line.split("//")[0]
    if check + "()" not in window:
        return check + "() does not appear on the line or the 8 above"
    return ""


def lint_file(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        raw = f.read()
    lines = raw.split("\n")
    code = blank(raw, keep_strings=False)
    code_lines = code.split("\n")
    with_strings = blank(raw, keep_strings=True)
    core = bool(CORE.match(rel))
    bad = []

    def line_of(pos):
        return code.count("\n", 0, pos) + 1

    def report(pos, why):
        num = line_of(pos)
        bad.append("%s:%d: %s   <- %s" % (rel, num, lines[num - 1].strip(), why))

    for rx, why in PATTERNS:
        for m in rx.finditer(code):
            num = line_of(m.start())
            if core and re.search(r"get(?:_ref)?\s*<", m.group(0)):
                problem = core_marked(lines, num, code_lines[num - 1], lines[num - 1])
                if not problem:
                    continue
                report(m.start(), problem)
                continue
            if core and "parse" in m.group(0):
                args = call_args(raw, m.end() - 1)
                if re.search(r"/\*\s*allow_exceptions\s*=\s*\*/\s*false", args):
                    continue
                why = "json::parse without /*allow_exceptions=*/false"
            report(m.start(), why)
    for m in DUMP.finditer(code):
        args = call_args(code, m.end() - 1)
        if "error_handler_t::replace" not in args:
            report(m.start(), "dump() throws on invalid UTF-8 (use util::DumpJson)")
    for m in SUBSCRIPT.finditer(with_strings):
        if code[m.start()] != "[":  # inside a comment
            continue
        if not WRITE_AFTER.match(with_strings, m.end()):
            report(m.start(), 'j["key"] read (use util::JsonIn, or find() on a checked object)')
    return bad


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    bad, core_gets, files = [], 0, 0
    for d in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, d)):
            dirnames[:] = sorted(x for x in dirnames if x != "node_modules")
            for name in sorted(filenames):
                if os.path.splitext(name)[1] not in EXTS:
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                files += 1
                bad += lint_file(root, rel)
                if CORE.match(rel):
                    with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                        core_gets += len(re.findall(r"//\s*json:\s*checked", f.read()))
    if bad:
        print("lint-json: JSON read, parsed or written outside util/json.h (use util::ParseJson, util::JsonIn, "
              "util::DumpJson):", file=sys.stderr)
        print("\n".join(bad), file=sys.stderr)
        return 1
    print("lint-json: %d files of hub/ (server included), cache/, loader/ and tools/ read JSON only through "
          "util::JsonIn (%d type-checked get<> in the safetensors core)" % (files, core_gets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
