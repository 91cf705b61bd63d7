// The NDJSON commit (huggingface_hub create_commit), create_repo and the
// request plumbing of an upload (hub/upload/upload_internal.h).
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "hub/errors.h"
#include "hub/answers.h"
#include "hub/repo_urls.h"
#include "hub/upload/upload_internal.h"
#include "util/base64.h"
#include "util/digest.h"
#include "util/hex.h"
#include "util/json.h"
#include "util/worker_pool.h"
#include "hubload/reasons.h"

namespace hubload::hub_internal::upload {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string Call::ApiRepo() const { return s.ApiUrl(req.repo_type, req.repo_id, ""); }

ErrorContext Call::Ctx(const std::string& file) const { return s.Ctx(req.repo_id, req.revision, file); }

Result<HttpResponse> Call::Send(HttpRequest r, bool auth, bool retry) const {
  if (auth) s.AddAuth(&r);
  if (!retry) r.max_retries = 0;
  return s.http->Send(r, nullptr);
}

Result<json> Call::Json(const std::string& method, const std::string& url, const std::string& body,
                        const std::string& content_type, bool auth, bool retry, const std::string& what,
                        const std::string& file, const std::string& accept) const {
  HttpRequest r;
  r.method = method;
  r.url = url;
  r.body = body;
  r.timeout_s = s.opt.upload_api_timeout_s;
  if (!content_type.empty()) r.headers.emplace_back("Content-Type", content_type);
  r.headers.emplace_back("Accept", accept);
  auto a = Send(std::move(r), auth, retry);
  ErrorContext ctx = Ctx(file);
  ctx.url = RedactUrl(url);
  if (!a.ok()) return a.status().WithPrefix(what);
  if (a->status < 200 || a->status >= 300) return StatusFromHttp(a->status, a->headers, a->body, ctx).WithPrefix(what);
  if (a->body.empty()) return json::object();
  auto j = util::ParseJson(a->body, ctx.url);
  if (!j.ok()) return j.status().Annotate(ctx).WithPrefix(what);
  return std::move(*j);
}

Status BadAnswer(const std::string& what, ErrorContext ctx) {
  return Status(Code::kInvalidFormat, what, reason::kBadServerAnswer, std::move(ctx));
}

Status CheckRequest(const UploadFolderRequest& req) {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(req.repo_id));
  if (req.revision.empty()) return Status(Code::kInvalidArgument, "upload to " + req.repo_id + ": revision is empty");
  HUBLOAD_RETURN_IF_ERROR(ValidateRevision(req.revision));
  if (!req.parent_commit.empty() &&
      (req.parent_commit.size() < 7 || req.parent_commit.size() > 40 || !util::IsLowerHex(req.parent_commit)))
    return Status(Code::kInvalidArgument,
                  "parent_commit '" + req.parent_commit + "' must be 7 to 40 lower-case hex digits (a commit id)",
                  reason::kBadParentCommit);
  return Status::Ok();
}

