// Request preparation, the fault rules answered before routing, routing of
// the Hub's URL families, access checks, and the guard that turns any
// handler exception into a 500 (hub/server/impl.h).
#include <algorithm>
#include <cctype>
#include <ctime>
#include <exception>
#include <set>

#include <spdlog/spdlog.h>

#include "hub/server/impl.h"
#include "util/digest.h"
#include "util/percent.h"

namespace hubload::server {

using namespace internal;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 IMF-fixdate) `s` seconds from now.
std::string HttpDate(int s) {
  std::time_t t = std::time(nullptr) + s;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  return buf;
}

std::string RateGroup(const Request& r) {
  if (r.cdn) return "cdn";
  if (r.route_path.find("/resolve/") != std::string::npos || r.route_path.find("/raw/") != std::string::npos)
    return "resolvers";
  return "api";
}

void SetRateHeaders(Response* resp, const Faults::RateDecision& d) {
  if (d.hints & Faults::kRateLimitHeaders) {
    resp->Set("RateLimit", "\"" + d.group + "\";r=" + std::to_string(d.remaining) + ";t=" + std::to_string(d.reset_s));
    resp->Set("RateLimit-Policy", "\"fixed window\";\"" + d.group + "\";q=" + std::to_string(d.quota) +
                                      ";w=" + std::to_string(d.window_s));
  }
  if (!d.limited) return;
  if (d.hints & Faults::kRetryAfterDate) {
    resp->Set("Retry-After", HttpDate(d.reset_s));
  } else if (d.hints & Faults::kRetryAfterSeconds) {
    resp->Set("Retry-After", std::to_string(d.reset_s));
  }
}

bool IsAction(const std::string& s) {
  static const std::set<std::string> kActions = {"revision", "tree",   "paths-info", "preupload", "commit",
                                                 "branch",   "tag",    "refs",       "commits",   "settings"};
  return kActions.count(s) > 0;
}

std::string Join(const std::vector<std::string>& seg, size_t from) {
  std::string out;
  for (size_t i = from; i < seg.size(); ++i) out += (out.empty() ? "" : "/") + seg[i];
  return out;
}

}  // namespace

Response StatusResponse(const Status& s) {
  switch (s.code()) {
    case Code::kConflict: return ErrorResponse(409, "", s.message());
    case Code::kEntryNotFound: return ErrorResponse(404, "EntryNotFound", s.message());
    case Code::kRepoNotFound: return ErrorResponse(404, "RepoNotFound", s.message());
    case Code::kRevisionNotFound: return ErrorResponse(404, "RevisionNotFound", s.message());
    case Code::kPermissionDenied: return ErrorResponse(403, "", s.message());
    case Code::kInvalidArgument:
    case Code::kInvalidFormat:
    case Code::kNotFound: return ErrorResponse(400, "", s.message());
    default:
      spdlog::error("hubload serve: internal error: {}", s.ToString());
      return ErrorResponse(500, "", s.message());
  }
}

void Server::Impl::Prepare(Request& r) const {
  size_t q = r.target.find('?');
  r.raw_path = r.target.substr(0, q);
  if (q != std::string::npos) {
    auto parsed = util::ParseQuery(std::string_view(r.target).substr(q + 1));
    r.query_ok = parsed.has_value();
    if (parsed)
      for (auto& [k, v] : *parsed) r.query.insert({k, v});
  }
  auto decoded = util::PercentDecode(r.raw_path);
  r.path = decoded ? *decoded : r.raw_path;
  r.route_path = r.raw_path;
  std::string auth = r.Header("authorization");
  if (auth.size() > 7 && (auth.compare(0, 7, "Bearer ") == 0 || auth.compare(0, 7, "bearer ") == 0))
    r.token = auth.substr(7);
  std::string host = r.Header("host");
  r.host = IsValidHostHeader(host) ? host : "";
}

