// Reads every file of a repo at a revision with @huggingface/hub (the JS
// client, independent of hubload) and prints one JSON object:
//   {"files": {"<path>": {"size": N, "sha256": "<hex of the downloaded bytes>",
//                         "lfsOid": "<tree lfs.oid or null>"}}}
// Usage: node push_read.mjs HUB_URL REPO_ID REVISION [TOKEN]
import { createHash } from "node:crypto";
import { listFiles, downloadFile } from "@huggingface/hub";

const [hubUrl, name, revision, accessToken] = process.argv.slice(2);
if (!hubUrl || !name || !revision) {
  console.error("usage: node push_read.mjs HUB_URL REPO_ID REVISION [TOKEN]");
  process.exit(2);
}
const repo = { type: "model", name };
const out = {};
for await (const f of listFiles({ repo, revision, recursive: true, hubUrl, accessToken })) {
  if (f.type !== "file") continue;
  const blob = await downloadFile({ repo, path: f.path, revision, hubUrl, accessToken });
  if (!blob) throw new Error(`downloadFile returned null for ${f.path}`);
  const bytes = Buffer.from(await blob.arrayBuffer());
  out[f.path] = {
    size: bytes.length,
    sha256: createHash("sha256").update(bytes).digest("hex"),
    lfsOid: f.lfs ? f.lfs.oid : null,
  };
}
console.log(JSON.stringify({ files: out }));
