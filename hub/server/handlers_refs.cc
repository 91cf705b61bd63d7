// Refs and history (issue 20), as huggingface_hub's HfApi calls them:
//   POST|DELETE /api/{type}s/{repo}/branch/{name}   create_branch / delete_branch
//   POST /api/{type}s/{repo}/tag/{revision}          create_tag  {"tag", "message"?}
//   DELETE /api/{type}s/{repo}/tag/{name}            delete_tag
//   GET /api/{type}s/{repo}/refs[?include_prs=1]     list_repo_refs
//   GET /api/{type}s/{repo}/commits/{rev}[?limit&p]  list_repo_commits (Link pagination,
//                                                    X-Total-Count as @huggingface/hub countCommits reads it)
// and the pages the server hands out in commit answers:
//   GET /{prefix}{repo}/commit/{oid}, GET /{prefix}{repo}/discussions/{n}
// (JSON when the request accepts application/json, else a small HTML page).
#include <algorithm>

#include "hub/server/bodies.h"
#include "hub/server/impl.h"
#include "util/percent.h"

namespace hubload::server {

using namespace internal;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

Response Page(const Request& r, const json& j, const std::string& title, const std::string& html_body) {
  if (r.Header("accept").find("application/json") != std::string::npos) return JsonResponse(200, j);
  Response resp;
  resp.body = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + HtmlEscape(title) +
              "</title></head>\n<body>\n<h1>" + HtmlEscape(title) + "</h1>\n" + html_body + "</body></html>\n";
  resp.Set("Content-Type", "text/html; charset=utf-8");
  return resp;
}

json RefsJson(const std::vector<RefInfo>& refs) {
  json a = json::array();
  for (auto& r : refs) a.push_back({{"name", r.name}, {"ref", r.ref}, {"targetCommit", r.target_commit}});
  return a;
}

}  // namespace

Response Server::Impl::Branch(Request& r, RepoType type, const std::string& repo_id, const std::string& name) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kWrite, &repo_dir)) return *deny;
  if (r.method == "DELETE") {
    Status st = DeleteBranch(opt.root, repo_id, name, type);
    return st.ok() ? JsonResponse(200, json::object()) : StatusResponse(st);
  }
  auto body = ParseBranchBody(r.body, "branch body");
  if (!body.ok()) return ErrorResponse(400, "", body.status().message());
  Status st = CreateBranch(opt.root, repo_id, name, body->starting_point, type, body->empty, body->overwrite);
  if (!st.ok()) return StatusResponse(st);
  auto commit = ResolveRevision(repo_dir, name);
  return JsonResponse(200, json{{"name", name}, {"ref", "refs/heads/" + name}, {"targetCommit", commit.value_or("")}});
}

Response Server::Impl::Tag(Request& r, RepoType type, const std::string& repo_id, const std::string& name) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kWrite, &repo_dir)) return *deny;
  if (r.method == "DELETE") {
    Status st = DeleteTag(opt.root, repo_id, name, type);
    return st.ok() ? JsonResponse(200, json::object()) : StatusResponse(st);
  }
  auto body = ParseTagBody(r.body, "tag body");
  if (!body.ok()) return ErrorResponse(400, "", body.status().message());
  Status st = CreateTag(opt.root, repo_id, body->tag, name, body->message, type);
  if (!st.ok()) return StatusResponse(st);
  auto commit = ResolveRevision(repo_dir, body->tag);
  return JsonResponse(200,
                      json{{"name", body->tag}, {"ref", "refs/tags/" + body->tag}, {"targetCommit", commit.value_or("")}});
}

Response Server::Impl::Refs(Request& r, RepoType type, const std::string& repo_id) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kRead, &repo_dir)) return *deny;
  auto refs = ListRefs(opt.root, repo_id, type);
  if (!refs.ok()) return StatusResponse(refs.status());
  json j{{"branches", RefsJson(refs->branches)}, {"tags", RefsJson(refs->tags)}, {"converts", RefsJson(refs->converts)}};
  if (r.QueryBool("include_prs")) j["pullRequests"] = RefsJson(refs->pull_requests);
  return JsonResponse(200, j);
}

