// Interop test of branches and history: the official JS client
// @huggingface/hub (pinned in package-lock.json) — createBranch, deleteBranch,
// listCommits, countCommits, uploadFile on a branch — against `hubload serve`,
// and the C++ client (`hubload repo ...`) and the JS client seeing each other's
// branches, tags and commits.
// @huggingface/hub has no tag or refs listing call: those are checked with
// plain fetch on the Hub API shapes (huggingface_hub list_repo_refs).
//
// Usage: node refs.mjs [HUBLOAD_BIN]   (default: $HUBLOAD_BIN)
// Expected commit ids come from `hubload store add` and from the commit
// answers the client returns, never from the listing under test.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as hub from "@huggingface/hub";

const bin = process.argv[2] || process.env.HUBLOAD_BIN;
if (!bin) {
  console.error("refs: pass the hubload binary as argument or set HUBLOAD_BIN");
  process.exit(2);
}
const TOKEN = "hf_refs_token";
const work = mkdtempSync(join(tmpdir(), "hubload-js-refs-"));
let server = null;

function check(cond, msg) {
  if (!cond) throw new Error(msg);
}

async function startServer(root) {
  server = spawn(bin, ["serve", root, "--port", "0", "--token", TOKEN], { stdio: ["ignore", "pipe", "inherit"] });
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

async function main() {
  const root = join(work, "store");
  const src = join(work, "src");
  mkdirSync(root);
  mkdirSync(src);
  writeFileSync(join(src, "config.json"), '{"a": 1}');
  const first = execFileSync(bin, ["store", "add", root, "org/refs", src]).toString().trim();
  check(/^[0-9a-f]{40}$/.test(first), `store add printed '${first}'`);
  const hubUrl = await startServer(root);
  const common = { hubUrl, accessToken: TOKEN, repo: "org/refs" };
  const refs = async () => {
    const r = await fetch(`${hubUrl}/api/models/org/refs/refs`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    check(r.ok, `refs: ${r.status}`);
    return await r.json();
  };
  const branch = async (name) => (await refs()).branches.find((b) => b.name === name);

  // createBranch from the default branch, then from a commit, then empty.
  await hub.createBranch({ ...common, branch: "dev" });
  const dev = await branch("dev");
  check(dev && dev.ref === "refs/heads/dev" && dev.targetCommit === first, `dev after createBranch: ${JSON.stringify(dev)}`);
  let conflict = false;
  try {
    await hub.createBranch({ ...common, branch: "dev" });
  } catch (e) {
    conflict = e.statusCode === 409;
  }
  check(conflict, "a second createBranch dev should fail with 409");
  await hub.createBranch({ ...common, branch: "dev", overwrite: true });  // no revision: a no-op
  check((await branch("dev")).targetCommit === first, "overwrite without revision moved dev");

  // Commits on dev through the client; listCommits/countCommits see them newest first.
  const oids = [];
  for (const [i, title] of ["one", "two", "three"].entries()) {
    const res = await hub.uploadFile({ ...common, branch: "dev", file: { path: `f${i}.txt`, content: new Blob([title]) },
                                       commitTitle: title, useXet: false });
    oids.unshift(res.commit.oid);
    const page = await fetch(res.commit.url);
    check(page.ok, `commit URL ${res.commit.url} answers ${page.status}`);
  }
  check((await branch("dev")).targetCommit === oids[0], "dev head after three commits");
  const listed = [];
  for await (const c of hub.listCommits({ ...common, revision: "dev", batchSize: 2 })) listed.push(c);
  check(JSON.stringify(listed.map((c) => c.oid)) === JSON.stringify([...oids, first]),
        `listCommits dev: ${listed.map((c) => c.oid)} vs ${[...oids, first]}`);
  check(listed[0].title === "three" && listed[2].title === "one", `titles ${listed.map((c) => c.title)}`);
  check(listed.every((c) => c.date instanceof Date && !isNaN(c.date)), "commit dates");
  check((await hub.countCommits({ ...common, revision: "dev" })) === 4, "countCommits dev");
  check((await hub.countCommits({ ...common })) === 1, "countCommits main");

  await hub.createBranch({ ...common, branch: "from-commit", revision: oids[2] });
  check((await branch("from-commit")).targetCommit === oids[2], "createBranch at a commit");
  await hub.createBranch({ ...common, branch: "blank", empty: true });
  const files = [];
  for await (const f of hub.listFiles({ ...common, revision: "blank" })) files.push(f.path);
  check(files.length === 0, `empty branch lists ${files}`);

  // deleteBranch.
  await hub.deleteBranch({ ...common, branch: "from-commit" });
  check(!(await branch("from-commit")), "from-commit still listed after deleteBranch");
  let missing = false;
  try {
    await hub.deleteBranch({ ...common, branch: "from-commit" });
  } catch (e) {
    missing = e.statusCode === 404;
  }
  check(missing, "deleting a missing branch should fail with 404");

  // A deleted 'feat/x' frees its prefix: 'feat' is a branch git allows once 'feat/x' is gone.
  await hub.createBranch({ ...common, branch: "feat/x" });
  let clash = false;
  try {
    await hub.createBranch({ ...common, branch: "feat" });
  } catch (e) {
    clash = e.statusCode === 409;
  }
  check(clash, "createBranch feat beside feat/x should fail with 409");
  await hub.deleteBranch({ ...common, branch: "feat/x" });
  await hub.createBranch({ ...common, branch: "feat" });
  check((await branch("feat"))?.targetCommit === first, "createBranch feat after deleting feat/x");
  const fx = await hub.uploadFile({ ...common, branch: "feat", file: { path: "feat.txt", content: new Blob(["f"]) },
                                    commitTitle: "on feat", useXet: false });
  check((await branch("feat")).targetCommit === fx.commit.oid, "commit on feat");
  // Names git check-ref-format refuses: 400.
  for (const bad of ["x.lock", "@", ".hidden", "a/.b", "-dash", "ends."]) {
    let refused = false;
    try {
      await hub.createBranch({ ...common, branch: bad });
    } catch (e) {
      refused = e.statusCode === 400;
    }
    check(refused, `createBranch '${bad}' should fail with 400`);
    check(!(await branch(bad)), `'${bad}' listed after a refused createBranch`);
  }

  // Tags with plain fetch (huggingface_hub create_tag / list_repo_refs shapes).
  const t = await fetch(`${hubUrl}/api/models/org/refs/tag/dev`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    body: JSON.stringify({ tag: "v1", message: "first" }),
  });
  check(t.ok, `create tag: ${t.status}`);
  const tag = (await refs()).tags.find((x) => x.name === "v1");
  check(tag && tag.ref === "refs/tags/v1" && tag.targetCommit === oids[0], `tag v1: ${JSON.stringify(tag)}`);
  const viaTag = await hub.downloadFile({ ...common, revision: "v1", path: "f2.txt" });
  check(viaTag && (await viaTag.text()) === "three", "download at tag v1");

  // The same for tags: a deleted 'rel/1' frees 'rel'.
  const tagReq = (rev, body) =>
    fetch(`${hubUrl}/api/models/org/refs/tag/${encodeURIComponent(rev)}`, {
      method: body ? "POST" : "DELETE",
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
  check((await tagReq("main", { tag: "rel/1" })).ok, "create tag rel/1");
  check((await tagReq("main", { tag: "rel" })).status === 409, "tag rel beside rel/1 should be 409");
  check((await tagReq("rel/1")).ok, "delete tag rel/1");
  check((await tagReq("main", { tag: "rel" })).ok, "create tag rel after deleting rel/1");
  check((await refs()).tags.find((x) => x.name === "rel")?.targetCommit === first, "tag rel listed");
  check((await tagReq("main", { tag: "x.lock" })).status === 400, "tag x.lock should be 400");

  // The C++ client (hubload repo ...) and the JS client see each other's refs.
  const cli = (...args) =>
    execFileSync(bin, ["--endpoint", hubUrl, "--token", TOKEN, "repo", ...args], { stdio: ["ignore", "pipe", "pipe"] })
      .toString();
  cli("branch", "create", "org/refs", "cpp/made", "--revision", oids[1]);
  const cppListed = [];
  for await (const c of hub.listCommits({ ...common, revision: "cpp/made" })) cppListed.push(c.oid);
  check(JSON.stringify(cppListed) === JSON.stringify([oids[1], oids[2], first]),
        `listCommits of the branch hubload made: ${cppListed}`);
  let cppConflict = false;
  try {
    cli("branch", "create", "org/refs", "cpp/made");
  } catch (e) {
    cppConflict = e.status === 1 && /Conflict|exists/.test(e.stderr.toString());
  }
  check(cppConflict, "hubload repo branch create of an existing branch should exit 1 naming the conflict");
  cli("branch", "create", "org/refs", "cpp/made", "--exist-ok");
  cli("tag", "create", "org/refs", "cpp-v2", "--revision", "cpp/made", "-m", "made by hubload");
  const viaCppTag = await hub.downloadFile({ ...common, revision: "cpp-v2", path: "f1.txt" });
  check(viaCppTag && (await viaCppTag.text()) === "two", "download at the tag hubload made");
  await hub.createBranch({ ...common, branch: "js-made", revision: oids[2] });
  const cppRefs = JSON.parse(cli("refs", "org/refs", "--json"));
  const jsMade = cppRefs.branches.find((b) => b.name === "js-made");
  check(jsMade && jsMade.target_commit === oids[2] && jsMade.ref === "refs/heads/js-made",
        `hubload repo refs sees js-made: ${JSON.stringify(jsMade)}`);
  const cppTag = cppRefs.tags.find((t) => t.name === "cpp-v2");
  check(cppTag && cppTag.target_commit === oids[1], `hubload repo refs sees cpp-v2: ${JSON.stringify(cppTag)}`);
  const cppCommits = JSON.parse(cli("commits", "org/refs", "--revision", "dev", "--json"));
  check(JSON.stringify(cppCommits.map((c) => c.commit_id)) === JSON.stringify(listed.map((c) => c.oid)),
        `hubload repo commits dev vs listCommits: ${cppCommits.map((c) => c.commit_id)}`);
  check(cppCommits[0].title === "three", `hubload repo commits title ${cppCommits[0].title}`);
  cli("branch", "delete", "org/refs", "cpp/made");
  cli("tag", "delete", "org/refs", "cpp-v2");
  const after = await refs();
  check(!after.branches.find((b) => b.name === "cpp/made") && !after.tags.find((t) => t.name === "cpp-v2"),
        "branch/tag deleted by hubload still listed");
  console.log("refs: createBranch, deleteBranch, listCommits, countCommits, uploadFile on a branch, tags, " +
              "hubload repo branch/tag/refs/commits seen by the JS client and back: ok");
}

let code = 0;
try {
  await main();
} catch (e) {
  console.error(`refs: ${e.stack || e.message}`);
  code = 1;
} finally {
  if (server) server.kill("SIGTERM");
  rmSync(work, { recursive: true, force: true });
}
process.exit(code);
