// Cache compatibility both ways between hubload and the official JS client
// @huggingface/hub (version pinned in package-lock.json):
//  1. hubload reads offline, with zero requests, a cache the JS client wrote;
//  2. the JS client's view (scanCacheDir: paths, blob names = etags, sizes,
//     refs) of a hubload-written cache equals its view of its own cache, and
//     the JS client serves a pinned file from the hubload cache with the
//     server stopped.
// Usage: node cache_compat.mjs HUBLOAD_BIN. Exit 0 = all checks passed.
// Expected bytes come from this script's own data (node:crypto for hashes).
import { spawn, execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative, basename, dirname } from "node:path";
import * as hub from "@huggingface/hub";

const bin = process.argv[2] || process.env.HUBLOAD_BIN;
if (!bin) {
  console.error("cache_compat: pass the hubload binary");
  process.exit(2);
}
const TOKEN = "hf_cache_compat_token";
const work = mkdtempSync(join(tmpdir(), "hubload-cache-compat-"));
let server = null;

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}
const sha256 = (b) => createHash("sha256").update(b).digest("hex");

function startServer(root) {
  server = spawn(bin, ["serve", root, "--port", "0", "--token", TOKEN], { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error("server did not start within 30 s")), 30000);
    server.stdout.on("data", (d) => {
      out += d.toString();
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    server.on("exit", (code) => reject(new Error(`server exited with ${code}`)));
  });
}

function hubload(args) {
  const out = execFileSync(bin, args, { stdio: ["ignore", "pipe", "pipe"] }).toString().trim().split("\n");
  return out[out.length - 1];
}

// JS client's view of a cache, reduced to what must be identical.
async function view(cacheDir) {
  const info = await hub.scanCacheDir(cacheDir);
  return info.repos
    .map((r) => ({
      id: `${r.id.type}:${r.id.name}`,
      revisions: r.revisions
        .map((v) => ({
          commit: v.commitOid,
          refs: [...v.refs].sort(),
          files: v.files
            .map((f) => `${relative(v.path, f.path)} -> ${basename(f.blob.path)} (${f.blob.size})`)
            .sort(),
        }))
        .sort((a, b) => a.commit.localeCompare(b.commit)),
    }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

async function main() {
  const files = {
    "config.json": Buffer.from(JSON.stringify({ model_type: "compat" })),
    "sub/dir/notes.txt": Buffer.from("nested\n"),
    "with space.txt": Buffer.from("space in the name\n"),
    "model.safetensors": randomBytes(50000),
  };
  const src = join(work, "src");
  for (const [p, c] of Object.entries(files)) {
    mkdirSync(dirname(join(src, p)), { recursive: true });
    writeFileSync(join(src, p), c);
  }
  const root = join(work, "store");
  mkdirSync(root);
  const commit = execFileSync(bin, ["store", "add", root, "org/compat", src]).toString().trim();
  check(/^[0-9a-f]{40}$/.test(commit), `store add printed '${commit}'`);
  const hubUrl = await startServer(root);
  const common = { hubUrl, accessToken: TOKEN, repo: "org/compat" };

  // 1. JS writes, hubload reads offline (the endpoint is never contacted).
  const jsCache = join(work, "cache-js");
  await hub.snapshotDownload({ ...common, cacheDir: jsCache });
  const offlineArgs = ["--cache-dir", jsCache, "--endpoint", "http://127.0.0.1:9", "download", "org/compat", "--offline", "--quiet"];
  const folder = hubload(offlineArgs);
  check(folder === join(jsCache, "models--org--compat", "snapshots", commit), `offline snapshot folder ${folder}`);
  for (const [p, c] of Object.entries(files)) {
    check(sha256(readFileSync(join(folder, p))) === sha256(c), `hubload offline read of ${p} differs`);
    const one = hubload([...offlineArgs.slice(0, 5), "org/compat", p, "--offline", "--quiet"]);
    check(sha256(readFileSync(one)) === sha256(c), `hubload offline single-file read of ${p} differs`);
  }

  // 2. hubload writes, the JS client's view matches its own.
  const hlCache = join(work, "cache-hubload");
  const hlFolder = hubload(["--cache-dir", hlCache, "--endpoint", hubUrl, "--token", TOKEN, "download", "org/compat", "--quiet"]);
  check(hlFolder === join(hlCache, "models--org--compat", "snapshots", commit), `hubload snapshot folder ${hlFolder}`);
  const a = JSON.stringify(await view(jsCache), null, 1);
  const b = JSON.stringify(await view(hlCache), null, 1);
  check(a === b, `scanCacheDir views differ:\nJS-written: ${a}\nhubload-written: ${b}`);
  check(JSON.parse(b)[0].revisions[0].refs.includes("main"), "refs/main missing from the hubload cache");
  check(
    JSON.parse(b)[0].revisions[0].files.some((f) => f.startsWith(`model.safetensors -> ${sha256(files["model.safetensors"])} `)),
    "LFS blob not named by its sha256",
  );

  // The JS client finds a pinned file in the hubload cache without the server.
  server.removeAllListeners("exit");
  server.kill("SIGTERM");
  server = null;
  for (const [p, c] of Object.entries(files)) {
    const got = await hub.downloadFileToCacheDir({ ...common, path: p, revision: commit, cacheDir: hlCache });
    check(got === join(hlCache, "models--org--compat", "snapshots", commit, p), `JS pointer path for ${p}: ${got}`);
    check(sha256(readFileSync(got)) === sha256(c), `JS read of hubload-written ${p} differs`);
  }
  console.log("cache_compat: all checks passed");
}

main()
  .then(() => 0, (e) => {
    console.error(`cache_compat: FAIL ${e.message}`);
    return 1;
  })
  .then((code) => {
    if (server) server.kill("SIGTERM");
    rmSync(work, { recursive: true, force: true });
    process.exit(code);
  });