Response Server::Impl::Commits(Request& r, RepoType type, const std::string& repo_id, const std::string& rev) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kRead, &repo_dir)) return *deny;
  auto commits = ListCommits(opt.root, repo_id, rev, type);
  if (!commits.ok()) return StatusResponse(commits.status());
  uint64_t limit = 50;
  if (std::string l = r.Query("limit"); !l.empty()) {
    auto n = ParseDecimal(l, 6);
    if (!n || *n == 0) return ErrorResponse(400, "", "Invalid limit '" + l + "'");
    limit = std::min<uint64_t>(*n, 1000);
  }
  uint64_t page = 0;
  if (std::string p = r.Query("p"); !p.empty()) {
    auto n = ParseDecimal(p, 9);
    if (!n) return ErrorResponse(400, "", "Invalid page '" + p + "'");
    page = *n;
  }
  bool formatted = false;
  auto range = r.query.equal_range("expand[]");
  for (auto it = range.first; it != range.second; ++it) formatted |= it->second == "formatted";
  json arr = json::array();
  uint64_t total = commits->size();
  uint64_t begin = std::min<uint64_t>(total, page * limit), end = std::min<uint64_t>(total, begin + limit);
  for (uint64_t i = begin; i < end; ++i) {
    const CommitInfo& c = (*commits)[i];
    json j{{"id", c.id},
           {"title", c.title},
           {"message", c.message},
           {"date", c.date},
           {"authors", json::array({{{"user", "hubload"}, {"avatar", ""}}})}};
    if (formatted) j["formatted"] = {{"title", HtmlEscape(c.title)}, {"message", HtmlEscape(c.message)}};
    arr.push_back(std::move(j));
  }
  Response resp = JsonResponse(200, arr);
  resp.Set("X-Total-Count", std::to_string(total));
  if (end < total) {
    std::string next = Base(r) + r.route_path + "?limit=" + std::to_string(limit) + "&p=" + std::to_string(page + 1);
    if (formatted) next += "&" + util::PercentEncode("expand[]") + "=formatted";
    resp.Set("Link", "<" + next + ">; rel=\"next\"");
  }
  return resp;
}

Response Server::Impl::CommitPage(Request& r, RepoType type, const std::string& repo_id, const std::string& oid) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kRead, &repo_dir)) return *deny;
  auto commit = IsHexOf(oid, 7, 40) ? ResolveRevision(repo_dir, oid) : std::nullopt;
  if (!commit) return ErrorResponse(404, "RevisionNotFound", "Commit " + oid + " not found in " + repo_id);
  RepoSettings s = LoadSettings(repo_dir);
  CommitRecord rec;
  if (auto it = s.commits.find(*commit); it != s.commits.end()) rec = it->second;
  auto listing = List(root, repo_dir, *commit, "", true);
  json files = json::array();
  std::string items;
  if (listing.ok())
    for (auto& e : *listing)
      if (!e.is_dir) {
        files.push_back(e.path);
        items += "<li>" + HtmlEscape(e.path) + "</li>\n";
      }
  std::string date = CommitDate(repo_dir, s, *commit);
  json j{{"id", *commit}, {"repo", repo_id}, {"title", rec.title}, {"message", rec.message},
         {"parent", rec.parent}, {"date", date}, {"files", files}};
  std::string html = "<p>Commit <code>" + *commit + "</code> of " + HtmlEscape(repo_id) + ", " + HtmlEscape(date) +
                     "</p>\n<pre>" + HtmlEscape(rec.message) + "</pre>\n<ul>\n" + items + "</ul>\n";
  return Page(r, j, rec.title.empty() ? "Commit " + commit->substr(0, 7) : rec.title, html);
}

Response Server::Impl::DiscussionPage(Request& r, RepoType type, const std::string& repo_id, const std::string& num) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kRead, &repo_dir)) return *deny;
  auto n = ParseDecimal(num, 8);
  std::optional<std::string> commit;
  if (n) commit = ResolveRevision(repo_dir, "refs/pr/" + std::to_string(*n));
  if (!commit) return ErrorResponse(404, "", "Discussion " + num + " not found in " + repo_id);
  std::string ref = "refs/pr/" + std::to_string(*n);
  RepoSettings s = LoadSettings(repo_dir);
  std::string title;
  if (auto it = s.commits.find(*commit); it != s.commits.end()) title = it->second.title;
  json j{{"num", *n}, {"repo", repo_id}, {"isPullRequest", true}, {"status", "open"},
         {"ref", ref}, {"targetCommit", *commit}, {"title", title}};
  std::string html = "<p>Pull request #" + std::to_string(*n) + " of " + HtmlEscape(repo_id) + " (" + ref +
                     ", head <code>" + *commit + "</code>)</p>\n";
  return Page(r, j, "Pull request #" + std::to_string(*n) + (title.empty() ? "" : ": " + title), html);
}

}  // namespace hubload::server