std::optional<Response> Server::Impl::Early(Request& r) {
  if (!r.cdn) {
    std::string prefix = faults->path_prefix();
    if (!prefix.empty()) {
      const std::string& p = r.raw_path;
      if (p.compare(0, prefix.size(), prefix) != 0 || (p.size() > prefix.size() && p[prefix.size()] != '/'))
        return ErrorResponse(404, "", "Not found: " + r.path + " (this server serves the Hub API under " + prefix + ")");
      r.route_path = p.size() == prefix.size() ? "/" : p.substr(prefix.size());
    }
  }
  if (auto rule = faults->TakeStatus(r.path)) {
    Response resp = ErrorResponse(rule->status, "", "Injected fault: status " + std::to_string(rule->status));
    if (rule->retry_after_s >= 0) resp.Set("Retry-After", std::to_string(rule->retry_after_s));
    return resp;
  }
  if (auto d = faults->TakeRate(RateGroup(r)); d && d->limited) {
    Response resp = JsonResponse(429, json{{"error", "rate limited"}});
    resp.Set("X-Error-Message", "rate limited (" + d->group + ": " + std::to_string(d->quota) + " requests per " +
                                    std::to_string(d->window_s) + " s)");
    SetRateHeaders(&resp, *d);
    return resp;
  } else if (d) {
    r.rate = *d;
  }
  if (!r.cdn) {
    if (auto rule = faults->TakeRedirect(r.route_path)) {
      std::string prefix = faults->path_prefix();
      size_t q = r.target.find('?');
      std::string query = q == std::string::npos ? "" : r.target.substr(q);
      std::string to = prefix + rule->to_prefix + r.route_path.substr(rule->from_prefix.size()) + query;
      if (to.empty() || to[0] != '/') to = "/" + to;
      std::string hostport = r.host.empty() ? UrlHost() + ":" + std::to_string(hub_port) : r.host;
      std::string loc;
      switch (rule->form) {
        case Faults::RedirectForm::kPathOnly: loc = to; break;
        case Faults::RedirectForm::kAbsolute: loc = "http://" + hostport + to; break;
        case Faults::RedirectForm::kProtocolRelative: loc = "//" + hostport + to; break;
        case Faults::RedirectForm::kRelative: {
          size_t depth = std::count(r.raw_path.begin(), r.raw_path.end(), '/');
          for (size_t i = 1; i < depth; ++i) loc += "../";
          loc += to.substr(1);
          break;
        }
      }
      Response resp;
      resp.status = rule->status;
      resp.Set("Location", loc);
      return resp;
    }
  }
  return std::nullopt;
}

namespace {
std::mutex g_hook_mutex;
std::shared_ptr<const std::function<void(const Request&)>> g_hook;  // set by tests only
}  // namespace

void internal::SetDispatchHookForTesting(std::function<void(const Request&)> hook) {
  std::lock_guard<std::mutex> l(g_hook_mutex);
  g_hook = hook ? std::make_shared<const std::function<void(const Request&)>>(std::move(hook)) : nullptr;
}

Response Server::Impl::Dispatch(Request& r) {
  Response resp;
  try {
    std::shared_ptr<const std::function<void(const Request&)>> hook;
    {
      std::lock_guard<std::mutex> l(g_hook_mutex);
      hook = g_hook;
    }
    if (hook) (*hook)(r);
    resp = Route(r);
  } catch (const std::exception& e) {
    spdlog::error("hubload serve: handler failed on {} {}: {}", r.method, r.path, e.what());
    resp = ErrorResponse(500, "", std::string("Internal server error: ") + e.what());
    resp.close = true;
  } catch (...) {
    spdlog::error("hubload serve: handler failed on {} {}: unknown exception", r.method, r.path);
    resp = ErrorResponse(500, "", "Internal server error");
    resp.close = true;
  }
  if (r.rate) SetRateHeaders(&resp, *r.rate);
  return resp;
}

void Server::Impl::ApplyReplacements(const Request& r) {
  for (auto& rep : faults->TakeDueReplacements(r.path)) {
    CommitOptions co;
    co.repo_type = rep.repo_type;
    co.branch = rep.branch;
    co.message = "Replace " + rep.path_in_repo + " (fault switch)";
    co.lfs_threshold_bytes = opt.lfs_threshold_bytes;
    co.lfs_by_extension = opt.lfs_by_extension;
    auto c = ReplaceFile(opt.root, rep.repo_id, rep.path_in_repo, rep.new_content, co);
    if (!c.ok()) spdlog::warn("hubload serve: fault replacement failed: {}", c.status().ToString());
  }
}

bool Server::Impl::RepoExists(RepoType type, const std::string& repo_id) const {
  auto d = RepoDir(root, type, repo_id);
  std::error_code ec;
  return d && fs::is_directory(*d, ec);
}

Response Server::Impl::Route(Request& r) {
  if (r.cdn) return HandleCdn(r);
  if (!r.query_ok) return ErrorResponse(400, "", "Bad percent-encoding in the query string");
  std::vector<std::string> raw = SplitRaw(r.route_path);
  std::vector<std::string> seg(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    auto d = util::PercentDecode(raw[i]);
    if (!d) return ErrorResponse(400, "", "Bad percent-encoding in path");
    seg[i] = std::move(*d);
  }
  // Tokens the server does not accept (except on self-authorising URLs).
  bool signed_route = !seg.empty() && seg[0] == "_lfs";
  if (!r.token.empty() && !opt.tokens.empty() && !signed_route &&
      std::find(opt.tokens.begin(), opt.tokens.end(), r.token) == opt.tokens.end())
    return ErrorResponse(401, "", "Invalid credentials in Authorization header");
  if (seg.empty()) return JsonResponse(200, json{{"server", "hubload serve"}});
  if (seg[0] == "_lfs" && seg.size() == 5 && r.method == "POST") {
    auto v = signer.Check(r.route_path, r.query);
    if (v != Signer::Verdict::kOk)
      return ErrorResponse(403, "", v == Signer::Verdict::kExpired ? "Signed upload URL has expired"
                                                                    : "Invalid signed upload URL");
    auto size_n = ParseDecimal(seg[3]);
    if (!size_n) return ErrorResponse(400, "", "bad size '" + seg[3] + "' in upload URL");
    uint64_t size = *size_n;
    if (seg[4] == "complete") return LfsComplete(r, seg[1], seg[2], size);
    if (seg[4] == "verify") return LfsVerify(r, seg[1], seg[2], size);
  }
  if (seg[0] == "api") return RouteApi(r, seg);
  return RouteWeb(r, seg);
}

