// Branches, tags, refs and commits (hub/refs.h), as huggingface_hub hf_api.py:
//   create_branch  POST   /api/{type}s/{repo}/branch/{quote(branch, safe="")}  {"startingPoint"?}
//   delete_branch  DELETE /api/{type}s/{repo}/branch/{quote(branch, safe="")}
//   create_tag     POST   /api/{type}s/{repo}/tag/{quote(revision, safe="")}   {"tag", "message"?}
//   delete_tag     DELETE /api/{type}s/{repo}/tag/{quote(tag, safe="")}
//   list_repo_refs GET    /api/{type}s/{repo}/refs[?include_prs=1]
//   list_repo_commits GET /api/{type}s/{repo}/commits/{quote(revision, safe="")} (Link pagination)
// exist_ok: a 409 answer is success (huggingface_hub checks the status only).
#include "hub/errors.h"
#include "hub/url.h"
#include "hub/refs.h"

#include "hub/answers.h"
#include "hub/http_parse.h"
#include "hubload/reasons.h"
#include "util/json.h"

namespace hubload::hub_internal {
namespace {

using json = nlohmann::json;

Status CheckName(const std::string& repo_id, const std::string& kind, const std::string& name) {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(repo_id));
  if (name.empty()) return Status(Code::kInvalidArgument, repo_id + ": the " + kind + " name is empty");
  Status st = ValidateRevision(name);
  if (!st.ok()) return st.WithPrefix(repo_id + ": bad " + kind + " name '" + name + "'");
  return Status::Ok();
}

// Sends one writing call (never retried: a lost answer must not be sent
// twice). OK for 2xx, and for 409 when exist_ok.
Status Write(const Session& s, const std::string& method, const std::string& url, const json* body,
             ErrorContext ctx, bool exist_ok, const std::string& what) {
  HttpRequest hr;
  hr.method = method;
  hr.url = url;
  if (body) {
    hr.body = util::DumpJson(*body);
    hr.headers.emplace_back("Content-Type", "application/json");
  }
  hr.headers.emplace_back("Accept", "application/json");
  hr.timeout_s = s.opt.upload_api_timeout_s;
  hr.max_retries = 0;
  s.AddAuth(&hr);
  ctx.url = RedactUrl(url);
  auto r = s.http->Send(hr, nullptr);
  if (!r.ok()) return WithCtx(r.status(), ctx).WithPrefix(what);
  if (r->status >= 200 && r->status < 300) return Status::Ok();
  if (r->status == 409) {
    if (exist_ok) return Status::Ok();
    Status hs = StatusFromHttp(r->status, r->headers, r->body, ctx);
    return Status(Code::kConflict, what + ": it exists already (" + hs.message() + ")",
                  reason::kRefExists, hs.context());
  }
  return StatusFromHttp(r->status, r->headers, r->body, ctx).WithPrefix(what);
}

}  // namespace

Status CreateBranch(const Session& s, const std::string& repo_id, const std::string& branch,
                    const CreateBranchOptions& o) {
  HUBLOAD_RETURN_IF_ERROR(CheckName(repo_id, "branch", branch));
  json body = json::object();
  if (!o.revision.empty()) body["startingPoint"] = o.revision;
  std::string url = s.ApiUrl(o.repo_type, repo_id, "/branch/" + EncodeRevision(branch));
  std::string what = "creating branch '" + branch + "' of " + repo_id +
                     (o.revision.empty() ? std::string() : " at '" + o.revision + "'");
  Status st = Write(s, "POST", url, &body, s.Ctx(repo_id, o.revision, ""), o.exist_ok, what);
  // huggingface_hub: with exist_ok, a 403 (no write access to the namespace)
  // is success when the branch is listed; else the 403 stands.
  if (o.exist_ok && st.code() == Code::kPermissionDenied) {
    auto refs = ListRepoRefs(s, repo_id, o.repo_type, false);
    if (refs.ok())
      for (const GitRefInfo& b : refs->branches)
        if (b.name == branch) return Status::Ok();
  }
  return st;
}

Status DeleteBranch(const Session& s, const std::string& repo_id, const std::string& branch, RepoType t) {
  HUBLOAD_RETURN_IF_ERROR(CheckName(repo_id, "branch", branch));
  std::string url = s.ApiUrl(t, repo_id, "/branch/" + EncodeRevision(branch));
  return Write(s, "DELETE", url, nullptr, s.Ctx(repo_id, branch, ""), false,
               "deleting branch '" + branch + "' of " + repo_id);
}

Status CreateTag(const Session& s, const std::string& repo_id, const std::string& tag, const CreateTagOptions& o) {
  HUBLOAD_RETURN_IF_ERROR(CheckName(repo_id, "tag", tag));
  const std::string rev = o.revision.empty() ? std::string("main") : o.revision;
  json body{{"tag", tag}};
  if (!o.message.empty()) body["message"] = o.message;
  std::string url = s.ApiUrl(o.repo_type, repo_id, "/tag/" + EncodeRevision(rev));
  return Write(s, "POST", url, &body, s.Ctx(repo_id, rev, ""), o.exist_ok,
               "creating tag '" + tag + "' of " + repo_id + " at '" + rev + "'");
}

Status DeleteTag(const Session& s, const std::string& repo_id, const std::string& tag, RepoType t) {
  HUBLOAD_RETURN_IF_ERROR(CheckName(repo_id, "tag", tag));
  std::string url = s.ApiUrl(t, repo_id, "/tag/" + EncodeRevision(tag));
  return Write(s, "DELETE", url, nullptr, s.Ctx(repo_id, tag, ""), false,
               "deleting tag '" + tag + "' of " + repo_id);
}

Result<RepoRefs> ListRepoRefs(const Session& s, const std::string& repo_id, RepoType t, bool include_pull_requests) {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(repo_id));
  std::string url = s.ApiUrl(t, repo_id, include_pull_requests ? "/refs?include_prs=1" : "/refs");
  ErrorContext ctx = s.Ctx(repo_id, "", "");
  HUBLOAD_ASSIGN_OR_RETURN(json j, s.GetJson(url, ctx));
  auto refs = ParseRefs(j, RedactUrl(url));
  if (!refs.ok()) return refs.status().Annotate(ctx);
  if (!include_pull_requests) refs->pull_requests.clear();
  return refs;
}

Result<std::vector<GitCommitInfo>> ListRepoCommits(const Session& s, const std::string& repo_id,
                                                   const std::string& revision, RepoType t) {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(repo_id));
  const std::string rev = revision.empty() ? std::string("main") : revision;
  HUBLOAD_RETURN_IF_ERROR(ValidateRevision(rev));
  std::string url = s.ApiUrl(t, repo_id, "/commits/" + EncodeRevision(rev));
  ErrorContext ctx = s.Ctx(repo_id, rev, "");
  std::vector<GitCommitInfo> out;
  for (int page = 0; page < 100000 && !url.empty(); ++page) {
    HttpHeaders h;
    HUBLOAD_ASSIGN_OR_RETURN(json j, s.GetJson(url, ctx, &h));
    auto commits = ParseCommitsPage(j, RedactUrl(url));
    if (!commits.ok()) return commits.status().Annotate(ctx);
    for (GitCommitInfo& c : *commits) out.push_back(std::move(c));
    auto next = NextLink(h);
    url = next ? *next : std::string();
    if (!url.empty() && UrlOrigin(url) != s.endpoint_origin)
      return Status(Code::kInvalidFormat, "commit pagination of " + repo_id + " points to another host",
                    reason::kBadLink,
                    ctx);
  }
  return out;
}

}  // namespace hubload::hub_internal
