#!/usr/bin/env bash
# The main job (called by tools/main-job.sh with the built CLI):
#   1. generate a deterministic multi-shard diffusers-style model (hundreds of MB,
#      F32/BF16/F16/I64, sharded transformer + fp16 variant, text encoder);
#   2. put it into a fresh `hubload serve` store as repo demo/tiny-dit;
#   3. serve it on 127.0.0.1 (port 0), no outside network needed;
#   4. load it by repo id through the fetch-and-load pipeline (fp32 shards, then
#      the fp16 variant), printing the JSON reports and a human summary;
#   5. stop the server and clean up.
# Usage: tools/demo.sh PATH/TO/hubload
# Env: HUBLOAD_DEMO_SIZE_MB (default 300), HUBLOAD_DEMO_KEEP=1 keeps the work folder.
set -euo pipefail

BIN="${1:?usage: tools/demo.sh PATH/TO/hubload}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
SIZE_MB="${HUBLOAD_DEMO_SIZE_MB:-300}"
REPO="demo/tiny-dit"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/hubload-demo.XXXXXX")"
SERVER_PID=""

cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ "${HUBLOAD_DEMO_KEEP:-0}" == 1 ]]; then
    echo "demo: work folder kept at $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

# The demo never talks to the real Hub and must not read a user's token or cache.
unset HF_TOKEN HF_HUB_OFFLINE HF_ENDPOINT
export HF_HOME="$WORK/hf_home"

echo "== 1. generating the demo model ($SIZE_MB MB, seed 1)"
"$BIN" demo-model "$WORK/model" --size-mb "$SIZE_MB" --seed 1

echo "== 2. creating repo $REPO in a local store"
COMMIT="$("$BIN" store add "$WORK/store" "$REPO" "$WORK/model" | tail -n 1)"
echo "commit $COMMIT"

echo "== 3. starting hubload serve on 127.0.0.1"
"$BIN" serve "$WORK/store" --host 127.0.0.1 --port 0 >"$WORK/serve.log" 2>&1 &
SERVER_PID=$!
URL=""
for _ in $(seq 1 200); do  # up to 20 s
  URL="$(sed -n 's/^listening on \(http:[^ ]*\).*/\1/p' "$WORK/serve.log" | head -n 1)"
  [[ -n "$URL" ]] && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/serve.log" >&2; echo "demo: server exited" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$URL" ]] || { cat "$WORK/serve.log" >&2; echo "demo: server did not start" >&2; exit 1; }
echo "server at $URL"

load() {  # load NAME ARGS... -> $WORK/NAME.json
  local name="$1"
  shift
  "$BIN" --endpoint "$URL" --cache-dir "$WORK/cache" load "$REPO" "$@" --json >"$WORK/$name.json"
}

echo "== 4a. loading $REPO --subfolder transformer (fp32 shards) by repo id"
load fp32 --subfolder transformer
echo "== 4b. loading $REPO --subfolder transformer --variant fp16 by repo id"
load fp16 --subfolder transformer --variant fp16
echo "== 4c. loading $REPO --subfolder text_encoder by repo id"
load text_encoder --subfolder text_encoder

echo "== report (transformer, fp32)"
cat "$WORK/fp32.json"
echo

python3 - "$WORK" <<'EOF'
import json, sys
work = sys.argv[1]
print("== summary")
for name in ("fp32", "fp16", "text_encoder"):
    with open(f"{work}/{name}.json") as f:
        r = json.load(f)
    tensors = r.get("tensors", {})
    items = tensors.items() if isinstance(tensors, dict) else [(t.get("name"), t) for t in tensors]
    dtypes, nbytes = {}, 0
    for _, t in items:
        dtypes[t["dtype"]] = dtypes.get(t["dtype"], 0) + 1
    t = r.get("timings", {})
    files = r.get("files", [])
    print(f"{name:>12}: {len(tensors)} tensors from {len(files)} file(s); dtypes "
          + ", ".join(f"{k}x{v}" for k, v in sorted(dtypes.items()))
          + f"; first tensor {t.get('time_to_first_tensor_s', 0):.3f} s, download {t.get('download_s', 0):.3f} s,"
          f" load {t.get('load_s', 0):.3f} s, total {t.get('total_s', 0):.3f} s")
EOF

echo "== 5. stopping the server"
kill "$SERVER_PID"
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
echo "demo: OK"