namespace {

Result<std::string> HeadCommit(const Call& c) {
  std::string url = c.ApiRepo() + "/revision/" + EncodeRevision(c.req.revision);
  HUBLOAD_ASSIGN_OR_RETURN(json j, c.Json("GET", url, "", "", true, true, "reading the head of " + c.req.revision));
  auto sha = ParseRevisionSha(j, RedactUrl(url));
  if (!sha.ok()) return sha.status().Annotate(c.Ctx());
  return *sha;
}

// The NDJSON body: header, deletions, regular files inline, LFS pointers.
std::string CommitBody(const UploadFolderRequest& request, const std::vector<const Item*>& ops,
                       const std::vector<std::string>& deletions) {
  std::string title = request.commit_message.empty() ? "Upload folder using hubload" : request.commit_message;
  json header{{"summary", title}, {"description", request.commit_description}};
  if (!request.parent_commit.empty()) header["parentCommit"] = request.parent_commit;
  std::string body = util::DumpJson(json{{"key", "header"}, {"value", header}}) + "\n";
  for (const auto& d : deletions) body += util::DumpJson(json{{"key", "deletedFile"}, {"value", {{"path", d}}}}) + "\n";
  for (const Item* it : ops) {
    json value = it->lfs ? json{{"path", it->path}, {"algo", "sha256"}, {"oid", it->sha256}, {"size", it->size}}
                         : json{{"path", it->path}, {"content", util::Base64Encode(it->content)}, {"encoding", "base64"}};
    body += util::DumpJson(json{{"key", it->lfs ? "lfsFile" : "file"}, {"value", value}}) + "\n";
  }
  return body;
}

// Sends the commit once and reads its answer into `info`.
Status SendCommit(const Call& c, const std::vector<const Item*>& ops, const std::vector<std::string>& deletions,
                  CommitInfo& info) {
  const UploadFolderRequest& request = c.req;
  std::string url =
      c.ApiRepo() + "/commit/" + EncodeRevision(request.revision) + (request.create_pr ? "?create_pr=1" : "");
  HttpRequest hr;
  hr.method = "POST";
  hr.url = url;
  hr.body = CommitBody(request, ops, deletions);
  hr.timeout_s = c.s.opt.upload_api_timeout_s;
  hr.headers.emplace_back("Content-Type", "application/x-ndjson");
  hr.headers.emplace_back("Accept", "application/json");
  auto r = c.Send(std::move(hr), true, false);
  std::string what = "commit to " + request.repo_id + " at '" + request.revision + "'";
  if (!r.ok()) return r.status().WithPrefix(what + " failed (the commit may or may not have been made)");
  ErrorContext ctx = c.Ctx();
  ctx.url = RedactUrl(url);
  if (r->status == 409 || r->status == 412) {
    Status hs = StatusFromHttp(r->status, r->headers, r->body, ctx);
    return Status(Code::kConflict,
                  what + " refused: " +
                      (request.parent_commit.empty() ? std::string("conflict")
                                                     : "parent_commit " + request.parent_commit +
                                                           " is not the head of the branch") +
                      " (" + hs.message() + ")",
                  reason::kStaleParentCommit, hs.context());
  }
  if (r->status < 200 || r->status >= 300)
    return StatusFromHttp(r->status, r->headers, r->body, ctx).WithPrefix(what + " failed");
  auto j = util::ParseJson(r->body, ctx.url);
  if (!j.ok()) return j.status().Annotate(ctx).WithPrefix(what);
  auto a = ParseCommitAnswer(*j, ctx.url);
  if (!a.ok()) return a.status().Annotate(ctx).WithPrefix(what);
  info.commit_oid = a->commit_oid;
  info.commit_url = a->commit_url;
  auto cpos = info.commit_url.rfind("/commit/");
  info.repo_url = cpos == std::string::npos ? info.commit_url : info.commit_url.substr(0, cpos);
  info.pr_url = a->pr_url;
  if (auto d = info.pr_url.rfind("/discussions/"); d != std::string::npos) {
    std::string n = info.pr_url.substr(d + 13);
    if (!n.empty() && n.size() < 9 && std::all_of(n.begin(), n.end(), ::isdigit)) info.pr_num = std::stoi(n);
  }
  if (request.create_pr && info.pr_num < 0)
    return BadAnswer(what + ": create_pr was asked but the answer has no pullRequestUrl ending in /discussions/N", ctx);
  return Status::Ok();
}

}  // namespace

Result<std::string> CreateRepo(const Session& s, const std::string& repo_id, RepoType repo_type, bool private_repo) {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(repo_id));
  json body{{"name", repo_id}, {"organization", nullptr}, {"type", RepoTypeName(repo_type)},
            {"private", private_repo}, {"visibility", private_repo ? "private" : "public"}};
  if (auto slash = repo_id.find('/'); slash != std::string::npos) {
    body["organization"] = repo_id.substr(0, slash);
    body["name"] = repo_id.substr(slash + 1);
  }
  const std::string api = s.opt.config.endpoint + "/api/repos/create";
  HttpRequest hr;
  hr.method = "POST";
  hr.url = api;
  hr.body = util::DumpJson(body);
  hr.timeout_s = s.opt.upload_api_timeout_s;
  hr.max_retries = 0;  // once: a lost answer must not be sent twice
  hr.headers.emplace_back("Content-Type", "application/json");
  s.AddAuth(&hr);
  auto r = s.http->Send(hr, nullptr);
  if (!r.ok()) return r.status().WithPrefix("creating repo " + repo_id);
  std::string url = s.opt.config.endpoint + "/" + WebPrefix(repo_type) + repo_id;
  if (r->status == 409) return url;  // exist_ok
  ErrorContext ctx;
  ctx.repo_id = repo_id;
  ctx.url = RedactUrl(api);
  HUBLOAD_RETURN_IF_ERROR(StatusFromHttp(r->status, r->headers, r->body, ctx).WithPrefix("creating repo " + repo_id));
  if (r->body.empty()) return url;
  auto j = util::ParseJson(r->body, ctx.url);
  if (!j.ok()) return url;  // the repo exists; its URL is known without the answer
  auto given = ParseRepoUrl(*j, ctx.url);
  if (given.ok() && *given) return **given;
  return url;
}

