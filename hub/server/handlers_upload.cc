// Upload protocol: repo creation and settings, preupload, LFS batch (basic and multipart
// actions), multipart completion and verify (hub-protocol.md §5, §8.4). The
// PUT bodies themselves are streamed by upload_put.cc.
#include <cstdio>
#include <fstream>

#include "hub/server/bodies.h"
#include "hub/server/impl.h"
#include "hubload/reasons.h"

namespace hubload::server {

using namespace internal;
using json = nlohmann::json;
namespace fs = std::filesystem;

Response Server::Impl::CreateRepo(Request& r) {
  if (r.token.empty()) return ErrorResponse(401, "", "Authorization header is required to create a repository.");
  if (opt.read_only) return ErrorResponse(403, "", "This server is a read-only mirror; writes are disabled.");
  auto body = ParseCreateRepo(r.body, "repos/create body");
  if (!body.ok()) return ErrorResponse(400, "", body.status().message());
  std::string repo_id = body->organization.empty() ? body->name : body->organization + "/" + body->name;
  if (!IsValidRepoId(repo_id)) return ErrorResponse(400, "", "Invalid repo id: " + repo_id);
  auto dir = RepoDir(root, body->type, repo_id);
  std::string url = Base(r) + "/" + TypePrefix(body->type) + repo_id;
  std::string type_name = RepoTypeName(body->type);
  std::error_code ec;
  if (fs::exists(*dir, ec))
    return JsonResponse(409, json{{"error", "You already created this " + type_name + " repo"}, {"url", url}});
  CreateRepoOptions co;
  co.repo_type = body->type;
  co.private_repo = body->private_repo;
  co.commit_message = "initial commit";
  co.fail_if_exists = true;
  if (body->private_repo) co.read_tokens = {r.token};
  std::string attrs;
  for (const char* ext : {"*.safetensors", "*.bin", "*.pt", "*.pth", "*.ckpt", "*.h5", "*.onnx", "*.msgpack",
                          "*.gguf", "*.npy", "*.npz", "*.pkl", "*.parquet", "*.arrow", "*.zip", "*.tar.*"})
    attrs += std::string(ext) + " filter=lfs diff=lfs merge=lfs -text\n";
  std::map<std::string, std::string> files{{".gitattributes", attrs}};
  for (auto& [p, c] : body->files) files[p] = c;
  co.lfs_threshold_bytes = opt.lfs_threshold_bytes;
  co.lfs_by_extension = opt.lfs_by_extension;
  auto c = CreateRepoFromFiles(opt.root, repo_id, files, co);
  if (!c.ok()) {
    if (c.status().code() == Code::kConflict)
      return JsonResponse(409, json{{"error", "You already created this " + type_name + " repo"}, {"url", url}});
    return ErrorResponse(400, "", c.status().message());
  }
  return JsonResponse(200, json{{"url", url}, {"id", repo_id}, {"name", repo_id}});
}

Response Server::Impl::UpdateSettings(Request& r, RepoType type, const std::string& repo_id) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kWrite, &repo_dir)) return *deny;
  auto body = ParseSettingsBody(r.body, "settings body");
  if (!body.ok()) return ErrorResponse(400, "", body.status().message());
  std::lock_guard<std::mutex> lock(CommitMutex());
  RepoSettings s = LoadSettings(repo_dir);
  if (body->private_repo) s.private_repo = *body->private_repo;
  if (body->gated) s.gated = *body->gated;
  if (s.created_at.empty()) s.created_at = NowIso8601();
  Status st = SaveSettings(repo_dir, s);
  if (!st.ok()) return StatusResponse(st);
  return JsonResponse(200, json::object());
}