Response Server::Impl::RouteApi(Request& r, const std::vector<std::string>& seg) {
  const bool get = r.method == "GET" || r.method == "HEAD";
  const bool post = r.method == "POST";
  if (seg.size() == 2 && seg[1] == "whoami-v2") {
    if (r.token.empty()) return ErrorResponse(401, "", "Invalid credentials in Authorization header");
    return JsonResponse(200, json{{"type", "user"}, {"name", "hubload"}, {"auth", {{"type", "access_token"}}}});
  }
  if (seg.size() == 2 && seg[1] == "validate-yaml" && post) return JsonResponse(200, json{{"warnings", json::array()}});
  if (seg.size() == 3 && seg[1] == "repos" && seg[2] == "create" && post) return CreateRepo(r);
  if (seg.size() < 3 || (seg[1] != "models" && seg[1] != "datasets" && seg[1] != "spaces"))
    return ErrorResponse(404, "", "Not found: " + r.path);
  RepoType type = *ParseRepoType(seg[1]);
  // The repo id has one or two segments; the action keyword decides.
  bool two_ok = seg.size() == 4 || (seg.size() >= 5 && IsAction(seg[4]));
  bool one_ok = seg.size() == 3 || (seg.size() >= 4 && IsAction(seg[3]));
  bool two = two_ok;
  if (two_ok && one_ok) two = RepoExists(type, seg[2] + "/" + seg[3]) || !RepoExists(type, seg[2]);
  if (!two_ok && !one_ok) two = seg.size() >= 5;  // unknown action of a two-segment repo: 404 below
  std::string repo_id = two ? seg[2] + "/" + seg[3] : seg[2];
  size_t at = two ? 4 : 3;
  if (seg.size() == at) {
    if (get) return RepoInfo(r, type, repo_id, "");
    return ErrorResponse(405, "", "Method not allowed");
  }
  const std::string& action = seg[at];
  std::string rest = Join(seg, at + 1);  // revision, name or revision/path
  if (action == "refs" && seg.size() == at + 1 && get) return Refs(r, type, repo_id);
  if (action == "settings" && seg.size() == at + 1 && r.method == "PUT") return UpdateSettings(r, type, repo_id);
  if (rest.empty()) return ErrorResponse(404, "", "Not found: " + r.path);
  if (action == "tree" && get) {
    // The revision is one segment (may hold %2F); the rest is the path. js
    // sends tree revisions raw: "refs/pr/1" arrives as three segments.
    std::string rev = seg[at + 1];
    size_t path_at = at + 2;
    if (rev == "refs" && seg.size() >= at + 4 && (seg[at + 2] == "pr" || seg[at + 2] == "convert")) {
      rev = "refs/" + seg[at + 2] + "/" + seg[at + 3];
      path_at = at + 4;
    }
    return Tree(r, type, repo_id, rev, Join(seg, path_at));
  }
  if (action == "revision" && get) return RepoInfo(r, type, repo_id, rest);
  if (action == "commits" && get) return Commits(r, type, repo_id, rest);
  if (action == "paths-info" && post) return PathsInfo(r, type, repo_id, rest);
  if (action == "preupload" && post) return Preupload(r, type, repo_id, rest);
  if (action == "commit" && post) return CommitApi(r, type, repo_id, rest);
  if (action == "branch" && (post || r.method == "DELETE")) return Branch(r, type, repo_id, rest);
  if (action == "tag" && (post || r.method == "DELETE")) return Tag(r, type, repo_id, rest);
  return ErrorResponse(404, "", "Not found: " + r.path);
}