Result<CommitInfo> CreateCommit(const Session& s, const UploadFolderRequest& request,
                                const std::vector<CommitAdd>& additions, const std::vector<std::string>& deletions) {
  HUBLOAD_RETURN_IF_ERROR(CheckRequest(request));
  std::set<std::string> added_paths;
  std::vector<Item> items;
  std::vector<std::string> pointer_warnings;
  items.reserve(additions.size());
  for (const auto& a : additions) {
    HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(a.path_in_repo));
    if (!added_paths.insert(a.path_in_repo).second)
      return Status(Code::kInvalidArgument, "commit to " + request.repo_id + " adds '" + a.path_in_repo + "' twice");
    std::error_code ec;
    auto st = fs::status(a.local_path, ec);
    if (ec || !fs::is_regular_file(st))
      return Status(Code::kInvalidArgument,
                    "'" + a.local_path + "' (for '" + a.path_in_repo + "') is not a readable file", reason::kNotAFile);
    Item it;
    it.path = a.path_in_repo;
    it.local = a.local_path;
    it.size = fs::file_size(a.local_path, ec);
    if (ec) return Status(Code::kIOError, "cannot stat '" + a.local_path + "': " + ec.message());
    if (LooksLikeLfsPointer(a.local_path, it.size))
      pointer_warnings.push_back("'" + a.local_path + "' (uploaded as '" + a.path_in_repo +
                                 "') looks like a Git LFS pointer file, not the content (run `git lfs pull`?)");
    items.push_back(std::move(it));
  }
  for (const auto& d : deletions) {
    HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(d));
    if (added_paths.count(d))
      return Status(Code::kInvalidArgument, "commit to " + request.repo_id + " both adds and deletes '" + d + "'");
  }
  if (items.empty() && deletions.empty())
    return Status(Code::kInvalidArgument, "nothing to commit to " + request.repo_id + ": no file to add or delete",
                  reason::kEmptyCommit);

  Call c{s, request};
  const UploadCallbacks* cb = &request.callbacks;
  Progress progress(cb);
  FirstError err(cb);
  CommitInfo info;
  info.warnings = std::move(pointer_warnings);

  // 1. One read per file: size check, sha256, sample.
  uint64_t total = 0;
  for (auto& it : items) total += it.size;
  progress.Start(UploadPhase::kHashing, total);
  util::ParallelFor(items.size(), s.opt.upload_hash_workers, [&] { return err.Stop(); }, [&](size_t i) {
    Status st = HashFile(items[i], progress, err);
    if (!st.ok()) err.Set(st.WithPrefix("reading '" + items[i].path + "'"));
  });
  HUBLOAD_RETURN_IF_ERROR(err.Get());
  progress.Finish();

  // 2. Upload modes and remote oids.
  if (!items.empty()) HUBLOAD_RETURN_IF_ERROR(Preupload(c, items));
  for (auto& it : items) {
    if (it.ignore) continue;
    if (!it.lfs) {
      HUBLOAD_ASSIGN_OR_RETURN(it.content, ReadWhole(it.local, it.size));
      if (!it.remote_oid.empty() && it.remote_oid == util::GitBlobId(it.content)) it.unchanged = true;
    } else if (!it.remote_oid.empty() && it.remote_oid == it.sha256) {
      it.unchanged = true;
    }
  }

  // 3. LFS objects (deduplicated by oid) through the batch API.
  std::vector<std::unique_ptr<Object>> objects;
  std::map<std::string, Object*> by_oid;
  for (auto& it : items) {
    if (it.ignore || it.unchanged || !it.lfs || by_oid.count(it.sha256)) continue;
    auto o = std::make_unique<Object>();
    o->oid = it.sha256;
    o->size = it.size;
    o->local = it.local;
    o->path = it.path;
    by_oid[o->oid] = o.get();
    objects.push_back(std::move(o));
  }
  std::vector<Object*> to_send;
  if (!objects.empty()) HUBLOAD_RETURN_IF_ERROR(LfsBatch(c, objects, to_send));
  if (err.Stop()) return err.Get();
  HUBLOAD_RETURN_IF_ERROR(Transfer(c, to_send, progress, err, info));

  // 4. The commit.
  std::vector<const Item*> ops;
  for (auto& it : items) {
    if (it.ignore) continue;
    if (it.unchanged) {
      info.unchanged.push_back(it.path);
      continue;
    }
    ops.push_back(&it);
    info.added.push_back(it.path);
    if (it.lfs) info.lfs.push_back(it.path);
  }
  info.deleted = deletions;
  std::sort(info.added.begin(), info.added.end());
  std::sort(info.lfs.begin(), info.lfs.end());
  std::sort(info.unchanged.begin(), info.unchanged.end());
  std::sort(info.deleted.begin(), info.deleted.end());
  progress.Start(UploadPhase::kCommitting, 0);
  if (ops.empty() && deletions.empty()) {
    // huggingface_hub: "No files have been modified since last commit. Skipping to prevent empty commit."
    HUBLOAD_ASSIGN_OR_RETURN(info.commit_oid, HeadCommit(c));
    info.committed = false;
    info.repo_url = s.opt.config.endpoint + "/" + WebPrefix(request.repo_type) + request.repo_id;
    info.commit_url = info.repo_url + "/commit/" + info.commit_oid;
    return info;
  }
  HUBLOAD_RETURN_IF_ERROR(SendCommit(c, ops, deletions, info));
  progress.Finish();
  return info;
}

}  // namespace hubload::hub_internal::upload

namespace hubload {

std::string GitBlobOid(const std::string& content) { return util::GitBlobId(content); }

}  // namespace hubload
