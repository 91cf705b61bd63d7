#!/bin/sh
# Start-up of the torch-free `hubload` against `curl --version` (issue 15:
# within 3x), and of `hubload-torch --version` (the LibTorch executable that
# `hubload` hands load/reshard/distributed commands to), as the median wall
# time of N runs each, measured from one /usr/bin/python3 process (the same
# spawn overhead for every command) and printed as ratios to curl.
# Peak RSS from /usr/bin/time -f %M. Not a test: figures go to bench/README.md.
#   bench/cli_startup_bench.sh [BUILD_DIR] [N]
set -eu
BUILD=${1:-build}
N=${2:-50}
HUBLOAD="$BUILD/tools/hubload/hubload"
TORCH="$BUILD/tools/hubload/hubload-torch"
[ -x "$HUBLOAD" ] || { echo "cli_startup_bench: no $HUBLOAD (build the hubload_cli target)" >&2; exit 1; }
command -v curl >/dev/null || { echo "cli_startup_bench: skipped: no curl" >&2; exit 0; }
/usr/bin/python3 - "$N" "$(command -v curl)" "$HUBLOAD" "$TORCH" <<'PY'
import os, statistics, subprocess, sys, time
n = int(sys.argv[1]); curl, hubload, torch = sys.argv[2:5]
def median(argv):
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm the page cache
    t = []
    for _ in range(n):
        s = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        t.append(time.perf_counter() - s)
    return statistics.median(t)
def rss(argv):
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    return int(r.stderr.strip().splitlines()[-1])
rows = [("curl --version", [curl, "--version"]), ("hubload --version", [hubload, "--version"]),
        ("hubload download --help", [hubload, "download", "--help"])]
if os.access(torch, os.X_OK):
    rows.append(("hubload-torch --version", [torch, "--version"]))
    rows.append(("hubload load --help (hand-over)", [hubload, "load", "--help"]))
base = None
print(f"median of {n} runs; ratio to curl --version")
for name, argv in rows:
    m = median(argv)
    base = base or m
    print(f"{name:34s} {m * 1e3:8.2f} ms  ratio {m / base:5.2f}  peak RSS {rss(argv) / 1024:6.1f} MiB")
PY