Response Server::Impl::Preupload(Request& r, RepoType type, const std::string& repo_id, const std::string& rev) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kWrite, &repo_dir)) return *deny;
  auto files = ParsePreupload(r.body, "preupload body");
  if (!files.ok()) return ErrorResponse(400, "", files.status().message());
  auto commit = ResolveRevision(repo_dir, rev);
  json out = json::array();
  for (auto& f : *files) {
    bool lfs = IsLfsPath(f.path, f.size, opt.lfs_threshold_bytes, opt.lfs_by_extension);
    json e{{"path", f.path}, {"uploadMode", lfs ? "lfs" : "regular"}, {"shouldIgnore", false}};
    if (commit && IsSafeRepoPath(f.path)) {
      auto st = Stat(root, repo_dir, *commit, f.path);
      if (st.ok() && !st->is_dir) e["oid"] = st->lfs ? st->sha256 : st->oid;
    }
    out.push_back(e);
  }
  return JsonResponse(200, json{{"files", out}, {"commitOid", commit ? *commit : ""}});
}

Response Server::Impl::LfsBatch(Request& r, RepoType type, const std::string& repo_id) {
  auto repo_dir = RepoDir(root, type, repo_id);
  if (!repo_dir) return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: " + repo_id);
  auto body = ParseLfsBatch(r.body, "LFS batch body");
  if (!body.ok()) return ErrorResponse(body.status().Is(reason::kBadLfsObject) ? 422 : 400, "", body.status().message());
  bool upload = body->operation == "upload";
  if (auto deny = CheckAccess(r, repo_id, *repo_dir, upload ? Need::kWrite : Need::kDownload)) return *deny;
  if (body->hash_algo != "sha256" && body->hash_algo != "sha_256")
    return ErrorResponse(422, "", "Unsupported hash_algo " + body->hash_algo);
  std::string folder = repo_dir->filename().string();
  std::string base_url = Base(r);
  json objs = json::array();
  bool any_multipart = false;
  for (auto& o : body->objects) {
    json out{{"oid", o.oid}, {"size", o.size}};
    if (!IsHexOf(o.oid, 64, 64)) {
      out["error"] = {{"code", 422}, {"message", "oid must be 64 lower-case hex"}};
      objs.push_back(out);
      continue;
    }
    std::error_code ec;
    fs::path blob = *repo_dir / "blobs" / o.oid;
    bool have = fs::is_regular_file(blob, ec) && fs::file_size(blob, ec) == o.size;
    std::string base = "/_lfs/" + folder + "/" + o.oid + "/" + std::to_string(o.size);
    if (!upload) {
      if (!have) {
        out["error"] = {{"code", 404}, {"message", "Object does not exist"}};
      } else {
        std::string p = "/" + folder + "/" + o.oid;
        out["actions"] = {{"download", {{"href", CdnUrl(&r) + p + signer.Query(p, SignedTtl())}}}};
      }
    } else if (!have) {
      json actions;
      std::string verify = base + "/verify";
      actions["verify"] = {{"href", base_url + verify + signer.Query(verify, SignedTtl())}};
      uint64_t chunk = std::max<uint64_t>(1, opt.multipart_chunk_size);
      if (body->multipart && o.size > chunk) {
        any_multipart = true;
        std::string complete = base + "/complete";
        json header{{"chunk_size", std::to_string(chunk)}};
        uint64_t parts = (o.size + chunk - 1) / chunk;
        if (parts > 100000) return ErrorResponse(422, "", "object " + o.oid + " is too large for multipart upload");
        for (uint64_t i = 1; i <= parts; ++i) {
          char key[24];
          std::snprintf(key, sizeof key, "%05llu", static_cast<unsigned long long>(i));
          std::string pp = base + "/part/" + std::to_string(i);
          header[key] = base_url + pp + signer.Query(pp, SignedTtl());
        }
        actions["upload"] = {{"href", base_url + complete + signer.Query(complete, SignedTtl())}, {"header", header}};
      } else {
        actions["upload"] = {{"href", base_url + base + signer.Query(base, SignedTtl())}};
      }
      out["actions"] = actions;
    }
    objs.push_back(out);
  }
  Response resp = JsonResponse(200, json{{"transfer", any_multipart ? "multipart" : "basic"}, {"objects", objs}});
  resp.Set("Content-Type", "application/vnd.git-lfs+json");
  return resp;
}

