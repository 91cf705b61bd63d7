// Interop test: the official JS client @huggingface/hub (version pinned in
// package-lock.json) against `hubload serve`, Xet disabled.
//
// Usage: node interop.mjs [HUBLOAD_BIN]   (default: $HUBLOAD_BIN)
// Exits 0 when every check passes, 1 on the first mismatch (message on stderr).
// Expected values come from the bytes this script writes and from node:crypto,
// never from hubload.
import { spawn, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, readlinkSync, rmSync, existsSync, lstatSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, basename } from "node:path";
import * as hub from "@huggingface/hub";

const bin = process.argv[2] || process.env.HUBLOAD_BIN;
if (!bin) {
  console.error("interop: pass the hubload binary as argument or set HUBLOAD_BIN");
  process.exit(2);
}
const TOKEN = "hf_interop_token";
const work = mkdtempSync(join(tmpdir(), "hubload-js-"));
let server = null;
let failures = 0;

function fail(msg) {
  failures++;
  throw new Error(msg);
}
function check(cond, msg) {
  if (!cond) fail(msg);
}
function sha256(buf) {
  return createHash("sha256").update(buf).digest("hex");
}
function gitSha1(buf) {
  return createHash("sha1").update(Buffer.concat([Buffer.from(`blob ${buf.length}\0`), buf])).digest("hex");
}
function sameBytes(a, b, what) {
  check(Buffer.compare(Buffer.from(a), Buffer.from(b)) === 0, `${what}: bytes differ (${a.length} vs ${b.length})`);
}

// A safetensors file built by hand: {name: [dtype, shape]} with F32/F16 data.
function safetensors(tensors) {
  const header = {};
  const parts = [];
  let off = 0;
  for (const [name, [dtype, shape]] of Object.entries(tensors)) {
    const n = shape.reduce((a, b) => a * b, 1) * (dtype === "F32" ? 4 : 2);
    header[name] = { dtype, shape, data_offsets: [off, off + n] };
    parts.push(randomBytes(n));
    off += n;
  }
  header.__metadata__ = { format: "pt" };
  let json = JSON.stringify(header);
  while (json.length % 8) json += " ";
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([len, Buffer.from(json), ...parts]);
}

function writeTree(dir, files) {
  for (const [p, content] of Object.entries(files)) {
    mkdirSync(join(dir, p, ".."), { recursive: true });
    writeFileSync(join(dir, p), content);
  }
}

async function startServer(root) {
  const args = ["serve", root, "--port", "0", "--token", TOKEN, "--multipart-chunk-size", String(1 << 20),
                "--tree-page-size", "3", "--access-log", join(work, "access.log")];
  server = spawn(bin, args, { stdio: ["ignore", "pipe", "inherit"] });
  return await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("server did not print its URL within 30 s")), 30000);
    server.stdout.on("data", (d) => {
      out += d.toString();
      const m = out.match(/^listening on (http:\/\/\S+)\n/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    server.on("exit", (code) => reject(new Error(`server exited early with ${code}`)));
  });
}

async function blobBytes(blob) {
  check(blob, "downloadFile returned null");
  return Buffer.from(await blob.arrayBuffer());
}

