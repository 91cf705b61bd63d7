// The JS client's snapshot_download, timed, for bench/hub_bench.cc (cold
// snapshot baseline): @huggingface/hub `snapshotDownload` (version pinned in
// package-lock.json) of one repo into a cache folder, Xet disabled.
// Prints {"seconds": <wall time of snapshotDownload>, "folder": "<snapshot folder>"}.
// Usage: node bench_snapshot.mjs HUB_URL REPO_ID CACHE_DIR [REVISION]
import { snapshotDownload } from "@huggingface/hub";

const [hubUrl, name, cacheDir, revision] = process.argv.slice(2);
if (!hubUrl || !name || !cacheDir) {
  console.error("usage: node bench_snapshot.mjs HUB_URL REPO_ID CACHE_DIR [REVISION]");
  process.exit(2);
}
// downloadFileToCacheDir announces every file with console.debug.
console.debug = () => {};
const t0 = process.hrtime.bigint();
const folder = await snapshotDownload({
  repo: { type: "model", name },
  hubUrl,
  cacheDir,
  revision: revision || "main",
  xet: false,
});
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({ seconds, folder }));