Response Server::Impl::RouteWeb(Request& r, const std::vector<std::string>& seg) {
  const bool get = r.method == "GET" || r.method == "HEAD";
  // [datasets|spaces/]repo/(resolve|raw)/rev/path, repo/commit/oid,
  // repo/discussions/n and repo.git/info/lfs/objects/batch.
  RepoType type = RepoType::kModel;
  size_t i0 = 0;
  if (seg[0] == "datasets" || seg[0] == "spaces") {
    type = *ParseRepoType(seg[0]);
    i0 = 1;
  }
  for (size_t k = i0; k < seg.size() && k <= i0 + 1; ++k) {
    const std::string& s = seg[k];
    if (s.size() > 4 && s.compare(s.size() - 4, 4, ".git") == 0 && seg.size() == k + 5 && seg[k + 1] == "info" &&
        seg[k + 2] == "lfs" && seg[k + 3] == "objects" && seg[k + 4] == "batch" && r.method == "POST") {
      std::string repo_id;
      for (size_t j = i0; j <= k; ++j) repo_id += (repo_id.empty() ? "" : "/") + seg[j];
      repo_id.resize(repo_id.size() - 4);
      return LfsBatch(r, type, repo_id);
    }
  }
  for (size_t k : {i0 + 2, i0 + 1}) {
    if (k >= seg.size()) continue;
    const std::string& kw = seg[k];
    bool file_route = kw == "resolve" || kw == "raw";
    bool page_route = (kw == "commit" || kw == "discussions") && seg.size() == k + 2;
    if (!file_route && !page_route) continue;
    if (file_route && seg.size() < k + 3) continue;
    std::string repo_id = seg[i0];
    if (k == i0 + 2) repo_id += "/" + seg[i0 + 1];
    // A one-segment repo whose revision (or oid) is named like a keyword.
    if (k == i0 + 2 && !RepoExists(type, repo_id) && RepoExists(type, seg[i0]) &&
        (seg[i0 + 1] == "resolve" || seg[i0 + 1] == "raw" || seg[i0 + 1] == "commit" || seg[i0 + 1] == "discussions"))
      continue;
    if (!get) return ErrorResponse(405, "", "Method not allowed");
    if (kw == "commit") return CommitPage(r, type, repo_id, seg[k + 1]);
    if (kw == "discussions") return DiscussionPage(r, type, repo_id, seg[k + 1]);
    return Resolve(r, type, repo_id, seg[k + 1], Join(seg, k + 2), kw == "raw");
  }
  return ErrorResponse(404, "", "Not found: " + r.path);
}

std::optional<Response> Server::Impl::CheckAccess(const Request& r, const std::string& repo_id,
                                                  const fs::path& repo_dir, Need need) const {
  std::error_code ec;
  bool anon = r.token.empty();
  if (!fs::is_directory(repo_dir, ec) || !fs::is_directory(repo_dir / "snapshots", ec)) {
    return ErrorResponse(anon ? 401 : 404, "RepoNotFound",
                         "Repository Not Found for url: " + r.path + ". Please make sure you specified the correct "
                         "`repo_id` and `repo_type`. If you are trying to access a private or gated repo, make sure "
                         "you are authenticated.");
  }
  RepoSettings s = LoadSettings(repo_dir);
  std::string tok_hash = anon ? "" : util::Sha256Hex(r.token);
  auto listed = [&](const std::vector<std::string>& v) { return std::find(v.begin(), v.end(), tok_hash) != v.end(); };
  if (s.private_repo) {
    if (anon)
      return ErrorResponse(401, "RepoNotFound", "Repository Not Found for url: " + r.path + " (private repository).");
    if (!s.read_sha256.empty() && !listed(s.read_sha256))
      return ErrorResponse(404, "RepoNotFound", "Repository Not Found for url: " + r.path + ".");
  }
  if (need == Need::kDownload && !s.gated.empty()) {
    if (anon)
      return ErrorResponse(401, "GatedRepo",
                           "Access to model " + repo_id + " is restricted. You must have access to it and be "
                           "authenticated to access it. Please log in.");
    if (!listed(s.gated_sha256))
      return ErrorResponse(403, "GatedRepo",
                           "Access to model " + repo_id + " is restricted and you are not in the authorized list.");
  }
  if (need == Need::kWrite) {
    if (anon) return ErrorResponse(401, "", "Authorization header is required to write to " + repo_id + ".");
    if (opt.read_only) return ErrorResponse(403, "", "This server is a read-only mirror; writes are disabled.");
  }
  return std::nullopt;
}

std::optional<Response> Server::Impl::OpenRepo(const Request& r, RepoType type, const std::string& repo_id, Need need,
                                               fs::path* repo_dir) const {
  auto dir = RepoDir(root, type, repo_id);
  if (!dir)
    return ErrorResponse(r.token.empty() ? 401 : 404, "RepoNotFound", "Repository Not Found: invalid repo id " + repo_id);
  if (auto deny = CheckAccess(r, repo_id, *dir, need)) return deny;
  *repo_dir = *dir;
  return std::nullopt;
}

}  // namespace hubload::server
