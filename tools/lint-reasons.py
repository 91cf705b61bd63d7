#!/usr/bin/env python3
"""Fails when library or CLI code (hub/, cache/, loader/, util/, tools/) names a
Status reason with a string literal instead of a hubload/reasons.h constant:

  - a Status constructed with a literal reason:
      Status(Code::kX, msg, "SomeReason" ...)   Status st(Code::kX, msg, "SomeReason")
  - a reason compared with a literal:
      st.Is("SomeReason")   st.reason() == "SomeReason"   "SomeReason" != r.reason()

Comments are skipped; a call split over lines is read whole.
Usage: tools/lint-reasons.py [ROOT]  (exit 1 and the offending places when any).
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
DIRS = ["hub", "cache", "loader", "util", "tools"]
EXTS = {".cc", ".h", ".hpp", ".cu", ".inc"}
LITERAL = re.compile(r'\s*"[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*"\s*$')
CONSTRUCT = re.compile(r"\bStatus(\s+[A-Za-z_]\w*)?\(\s*(?=Code::)")
COMPARE = re.compile(r'\.Is\(\s*"|reason\(\)\s*[!=]=\s*"|"\s*[!=]=\s*[\w.>-]*reason\(\)')


def strip_comments(text):
    """Blanks // and /* */ comments, keeping string literals and line numbers."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def arguments(text, open_paren):
    """The top-level arguments of the call whose '(' is at open_paren."""
    depth, j, start, args = 0, open_paren, open_paren + 1, []
    while j < len(text):
        c = text[j]
        if c in "\"'":
            k = j + 1
            while k < len(text) and text[k] != c:
                k += 2 if text[k] == "\\" else 1
            j = k + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:j])
                return args
        elif c == "," and depth == 1:
            args.append(text[start:j])
            start = j + 1
        j += 1
    return args


def main():
    problems = []
    for d in DIRS:
        for path in sorted((ROOT / d).rglob("*")):
            if path.suffix not in EXTS or not path.is_file():
                continue
            text = strip_comments(path.read_text(errors="replace"))
            rel = path.relative_to(ROOT)
            for m in CONSTRUCT.finditer(text):
                args = arguments(text, m.end() - 1)
                if len(args) >= 3 and LITERAL.match(args[2]):
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"{rel}:{line}: Status reason {args[2].strip()} is a literal: use a reason:: constant (hubload/reasons.h)")
            for m in COMPARE.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{rel}:{line}: a reason compared with a literal: use st.Is(reason::kX)")
    for p in problems:
        print(p)
    if problems:
        print(f"lint-reasons: {len(problems)} place(s) name a reason by a literal", file=sys.stderr)
        return 1
    print("lint-reasons: every Status reason in hub/, cache/, loader/, util/ and tools/ is a reasons.h constant")
    return 0


if __name__ == "__main__":
    sys.exit(main())
