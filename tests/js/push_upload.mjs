// Uploads every file of a local folder in one commit with @huggingface/hub
// `uploadFiles` (the JS client's push), for the push benchmark's baseline.
// Prints {"commit": "<oid>", "seconds": <wall time of uploadFiles>}.
// Usage: node push_upload.mjs HUB_URL REPO_ID LOCAL_DIR TOKEN
import { openAsBlob, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { uploadFiles } from "@huggingface/hub";

const [hubUrl, name, dir, accessToken] = process.argv.slice(2);
if (!hubUrl || !name || !dir || !accessToken) {
  console.error("usage: node push_upload.mjs HUB_URL REPO_ID LOCAL_DIR TOKEN");
  process.exit(2);
}
function walk(d) {
  const r = [];
  for (const e of readdirSync(d)) {
    const p = join(d, e);
    if (statSync(p).isDirectory()) r.push(...walk(p));
    else r.push(p);
  }
  return r;
}
const files = [];
for (const p of walk(dir)) files.push({ path: relative(dir, p).split("\\").join("/"), content: await openAsBlob(p) });
const t0 = process.hrtime.bigint();
const res = await uploadFiles({
  repo: { type: "model", name },
  files,
  accessToken,
  hubUrl,
  useXet: false,
  commitTitle: "push bench (JS uploadFiles)",
});
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({ commit: res.commit.oid, seconds }));