Response Server::Impl::LfsComplete(Request& r, const std::string& folder, const std::string& oid, uint64_t size) {
  if (opt.read_only) return ErrorResponse(403, "", "This server is a read-only mirror; writes are disabled.");
  auto body = ParseMultipartComplete(r.body, "multipart completion body");
  if (!body.ok()) return ErrorResponse(400, "", body.status().message());
  if (body->oid && *body->oid != oid) return ErrorResponse(400, "", "multipart completion: oid mismatch");
  if (!IsHexOf(oid, 64, 64) || folder.empty() || folder[0] == '.' || folder.find('/') != std::string::npos)
    return ErrorResponse(404, "", "Repository not found");
  fs::path repo_dir = root / folder;
  std::error_code ec;
  if (!fs::is_directory(repo_dir / "blobs", ec)) return ErrorResponse(404, "", "Repository not found");
  uint64_t chunk = std::max<uint64_t>(1, opt.multipart_chunk_size);
  uint64_t parts = (size + chunk - 1) / chunk;
  if (body->etags.size() != parts)
    return ErrorResponse(400, "", "multipart completion: expected " + std::to_string(parts) + " parts, got " +
                                      std::to_string(body->etags.size()));
  std::lock_guard<std::mutex> lock(upload_mu);
  fs::path dir = root / ".hubload-uploads" / (folder + "-" + oid);
  fs::path tmp = repo_dir / "blobs" / (".assemble-" + oid.substr(0, 16));
  auto fail = [&](int status, const std::string& msg) {
    fs::remove(tmp, ec);
    return ErrorResponse(status, "", msg);
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (uint64_t i = 1; i <= parts; ++i) {
      auto it = body->etags.find(i);
      fs::path pf = dir / ("part-" + std::to_string(i));
      if (it == body->etags.end() || !fs::exists(pf, ec)) {
        out.close();
        return fail(400, "multipart completion: part " + std::to_string(i) + " missing");
      }
      std::string sha;
      HashFile(pf, &sha, nullptr, nullptr);
      const std::string& etag = it->second;
      if (etag != Quote(sha.substr(0, 32)) && etag != sha.substr(0, 32)) {
        out.close();
        return fail(400, "multipart completion: etag of part " + std::to_string(i) + " does not match");
      }
      std::ifstream in(pf, std::ios::binary);
      out << in.rdbuf();
    }
    out.flush();
    if (!out) return fail(500, "cannot assemble object");
  }
  std::string sha256;
  uint64_t got = 0;
  if (!HashFile(tmp, &sha256, nullptr, &got) || sha256 != oid || got != size)
    return fail(400, "Assembled object does not match: sha256 " + sha256 + " size " + std::to_string(got) +
                         ", expected " + oid + " size " + std::to_string(size));
  Status st = InstallBlob(repo_dir, tmp, oid);
  fs::remove_all(dir, ec);
  if (!st.ok()) return StatusResponse(st);
  return JsonResponse(200, json::object());
}

Response Server::Impl::LfsVerify(Request& r, const std::string& folder, const std::string& oid, uint64_t size) {
  std::error_code ec;
  if (!IsHexOf(oid, 64, 64) || folder.empty() || folder[0] == '.' || folder.find('/') != std::string::npos)
    return ErrorResponse(404, "", "Object " + oid + " not found");
  fs::path blob = root / folder / "blobs" / oid;
  if (!fs::is_regular_file(blob, ec) || fs::file_size(blob, ec) != size)
    return ErrorResponse(404, "", "Object " + oid + " not found or wrong size");
  return JsonResponse(200, json::object());
}

}  // namespace hubload::server
