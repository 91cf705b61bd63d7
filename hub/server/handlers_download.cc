// Downloads: /resolve/ and /raw/ (etag, ranges, conditional requests, LFS
// redirect to the CDN listener) and the CDN listener itself (signed URLs).
// Protocol: hub-protocol.md §1 and §8.2.
#include <algorithm>

#include "hub/server/impl.h"
#include "util/percent.h"

namespace hubload::server {

using namespace internal;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

bool IfNoneMatchHits(const std::string& inm, const std::string& etag) {
  size_t start = 0;
  while (start < inm.size()) {
    size_t end = inm.find(',', start);
    if (end == std::string::npos) end = inm.size();
    std::string t = inm.substr(start, end - start);
    while (!t.empty() && t.front() == ' ') t.erase(0, 1);
    while (!t.empty() && t.back() == ' ') t.pop_back();
    if (t.rfind("W/", 0) == 0) t = t.substr(2);
    if (t == "*" || t == Quote(etag)) return true;
    start = end + 1;
  }
  return false;
}

bool ParseNum(const std::string& s, uint64_t* v) {
  auto n = ParseDecimal(s);
  if (n) *v = *n;
  return n.has_value();
}

// S3-style XML error of the CDN (what a storage host sends on 403).
Response CdnError(const std::string& code, const std::string& message) {
  Response r;
  r.status = 403;
  r.body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>" + code + "</Code><Message>" + message +
           "</Message></Error>";
  r.Set("Content-Type", "application/xml");
  return r;
}

}  // namespace

