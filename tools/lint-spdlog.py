#!/usr/bin/env python3
"""Fails when a file that uses spdlog is compiled in spdlog's header-only mode.

hubload logs through the default logger of the compiled libspdlog
(spdlog::spdlog defines SPDLOG_COMPILED_LIB). A translation unit that includes
spdlog's headers without that definition gets a registry and a default logger
of its own: what it logs, or a capture it attaches (util::WarningCapture),
never meets the library's (issue 38: a test's capture saw no warning in an
optimised build).

Reads a build's compile_commands.json (CMAKE_EXPORT_COMPILE_COMMANDS is on):
every compiled file that includes <spdlog/...>, directly or through a header
of the tree that does, must have -DSPDLOG_COMPILED_LIB on its command line.

Usage: tools/lint-spdlog.py BUILD_DIR/compile_commands.json
Exit 0 when every such file is compiled against libspdlog, 1 naming the others,
2 when the database cannot be read.
"""
import json
import os
import re
import shlex
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def includes(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return INCLUDE.findall(f.read())
    except OSError:
        return []


def uses_spdlog(path, roots, memo, stack=()):
    """True when `path` includes spdlog directly or through headers of the tree."""
    if path in memo:
        return memo[path]
    if path in stack:
        return False
    found = False
    for inc in includes(path):
        if inc.startswith("spdlog/"):
            found = True
            break
        for root in (os.path.dirname(path),) + roots:
            cand = os.path.normpath(os.path.join(root, inc))
            if os.path.isfile(cand):
                if uses_spdlog(cand, roots, memo, stack + (path,)):
                    found = True
                break
        if found:
            break
    memo[path] = found
    return found


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    db_path = sys.argv[1]
    try:
        with open(db_path, encoding="utf-8") as f:
            db = json.load(f)
        if not isinstance(db, list):
            raise ValueError("not a JSON array")
    except (OSError, ValueError) as e:
        print(f"lint-spdlog: cannot read {db_path}: {e}", file=sys.stderr)
        return 2
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = (source, os.path.join(source, "include"), os.path.join(source, "tests"))
    memo, bad, checked = {}, [], 0
    for entry in db:
        if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
            continue
        f = entry["file"]
        if not os.path.isabs(f):
            f = os.path.join(entry.get("directory", ""), f)
        f = os.path.normpath(f)
        if not f.startswith(source + os.sep) or not uses_spdlog(f, roots, memo):
            continue
        checked += 1
        args = entry.get("arguments") or shlex.split(entry.get("command", ""))
        if "-DSPDLOG_COMPILED_LIB" not in args:
            bad.append(os.path.relpath(f, source))
    if bad:
        print("lint-spdlog: these files use spdlog but are compiled in its header-only mode (no "
              "-DSPDLOG_COMPILED_LIB: link their target to spdlog::spdlog), so their default logger is not "
              "the library's:", file=sys.stderr)
        for b in sorted(set(bad)):
            print("  " + b, file=sys.stderr)
        return 1
    print(f"lint-spdlog: {checked} compiled files use spdlog, all against libspdlog")
    return 0


if __name__ == "__main__":
    sys.exit(main())