async function main() {
  const root = join(work, "store");
  mkdirSync(root);
  // ---- repo 1: small files, a nested folder, a single-file safetensors ----
  const single = safetensors({ "embed.weight": ["F32", [4, 3]], "head.bias": ["F16", [5]] });
  const tinyFiles = {
    "config.json": Buffer.from(JSON.stringify({ model_type: "tiny", hidden_size: 3 })),
    "sub/dir/notes.txt": Buffer.from("hello from a nested folder\n"),
    "with space.txt": Buffer.from("a file name with a space\n"),
    "model.safetensors": single,
  };
  const src1 = join(work, "src1");
  writeTree(src1, tinyFiles);
  const commit1 = execFileSync(bin, ["store", "add", root, "org/tiny", src1]).toString().trim();
  check(/^[0-9a-f]{40}$/.test(commit1), `store add printed '${commit1}', not a commit id`);

  // ---- repo 2: sharded safetensors ----
  const shard1 = safetensors({ "a.weight": ["F32", [8, 8]], "a.bias": ["F32", [8]] });
  const shard2 = safetensors({ "b.weight": ["F16", [4, 8]] });
  const index = {
    metadata: { total_size: 8 * 8 * 4 + 8 * 4 + 4 * 8 * 2 },
    weight_map: {
      "a.weight": "model-00001-of-00002.safetensors",
      "a.bias": "model-00001-of-00002.safetensors",
      "b.weight": "model-00002-of-00002.safetensors",
    },
  };
  const src2 = join(work, "src2");
  writeTree(src2, {
    "model-00001-of-00002.safetensors": shard1,
    "model-00002-of-00002.safetensors": shard2,
    "model.safetensors.index.json": Buffer.from(JSON.stringify(index)),
  });
  execFileSync(bin, ["store", "add", root, "org/sharded", src2]);

  const hubUrl = await startServer(root);
  const common = { hubUrl, accessToken: TOKEN };
  const results = [];
  async function step(name, fn) {
    try {
      await fn();
      results.push(`ok   ${name}`);
    } catch (e) {
      results.push(`FAIL ${name}: ${e.message}`);
      failures++;
    }
  }

  await step("fileDownloadInfo (regular and LFS)", async () => {
    const info = await hub.fileDownloadInfo({ ...common, repo: "org/tiny", path: "config.json" });
    check(info.size === tinyFiles["config.json"].length, `config.json size ${info.size}`);
    check(info.etag.replace(/"/g, "") === gitSha1(tinyFiles["config.json"]), `config.json etag ${info.etag}`);
    const lfs = await hub.fileDownloadInfo({ ...common, repo: "org/tiny", path: "model.safetensors" });
    check(lfs.size === single.length, `model.safetensors size ${lfs.size}`);
    check(lfs.etag.replace(/"/g, "") === sha256(single), `model.safetensors etag ${lfs.etag}`);
    const missing = await hub.fileDownloadInfo({ ...common, repo: "org/tiny", path: "nope.bin" });
    check(missing === null, "missing file should give null (404 EntryNotFound)");
  });

  await step("downloadFile", async () => {
    for (const [p, content] of Object.entries(tinyFiles)) {
      const got = await blobBytes(await hub.downloadFile({ ...common, repo: "org/tiny", path: p }));
      sameBytes(got, content, `downloadFile ${p}`);
    }
    const pinned = await blobBytes(await hub.downloadFile({ ...common, repo: "org/tiny", path: "config.json", revision: commit1 }));
    sameBytes(pinned, tinyFiles["config.json"], "downloadFile at commit");
  });

  await step("listFiles recursive (paginated)", async () => {
    const seen = [];
    for await (const e of hub.listFiles({ ...common, repo: "org/tiny", recursive: true })) {
      seen.push(`${e.type}:${e.path}`);
      if (e.type === "file") {
        const content = tinyFiles[e.path];
        check(content, `unexpected file ${e.path}`);
        check(e.size === content.length, `${e.path} size ${e.size}`);
        if (e.path === "model.safetensors") check(e.lfs && e.lfs.oid === sha256(content), "lfs.oid of model.safetensors");
        else check(e.oid === gitSha1(content), `oid of ${e.path}`);
      }
    }
    const want = ["directory:sub", "directory:sub/dir", ...Object.keys(tinyFiles).map((p) => `file:${p}`)].sort();
    check(JSON.stringify(seen.sort()) === JSON.stringify(want), `listing ${JSON.stringify(seen)}`);
  });

  await step("snapshotDownload into a cache folder", async () => {
    const cacheDir = join(work, "cache-snap");
    const folder = await hub.snapshotDownload({ ...common, repo: "org/tiny", cacheDir });
    check(basename(folder) === commit1, `snapshot folder ${folder}`);
    for (const [p, content] of Object.entries(tinyFiles)) sameBytes(readFileSync(join(folder, p)), content, `snapshot ${p}`);
    const ref = readFileSync(join(cacheDir, "models--org--tiny", "refs", "main")).toString();
    check(ref === commit1, `refs/main ${ref}`);
  });

  await step("downloadFileToCacheDir", async () => {
    const cacheDir = join(work, "cache-one");
    const p = await hub.downloadFileToCacheDir({ ...common, repo: "org/sharded", path: "model-00002-of-00002.safetensors", cacheDir });
    sameBytes(readFileSync(p), shard2, "downloadFileToCacheDir content");
    check(lstatSync(p).isSymbolicLink(), "pointer is a symlink");
    check(basename(readlinkSync(p)) === sha256(shard2), `blob name ${readlinkSync(p)}`);
    const q = await hub.downloadFileToCacheDir({ ...common, repo: "org/sharded", path: "model.safetensors.index.json", cacheDir });
    check(basename(readlinkSync(q)) === gitSha1(Buffer.from(JSON.stringify(index))), "regular blob named by git sha1");
  });

  await step("parseSafetensorsMetadata single file", async () => {
    const meta = await hub.parseSafetensorsMetadata({ ...common, repo: "org/tiny" });
    check(meta.sharded === false, "single file reported as sharded");
    check(meta.header["embed.weight"].dtype === "F32", "embed.weight dtype");
    check(JSON.stringify(meta.header["embed.weight"].shape) === "[4,3]", "embed.weight shape");
    check(JSON.stringify(meta.header["head.bias"].shape) === "[5]", "head.bias shape");
  });

  await step("parseSafetensorsMetadata sharded", async () => {
    const meta = await hub.parseSafetensorsMetadata({ ...common, repo: "org/sharded" });
    check(meta.sharded === true, "sharded repo not reported as sharded");
    check(JSON.stringify(meta.headers["model-00001-of-00002.safetensors"]["a.weight"].shape) === "[8,8]", "a.weight shape");
    check(meta.headers["model-00002-of-00002.safetensors"]["b.weight"].dtype === "F16", "b.weight dtype");
    check(Object.keys(meta.index.weight_map).length === 3, "weight_map size");
  });

  const regular = Buffer.from("regular text file uploaded by the JS client\n");
  const big = randomBytes(3 * (1 << 20) + 12345); // > 1 MiB chunk: multipart, 4 parts
  await step("createRepo + uploadFiles (regular + multipart LFS), read back", async () => {
    const created = await hub.createRepo({ ...common, repo: { type: "model", name: "org/uploaded" } });
    check(created.repoUrl.endsWith("/org/uploaded"), `repoUrl ${created.repoUrl}`);
    let dup = false;
    try {
      await hub.createRepo({ ...common, repo: { type: "model", name: "org/uploaded" } });
    } catch (e) {
      dup = e.statusCode === 409;
    }
    check(dup, "second createRepo should fail with 409");
    const res = await hub.uploadFiles({
      ...common,
      repo: "org/uploaded",
      useXet: false,
      files: [
        { path: "notes/readme.txt", content: new Blob([regular]) },
        { path: "weights.bin", content: new Blob([big]) },
      ],
    });
    check(/^[0-9a-f]{40}$/.test(res.commit.oid), `commit oid ${JSON.stringify(res.commit)}`);
    sameBytes(await blobBytes(await hub.downloadFile({ ...common, repo: "org/uploaded", path: "notes/readme.txt" })), regular, "uploaded regular file");
    sameBytes(await blobBytes(await hub.downloadFile({ ...common, repo: "org/uploaded", path: "weights.bin" })), big, "uploaded LFS file");
    const info = await hub.fileDownloadInfo({ ...common, repo: "org/uploaded", path: "weights.bin" });
    check(info.etag.replace(/"/g, "") === sha256(big), "LFS etag after upload");
    const log = readFileSync(join(work, "access.log")).toString();
    check(/\/part\/4"/.test(log), "multipart upload: 4 part PUTs expected in the access log");
    check(!log.includes(TOKEN), "token appears in the access log");
  });

  console.log(results.join("\n"));
}

let code = 0;
try {
  await main();
} catch (e) {
  console.error(`interop: ${e.stack || e.message}`);
  code = 1;
} finally {
  if (server) server.kill("SIGTERM");
  rmSync(work, { recursive: true, force: true });
}
if (failures) code = 1;
process.exit(code);