Response Server::Impl::ServeFile(const Request& r, Response resp, const fs::path& file, uint64_t size,
                                 const std::string& etag) {
  resp.Set("ETag", Quote(etag));
  resp.Set("Accept-Ranges", "bytes");
  resp.Set("Content-Type", "application/octet-stream");
  std::string inm = r.Header("if-none-match");
  if (!inm.empty() && IfNoneMatchHits(inm, etag)) {
    resp.status = 304;
    return resp;
  }
  resp.has_file = true;
  resp.file = file;
  resp.offset = 0;
  resp.length = size;
  std::string range = r.Header("range");
  if (range.empty() || faults->ignore_range()) return resp;
  std::string if_range = r.Header("if-range");
  if (!if_range.empty() && if_range != Quote(etag)) return resp;  // changed: full body
  if (range.rfind("bytes=", 0) != 0) return resp;
  std::string spec = range.substr(6);
  if (spec.find(',') != std::string::npos) return resp;  // multi-range: full body
  size_t dash = spec.find('-');
  if (dash == std::string::npos) return resp;
  std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  auto unsatisfiable = [&] {
    resp.has_file = false;
    resp.status = 416;
    resp.Set("Content-Range", "bytes */" + std::to_string(size));
    resp.Set("Content-Type", "application/json; charset=utf-8");
    resp.body = DumpJson(json{{"error", "Requested range not satisfiable: " + range}});
    return resp;
  };
  uint64_t first = 0, last = 0;
  if (a.empty()) {
    uint64_t n;
    if (!ParseNum(b, &n)) return resp;
    if (size == 0) {
      resp.Set("Content-Range", "bytes */0");
      return resp;
    }
    if (n == 0) return unsatisfiable();
    first = n >= size ? 0 : size - n;
    last = size - 1;
  } else {
    if (!ParseNum(a, &first)) return resp;
    if (b.empty()) {
      last = size == 0 ? 0 : size - 1;
    } else if (!ParseNum(b, &last) || last < first) {
      return resp;
    }
    if (size == 0) {
      // bytes=0-0 on an empty file: 200, empty body, Content-Range bytes */0 (hub-protocol.md §1.7).
      resp.Set("Content-Range", "bytes */0");
      return resp;
    }
    if (first >= size) return unsatisfiable();
    if (last >= size) last = size - 1;
  }
  resp.status = 206;
  resp.offset = first;
  resp.length = last - first + 1;
  resp.Set("Content-Range", "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(size));
  return resp;
}

Response Server::Impl::Resolve(Request& r, RepoType type, const std::string& repo_id, const std::string& rev,
                               const std::string& path, bool raw) {
  fs::path repo_dir;
  if (auto deny = OpenRepo(r, type, repo_id, Need::kDownload, &repo_dir)) return *deny;
  auto commit = ResolveRevision(repo_dir, rev);
  if (!commit) return ErrorResponse(404, "RevisionNotFound", "Invalid rev id: " + rev);
  Response base;
  base.Set("X-Repo-Commit", *commit);
  auto missing = [&](const std::string& why) {
    Response e = ErrorResponse(404, "EntryNotFound", why);
    e.Set("X-Repo-Commit", *commit);
    return e;
  };
  if (!IsSafeRepoPath(path)) return missing("Invalid path in repo: " + path);
  auto st = Stat(root, repo_dir, *commit, path);
  if (!st.ok()) {
    if (st.status().code() == Code::kPermissionDenied) return ErrorResponse(403, "", "Access outside the store denied");
    return missing("Entry not found: " + path + " at " + *commit);
  }
  Entry e = *st;
  if (e.is_dir) return missing("Entry not found (is a directory): " + path);
  if (!e.present) {
    // Listed by the snapshot's trees/<commit>.json but not in the store.
    Status pulled = PullThrough(type, repo_id, *commit, path);
    if (!pulled.ok()) {
      Response resp = missing("Entry " + path + " of " + repo_id + " at " + *commit +
                              " is listed but not in this mirror's cache (" + pulled.message() + ")");
      if (pulled.code() != Code::kEntryNotFound) resp.status = 502;
      return resp;
    }
    auto again = Stat(root, repo_dir, *commit, path);
    if (!again.ok() || !again->present) return missing("Entry " + path + " is not in this mirror's cache");
    e = *again;
  }
  base.unproven = SnapshotCompleteness(root, repo_dir, *commit) == Completeness::kUnproven;
  if (raw && e.lfs) {
    // /raw/ of an LFS file serves the git object: the pointer.
    Response resp = base;
    resp.Set("ETag", Quote(e.oid));
    resp.Set("Content-Type", "text/plain; charset=utf-8");
    if (r.Header("if-none-match") == Quote(e.oid)) {
      resp.status = 304;
      return resp;
    }
    resp.body = LfsPointer(e.sha256, e.size);
    return resp;
  }
  base.Set("X-Linked-Etag", Quote(e.etag));
  base.Set("X-Linked-Size", std::to_string(e.size));
  if (e.lfs && !raw) {
    base.Set("ETag", Quote(e.etag));
    base.Set("Accept-Ranges", "bytes");
    std::string inm = r.Header("if-none-match");
    if (!inm.empty() && (inm == Quote(e.etag) || inm == "*")) {
      base.status = 304;
      return base;
    }
    std::string folder = repo_dir.filename().string();
    std::string cdn_path = "/" + folder + "/" + e.blob_name;
    std::string cdn = CdnUrl(&r);
    base.status = 302;
    base.Set("Location",
             cdn + cdn_path + signer.Query(cdn_path, SignedTtl()) + "&name=" + util::PercentEncode(path, "/"));
    base.Set("Content-Type", "text/plain; charset=utf-8");
    base.body = "Found. Redirecting to " + cdn + cdn_path;
    return base;
  }
  return ServeFile(r, base, e.file, e.size, e.etag);
}

Response Server::Impl::HandleCdn(Request& r) {
  if (r.method != "GET" && r.method != "HEAD") return ErrorResponse(405, "", "Method not allowed");
  std::vector<std::string> seg = SplitRaw(r.raw_path);
  if (seg.size() != 2) return CdnError("AccessDenied", "Invalid signed URL");
  Signer::Verdict v = r.query_ok ? signer.Check(r.raw_path, r.query) : Signer::Verdict::kBad;
  if (v == Signer::Verdict::kBad) return CdnError("AccessDenied", "Invalid signed URL: signature does not match");
  if (v == Signer::Verdict::kExpired) return CdnError("AccessDenied", "Request has expired");
  const std::string& folder = seg[0];
  const std::string& blob = seg[1];
  if (folder.find("..") != std::string::npos || folder.empty() || folder[0] == '.' ||
      !(IsHexOf(blob, 40, 40) || IsHexOf(blob, 64, 64)))
    return ErrorResponse(404, "", "Not found");
  fs::path file = root / folder / "blobs" / blob;
  std::error_code ec;
  fs::path canon = fs::canonical(file, ec);
  if (ec || canon.native().rfind(root.native() + "/", 0) != 0) return ErrorResponse(404, "", "Not found");
  uint64_t size = fs::file_size(canon, ec);
  if (ec) return ErrorResponse(404, "", "Not found");
  Response base;
  base.Set("X-Linked-Size", std::to_string(size));
  Response resp = ServeFile(r, base, canon, size, blob);
  if (resp.has_file && r.method == "GET" && faults->signed_url_byte_budget() > 0) {
    std::string sig = r.Query("sig");
    uint64_t allowed = faults->ReserveUrlBytes(sig, resp.length);
    if (allowed == 0) return CdnError("AccessDenied", "Request has expired");
    resp.budget_sig = sig;
    resp.budget_bytes = allowed;
  }
  return resp;
}

}  // namespace hubload::server
