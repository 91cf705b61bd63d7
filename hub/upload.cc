// Upload: huggingface_hub create_commit / upload_folder over HttpTransport
// (hub-protocol.md §5). See include/hubload/upload.h for the behaviour.
#include <fcntl.h>
#include <openssl/evp.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "hub/repo_urls.h"
#include "hubload/hub.h"
#include "hubload/upload.h"

namespace hubload {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
using hub_internal::ApiSegment;
using hub_internal::WebPrefix;

constexpr size_t kSampleBytes = 512;
constexpr size_t kReadBlock = 1 << 20;
const char* kLfsJson = "application/vnd.git-lfs+json";

// huggingface_hub DEFAULT_IGNORE_PATTERNS.
const std::vector<std::string> kDefaultIgnore = {".git",
                                                 ".git/*",
                                                 "*/.git",
                                                 "**/.git/**",
                                                 ".cache/huggingface",
                                                 ".cache/huggingface/*",
                                                 "*/.cache/huggingface",
                                                 "**/.cache/huggingface/**"};


std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Hex(const unsigned char* d, unsigned n) {
  static const char* k = "0123456789abcdef";
  std::string s(n * 2, '0');
  for (unsigned i = 0; i < n; ++i) {
    s[2 * i] = k[d[i] >> 4];
    s[2 * i + 1] = k[d[i] & 15];
  }
  return s;
}

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string StripSlashes(std::string s) {
  while (!s.empty() && s.front() == '/') s.erase(s.begin());
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// One file of the commit.
struct Item {
  std::string path;   // in repo
  std::string local;  // local file
  uint64_t size = 0;
  std::string sha256;
  std::string sample;
  bool lfs = false;
  bool ignore = false;
  std::string remote_oid;
  std::string content;  // regular files: the bytes (read after preupload)
  bool unchanged = false;
};

// An LFS object to send (several items may share one oid).
struct Object {
  std::string oid;
  uint64_t size = 0;
  std::string local;
  std::string path;  // first path in repo with this content (for messages)
  std::string upload_href;
  std::string verify_href;
  uint64_t chunk_size = 0;               // multipart when > 0
  std::vector<std::string> part_urls;    // ordered by part number
  std::vector<std::string> part_etags;   // filled by the PUTs
  std::atomic<int> parts_left{0};
};

struct PutTask {
  Object* obj = nullptr;
  int part = 0;  // 1-based; 0 = basic
  uint64_t offset = 0, length = 0;
};

// Progress reporting, serialised and rate-limited.
class Progress {
 public:
  explicit Progress(const UploadCallbacks* cb) : cb_(cb) {}
  void Start(UploadPhase phase, uint64_t total) {
    std::lock_guard<std::mutex> l(mu_);
    p_.phase = phase;
    p_.bytes_done = 0;
    p_.bytes_total = total;
    p_.path_in_repo.clear();
    Emit();
  }
  void Add(uint64_t n, const std::string& path) {
    std::lock_guard<std::mutex> l(mu_);
    p_.bytes_done += n;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100) && p_.bytes_done < p_.bytes_total) return;
    p_.path_in_repo = path;
    Emit();
  }
  void Finish() {
    std::lock_guard<std::mutex> l(mu_);
    p_.path_in_repo.clear();
    Emit();
  }

 private:
  void Emit() {
    last_ = std::chrono::steady_clock::now();
    if (cb_ && cb_->on_progress) cb_->on_progress(p_);
  }
  const UploadCallbacks* cb_;
  std::mutex mu_;
  UploadProgress p_;
  std::chrono::steady_clock::time_point last_{};
};

// First error wins; everybody else stops.
class FirstError {
 public:
  explicit FirstError(const UploadCallbacks* cb) : cb_(cb) {}
  void Set(Status s) {
    std::lock_guard<std::mutex> l(mu_);
    if (st_.ok()) st_ = std::move(s);
    stop_ = true;
  }
  bool Stop() {
    if (stop_.load()) return true;
    if (cb_ && cb_->cancelled && cb_->cancelled()) {
      Set(Status(Code::kCancelled, "upload cancelled by the caller; no commit was made", "Cancelled"));
      return true;
    }
    return false;
  }
  Status Get() {
    std::lock_guard<std::mutex> l(mu_);
    return st_;
  }

 private:
  const UploadCallbacks* cb_;
  std::mutex mu_;
  Status st_;
  std::atomic<bool> stop_{false};
};

// Runs fn(i) for i in [0, n) on up to `workers` threads; stops handing out
// work once `err.Stop()`.
void ParallelFor(size_t n, int workers, FirstError& err, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  auto loop = [&] {
    for (;;) {
      if (err.Stop()) return;
      size_t i = next.fetch_add(1);
      if (i >= n) return;
      fn(i);
    }
  };
  size_t t = std::min<size_t>(n, static_cast<size_t>(std::max(1, workers)));
  if (t <= 1) {
    loop();
    return;
  }
  std::vector<std::thread> threads;
  threads.reserve(t);
  for (size_t k = 0; k < t; ++k) threads.emplace_back(loop);
  for (auto& th : threads) th.join();
}

// sha256 + the 512-byte sample in one read of the file.
Status HashFile(Item& it, Progress& progress, FirstError& err) {
  int fd = ::open(it.local.c_str(), O_RDONLY | O_CLOEXEC);
  ErrorContext ctx;
  ctx.file = it.local;
  if (fd < 0) return Status(Code::kIOError, "cannot open '" + it.local + "': " + std::strerror(errno), "", ctx);
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha256(), nullptr);
  std::vector<char> buf(kReadBlock);
  uint64_t total = 0;
  Status st;
  for (;;) {
    if (err.Stop()) {
      st = Status(Code::kCancelled, "hashing of '" + it.local + "' stopped", "Cancelled", ctx);
      break;
    }
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      st = Status(Code::kIOError, "cannot read '" + it.local + "': " + std::strerror(errno), "", ctx);
      break;
    }
    if (n == 0) break;
    if (it.sample.size() < kSampleBytes)
      it.sample.append(buf.data(), std::min<size_t>(static_cast<size_t>(n), kSampleBytes - it.sample.size()));
    EVP_DigestUpdate(md, buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
    progress.Add(static_cast<uint64_t>(n), it.path);
  }
  ::close(fd);
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned dn = 0;
  EVP_DigestFinal_ex(md, d, &dn);
  EVP_MD_CTX_free(md);
  if (!st.ok()) return st;
  if (total != it.size)
    return Status(Code::kIOError,
                  "'" + it.local + "' changed while it was read: " + std::to_string(it.size) + " bytes at listing, " +
                      std::to_string(total) + " read",
                  "FileChanged", ctx);
  it.sha256 = Hex(d, dn);
  return Status::Ok();
}

Result<std::string> ReadWhole(const std::string& path, uint64_t size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ErrorContext ctx;
  ctx.file = path;
  if (fd < 0) return Status(Code::kIOError, "cannot open '" + path + "': " + std::strerror(errno), "", ctx);
  std::string s(size, '\0');
  uint64_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, s.data() + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<uint64_t>(n);
  }
  char extra;
  ssize_t more = ::read(fd, &extra, 1);
  ::close(fd);
  if (got != size || more > 0)
    return Status(Code::kIOError, "'" + path + "' changed while it was read (expected " + std::to_string(size) +
                                      " bytes)", "FileChanged", ctx);
  return s;
}

// Talks to the Hub for one upload call.
class Session {
 public:
  Session(const UploadOptions& o, const UploadFolderRequest& r) : opt_(o), req_(r) {
    endpoint_ = o.config.endpoint;
    while (!endpoint_.empty() && endpoint_.back() == '/') endpoint_.pop_back();
    if (o.transport) {
      http_ = once_ = o.transport;
    } else {
      once_ = MakeCurlTransport(o.transport_options);
      http_ = MakeRetryingTransport(once_, o.retry);
    }
  }

  const std::string& endpoint() const { return endpoint_; }
  std::string ApiRepo() const {
    return endpoint_ + "/api/" + ApiSegment(req_.repo_type) + "/" + req_.repo_id;
  }
  ErrorContext Ctx(const std::string& file = {}) const {
    ErrorContext c;
    c.repo_id = req_.repo_id;
    c.revision = req_.revision;
    c.file = file;
    return c;
  }

  // Sends a request; `auth` adds the bearer token (Hub API only, never presigned URLs).
  Result<HttpResponse> Send(HttpRequest req, bool auth, bool retry) {
    if (auth && !opt_.config.token.empty()) req.headers.emplace_back("Authorization", "Bearer " + opt_.config.token);
    return (retry ? http_ : once_)->Send(req, nullptr);
  }

  Result<json> Json(const std::string& method, const std::string& url, const std::string& body,
                    const std::string& content_type, bool auth, bool retry, const std::string& what,
                    const std::string& file = {}, const std::string& accept = "application/json") {
    HttpRequest req;
    req.method = method;
    req.url = url;
    req.body = body;
    req.timeout_s = opt_.api_timeout_s;
    if (!content_type.empty()) req.headers.emplace_back("Content-Type", content_type);
    req.headers.emplace_back("Accept", accept);
    auto r = Send(std::move(req), auth, retry);
    ErrorContext ctx = Ctx(file);
    ctx.url = RedactUrl(url);
    if (!r.ok()) return r.status().WithPrefix(what);
    if (r->status < 200 || r->status >= 300) {
      Status s = StatusFromHttp(r->status, r->headers, r->body, ctx);
      return s.WithPrefix(what);
    }
    if (r->body.empty()) return json::object();
    auto j = json::parse(r->body, nullptr, false);
    if (j.is_discarded())
      return Status(Code::kInvalidFormat, what + ": the server's answer is not JSON (" + ctx.url + ")",
                    "BadServerAnswer", ctx);
    return j;
  }

  HttpTransport& http() { return *http_; }

 private:
  const UploadOptions& opt_;
  const UploadFolderRequest& req_;
  std::string endpoint_;
  std::shared_ptr<HttpTransport> http_, once_;
};

Status BadAnswer(const std::string& what, ErrorContext ctx) {
  return Status(Code::kInvalidFormat, what, "BadServerAnswer", std::move(ctx));
}

// ---- preupload -------------------------------------------------------------
Status Preupload(Session& s, const UploadOptions& opt, const UploadFolderRequest& req, std::vector<Item>& items) {
  std::string url = s.ApiRepo() + "/preupload/" + EncodeRevision(req.revision) + (req.create_pr ? "?create_pr=1" : "");
  size_t bs = static_cast<size_t>(std::max(1, opt.batch_size));
  for (size_t start = 0; start < items.size(); start += bs) {
    size_t end = std::min(items.size(), start + bs);
    json files = json::array();
    std::map<std::string, Item*> by_path;
    for (size_t i = start; i < end; ++i) {
      files.push_back({{"path", items[i].path}, {"size", items[i].size}, {"sample", Base64(items[i].sample)}});
      by_path[items[i].path] = &items[i];
    }
    json body{{"files", files}};
    HUBLOAD_ASSIGN_OR_RETURN(json ans, s.Json("POST", url, body.dump(), "application/json", true, true,
                                              "preupload for repo " + req.repo_id));
    if (!ans.is_object() || !ans.contains("files") || !ans["files"].is_array())
      return BadAnswer("preupload for repo " + req.repo_id + ": answer has no files[] list", s.Ctx());
    std::set<std::string> seen;
    for (auto& f : ans["files"]) {
      if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("uploadMode") ||
          !f["uploadMode"].is_string())
        return BadAnswer("preupload for repo " + req.repo_id + ": a files[] entry lacks path/uploadMode", s.Ctx());
      std::string p = f["path"].get<std::string>();
      auto it = by_path.find(p);
      if (it == by_path.end()) continue;
      std::string mode = f["uploadMode"].get<std::string>();
      if (mode != "lfs" && mode != "regular")
        return BadAnswer("preupload: uploadMode '" + mode + "' for '" + p + "' is neither lfs nor regular", s.Ctx(p));
      Item& item = *it->second;
      item.lfs = mode == "lfs" && item.size > 0;  // huggingface_hub: empty files are regular
      item.ignore = f.contains("shouldIgnore") && f["shouldIgnore"].is_boolean() && f["shouldIgnore"].get<bool>();
      if (f.contains("oid") && f["oid"].is_string()) item.remote_oid = f["oid"].get<std::string>();
      seen.insert(p);
    }
    for (auto& [p, item] : by_path)
      if (!seen.count(p))
        return BadAnswer("preupload for repo " + req.repo_id + ": the answer does not mention '" + p + "'", s.Ctx(p));
  }
  return Status::Ok();
}

// ---- LFS batch + transfers ------------------------------------------------------
Status LfsBatch(Session& s, const UploadOptions& opt, const UploadFolderRequest& req,
                std::vector<std::unique_ptr<Object>>& objects, std::vector<Object*>& to_send) {
  std::string url = s.endpoint() + "/" + WebPrefix(req.repo_type) + req.repo_id + ".git/info/lfs/objects/batch";
  size_t bs = static_cast<size_t>(std::max(1, opt.batch_size));
  for (size_t start = 0; start < objects.size(); start += bs) {
    size_t end = std::min(objects.size(), start + bs);
    json objs = json::array();
    std::map<std::string, Object*> by_oid;
    for (size_t i = start; i < end; ++i) {
      objs.push_back({{"oid", objects[i]->oid}, {"size", objects[i]->size}});
      by_oid[objects[i]->oid] = objects[i].get();
    }
    json body{{"operation", "upload"},
              {"transfers", json::array({"basic", "multipart"})},
              {"objects", objs},
              {"hash_algo", "sha256"}};
    if (!req.create_pr) body["ref"] = {{"name", req.revision}};
    HUBLOAD_ASSIGN_OR_RETURN(json ans, s.Json("POST", url, body.dump(), kLfsJson, true, true,
                                              "LFS batch for repo " + req.repo_id, "", kLfsJson));
    if (!ans.is_object() || !ans.contains("objects") || !ans["objects"].is_array())
      return BadAnswer("LFS batch for repo " + req.repo_id + ": answer has no objects[] list", s.Ctx());
    std::set<std::string> seen;
    for (auto& o : ans["objects"]) {
      if (!o.is_object() || !o.contains("oid") || !o["oid"].is_string() || !o.contains("size") ||
          !o["size"].is_number_integer())
        return BadAnswer("LFS batch: an object lacks oid/size", s.Ctx());
      std::string oid = o["oid"].get<std::string>();
      auto it = by_oid.find(oid);
      if (it == by_oid.end()) return BadAnswer("LFS batch: the server answered for oid " + oid + " it was not asked", s.Ctx());
      Object& obj = *it->second;
      seen.insert(oid);
      if (o.contains("error")) {
        const json& e = o["error"];
        std::string msg = e.is_object() && e.contains("message") && e["message"].is_string()
                              ? e["message"].get<std::string>()
                              : e.dump();
        int code = e.is_object() && e.contains("code") && e["code"].is_number_integer() ? e["code"].get<int>() : 0;
        ErrorContext ctx = s.Ctx(obj.path);
        ctx.http_status = code;
        return Status(code == 401 ? Code::kUnauthorized : code == 403 ? Code::kPermissionDenied : Code::kInvalidArgument,
                      "LFS batch refused '" + obj.path + "' (oid " + oid + "): " + msg + " (code " +
                          std::to_string(code) + "); no commit was made",
                      "LfsObjectError", ctx);
      }
      if (!o.contains("actions") || !o["actions"].is_object() || !o["actions"].contains("upload")) continue;  // stored
      const json& up = o["actions"]["upload"];
      if (!up.is_object() || !up.contains("href") || !up["href"].is_string())
        return BadAnswer("LFS batch: upload action of '" + obj.path + "' has no href", s.Ctx(obj.path));
      obj.upload_href = up["href"].get<std::string>();
      if (o["actions"].contains("verify") && o["actions"]["verify"].is_object() &&
          o["actions"]["verify"].contains("href") && o["actions"]["verify"]["href"].is_string())
        obj.verify_href = o["actions"]["verify"]["href"].get<std::string>();
      if (up.contains("header") && up["header"].is_object() && up["header"].contains("chunk_size")) {
        const json& h = up["header"];
        std::string cs = h["chunk_size"].is_string() ? h["chunk_size"].get<std::string>()
                                                     : h["chunk_size"].is_number_unsigned() ? h["chunk_size"].dump() : "";
        uint64_t chunk = 0;
        try {
          chunk = cs.empty() ? 0 : std::stoull(cs);
        } catch (...) {
          chunk = 0;
        }
        if (chunk == 0) return BadAnswer("LFS batch: invalid chunk_size '" + cs + "' for '" + obj.path + "'", s.Ctx(obj.path));
        std::vector<std::pair<uint64_t, std::string>> parts;
        for (auto& [k, v] : h.items()) {
          if (k.empty() || !std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
          if (!v.is_string()) return BadAnswer("LFS batch: part URL " + k + " of '" + obj.path + "' is not a string", s.Ctx(obj.path));
          parts.emplace_back(std::stoull(k), v.get<std::string>());
        }
        std::sort(parts.begin(), parts.end());
        uint64_t want = (obj.size + chunk - 1) / chunk;
        if (parts.size() != want)
          return BadAnswer("LFS batch: '" + obj.path + "' (" + std::to_string(obj.size) + " bytes, chunk_size " +
                               std::to_string(chunk) + ") needs " + std::to_string(want) + " part URLs, the server gave " +
                               std::to_string(parts.size()),
                           s.Ctx(obj.path));
        obj.chunk_size = chunk;
        for (auto& p : parts) obj.part_urls.push_back(p.second);
        obj.part_etags.assign(parts.size(), "");
      }
      to_send.push_back(&obj);
    }
    for (auto& [oid, obj] : by_oid)
      if (!seen.count(oid))
        return BadAnswer("LFS batch: the answer does not mention '" + obj->path + "' (oid " + oid + ")", s.Ctx(obj->path));
  }
  return Status::Ok();
}

std::string PartLabel(const Object& o, int part) {
  if (part == 0) return "'" + o.path + "'";
  return "'" + o.path + "' (part " + std::to_string(part) + " of " + std::to_string(o.part_urls.size()) + ")";
}

Status Put(Session& s, const PutTask& t) {
  HttpRequest req;
  req.method = "PUT";
  req.url = t.part == 0 ? t.obj->upload_href : t.obj->part_urls[static_cast<size_t>(t.part - 1)];
  req.body_file = FileBody{t.obj->local, t.offset, t.length};
  const std::string url = req.url;
  auto r = s.Send(std::move(req), /*auth=*/false, /*retry=*/true);
  ErrorContext ctx = s.Ctx(t.obj->path);
  if (!r.ok()) {
    Status st = r.status();
    st.mutable_context().file = t.obj->path;
    return st.WithPrefix("uploading " + PartLabel(*t.obj, t.part) + " failed; no commit was made");
  }
  if (r->status < 200 || r->status >= 300) {
    ctx.url = RedactUrl(r->effective_url.empty() ? url : r->effective_url);
    return StatusFromHttp(r->status, r->headers, r->body, ctx)
        .WithPrefix("uploading " + PartLabel(*t.obj, t.part) + " failed; no commit was made");
  }
  if (t.part > 0) {
    auto etag = r->headers.Get("ETag");
    if (!etag || etag->empty())
      return BadAnswer("uploading " + PartLabel(*t.obj, t.part) + ": the part answer has no ETag; no commit was made",
                       ctx);
    t.obj->part_etags[static_cast<size_t>(t.part - 1)] = *etag;
  }
  return Status::Ok();
}

Status CompleteObject(Session& s, Object& o) {
  if (o.chunk_size > 0) {
    json parts = json::array();
    for (size_t i = 0; i < o.part_etags.size(); ++i)
      parts.push_back({{"partNumber", static_cast<int>(i + 1)}, {"etag", o.part_etags[i]}});
    json body{{"oid", o.oid}, {"parts", parts}};
    auto r = s.Json("POST", o.upload_href, body.dump(), kLfsJson, false, true,
                    "completing the multipart upload of '" + o.path + "' failed; no commit was made", o.path, kLfsJson);
    if (!r.ok()) return r.status();
  }
  if (!o.verify_href.empty()) {
    json body{{"oid", o.oid}, {"size", o.size}};
    auto r = s.Json("POST", o.verify_href, body.dump(), "application/json", true, true,
                    "verifying the upload of '" + o.path + "' failed; no commit was made", o.path);
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

Status Transfer(Session& s, const UploadOptions& opt, std::vector<Object*>& to_send, Progress& progress,
                FirstError& err, CommitInfo& info) {
  std::vector<PutTask> tasks;
  uint64_t total = 0;
  for (Object* o : to_send) {
    total += o->size;
    if (o->chunk_size == 0) {
      tasks.push_back({o, 0, 0, o->size});
      o->parts_left = 1;
    } else {
      o->parts_left = static_cast<int>(o->part_urls.size());
      for (size_t i = 0; i < o->part_urls.size(); ++i) {
        uint64_t off = i * o->chunk_size;
        tasks.push_back({o, static_cast<int>(i + 1), off, std::min(o->chunk_size, o->size - off)});
      }
    }
  }
  progress.Start(UploadPhase::kUploading, total);
  std::atomic<uint64_t> sent{0};
  ParallelFor(tasks.size(), opt.upload_workers, err, [&](size_t i) {
    const PutTask& t = tasks[i];
    Status st = Put(s, t);
    if (!st.ok()) return err.Set(st);
    sent += t.length;
    progress.Add(t.length, t.obj->path);
    if (t.obj->parts_left.fetch_sub(1) == 1) {
      Status c = CompleteObject(s, *t.obj);
      if (!c.ok()) err.Set(c);
    }
  });
  HUBLOAD_RETURN_IF_ERROR(err.Get());
  progress.Finish();
  info.lfs_bytes_uploaded = sent.load();
  info.lfs_objects_uploaded = to_send.size();
  return Status::Ok();
}

Result<std::string> HeadCommit(Session& s, const UploadFolderRequest& req) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, s.Json("GET", s.ApiRepo() + "/revision/" + EncodeRevision(req.revision), "", "",
                                          true, true, "reading the head of " + req.revision));
  if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string())
    return BadAnswer("repo info of " + req.repo_id + " has no sha", s.Ctx());
  return j["sha"].get<std::string>();
}

Status CheckRequest(const UploadFolderRequest& req) {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(req.repo_id));
  if (req.revision.empty()) return Status(Code::kInvalidArgument, "upload to " + req.repo_id + ": revision is empty");
  HUBLOAD_RETURN_IF_ERROR(ValidateRevision(req.revision));
  if (!req.parent_commit.empty() &&
      (req.parent_commit.size() < 7 || req.parent_commit.size() > 40 || !IsLowerHex(req.parent_commit)))
    return Status(Code::kInvalidArgument,
                  "parent_commit '" + req.parent_commit + "' must be 7 to 40 lower-case hex digits (a commit id)",
                  "BadParentCommit");
  return Status::Ok();
}

}  // namespace

std::string GitBlobOid(const std::string& content) {
  std::string head = "blob " + std::to_string(content.size()) + std::string(1, '\0');
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  EVP_DigestInit_ex(md, EVP_sha1(), nullptr);
  EVP_DigestUpdate(md, head.data(), head.size());
  EVP_DigestUpdate(md, content.data(), content.size());
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  EVP_DigestFinal_ex(md, d, &n);
  EVP_MD_CTX_free(md);
  return Hex(d, n);
}

Result<std::string> CreateRepo(const UploadOptions& options, const std::string& repo_id, RepoType repo_type,
                               bool private_repo) {
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(repo_id));
  UploadFolderRequest req;
  req.repo_id = repo_id;
  req.repo_type = repo_type;
  Session s(options, req);
  json body{{"name", repo_id}, {"organization", nullptr}, {"type", RepoTypeName(repo_type)},
            {"private", private_repo}, {"visibility", private_repo ? "private" : "public"}};
  if (auto slash = repo_id.find('/'); slash != std::string::npos) {
    body["organization"] = repo_id.substr(0, slash);
    body["name"] = repo_id.substr(slash + 1);
  }
  HttpRequest hr;
  hr.method = "POST";
  hr.url = s.endpoint() + "/api/repos/create";
  hr.body = body.dump();
  hr.timeout_s = options.api_timeout_s;
  hr.headers.emplace_back("Content-Type", "application/json");
  auto r = s.Send(std::move(hr), true, false);
  if (!r.ok()) return r.status().WithPrefix("creating repo " + repo_id);
  std::string url = s.endpoint() + "/" + WebPrefix(repo_type) + repo_id;
  if (r->status == 409) return url;  // exist_ok
  ErrorContext ctx;
  ctx.repo_id = repo_id;
  ctx.url = RedactUrl(s.endpoint() + "/api/repos/create");
  HUBLOAD_RETURN_IF_ERROR(StatusFromHttp(r->status, r->headers, r->body, ctx).WithPrefix("creating repo " + repo_id));
  auto j = json::parse(r->body, nullptr, false);
  if (j.is_object() && j.contains("url") && j["url"].is_string()) return j["url"].get<std::string>();
  return url;
}

Result<CommitInfo> CreateCommit(const UploadOptions& options, const UploadFolderRequest& request,
                                const std::vector<CommitAdd>& additions, const std::vector<std::string>& deletions) {
  HUBLOAD_RETURN_IF_ERROR(CheckRequest(request));
  std::set<std::string> added_paths;
  std::vector<Item> items;
  items.reserve(additions.size());
  for (const auto& a : additions) {
    HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(a.path_in_repo));
    if (!added_paths.insert(a.path_in_repo).second)
      return Status(Code::kInvalidArgument, "commit to " + request.repo_id + " adds '" + a.path_in_repo + "' twice");
    std::error_code ec;
    auto st = fs::status(a.local_path, ec);
    if (ec || !fs::is_regular_file(st))
      return Status(Code::kInvalidArgument, "'" + a.local_path + "' (for '" + a.path_in_repo + "') is not a readable file",
                    "NotAFile");
    Item it;
    it.path = a.path_in_repo;
    it.local = a.local_path;
    it.size = fs::file_size(a.local_path, ec);
    if (ec) return Status(Code::kIOError, "cannot stat '" + a.local_path + "': " + ec.message());
    items.push_back(std::move(it));
  }
  for (const auto& d : deletions) {
    HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(d));
    if (added_paths.count(d))
      return Status(Code::kInvalidArgument, "commit to " + request.repo_id + " both adds and deletes '" + d + "'");
  }
  if (items.empty() && deletions.empty())
    return Status(Code::kInvalidArgument, "nothing to commit to " + request.repo_id + ": no file to add or delete",
                  "EmptyCommit");

  Session s(options, request);
  const UploadCallbacks* cb = &request.callbacks;
  Progress progress(cb);
  FirstError err(cb);
  CommitInfo info;

  // 1. One read per file: size check, sha256, sample.
  uint64_t total = 0;
  for (auto& it : items) total += it.size;
  progress.Start(UploadPhase::kHashing, total);
  ParallelFor(items.size(), options.hash_workers, err, [&](size_t i) {
    Status st = HashFile(items[i], progress, err);
    if (!st.ok()) err.Set(st.WithPrefix("reading '" + items[i].path + "'"));
  });
  HUBLOAD_RETURN_IF_ERROR(err.Get());
  progress.Finish();

  // 2. Upload modes and remote oids.
  if (!items.empty()) HUBLOAD_RETURN_IF_ERROR(Preupload(s, options, request, items));
  for (auto& it : items) {
    if (it.ignore) continue;
    if (!it.lfs) {
      HUBLOAD_ASSIGN_OR_RETURN(it.content, ReadWhole(it.local, it.size));
      if (!it.remote_oid.empty() && it.remote_oid == GitBlobOid(it.content)) it.unchanged = true;
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
  if (!objects.empty()) HUBLOAD_RETURN_IF_ERROR(LfsBatch(s, options, request, objects, to_send));
  if (err.Stop()) return err.Get();
  HUBLOAD_RETURN_IF_ERROR(Transfer(s, options, to_send, progress, err, info));

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
    HUBLOAD_ASSIGN_OR_RETURN(info.commit_oid, HeadCommit(s, request));
    info.committed = false;
    info.repo_url = s.endpoint() + "/" + WebPrefix(request.repo_type) + request.repo_id;
    info.commit_url = info.repo_url + "/commit/" + info.commit_oid;
    return info;
  }
  std::string title = request.commit_message.empty() ? "Upload folder using hubload" : request.commit_message;
  json header{{"summary", title}, {"description", request.commit_description}};
  if (!request.parent_commit.empty()) header["parentCommit"] = request.parent_commit;
  std::string body = json{{"key", "header"}, {"value", header}}.dump() + "\n";
  for (const auto& d : deletions) body += json{{"key", "deletedFile"}, {"value", {{"path", d}}}}.dump() + "\n";
  for (const Item* it : ops) {
    if (it->lfs) {
      body += json{{"key", "lfsFile"},
                   {"value", {{"path", it->path}, {"algo", "sha256"}, {"oid", it->sha256}, {"size", it->size}}}}
                  .dump() +
              "\n";
    } else {
      body += json{{"key", "file"}, {"value", {{"path", it->path}, {"content", Base64(it->content)}, {"encoding", "base64"}}}}
                  .dump() +
              "\n";
    }
  }
  std::string url = s.ApiRepo() + "/commit/" + EncodeRevision(request.revision) + (request.create_pr ? "?create_pr=1" : "");
  HttpRequest hr;
  hr.method = "POST";
  hr.url = url;
  hr.body = std::move(body);
  hr.timeout_s = options.api_timeout_s;
  hr.headers.emplace_back("Content-Type", "application/x-ndjson");
  hr.headers.emplace_back("Accept", "application/json");
  auto r = s.Send(std::move(hr), true, false);
  std::string what = "commit to " + request.repo_id + " at '" + request.revision + "'";
  if (!r.ok()) return r.status().WithPrefix(what + " failed (the commit may or may not have been made)");
  ErrorContext ctx = s.Ctx();
  ctx.url = RedactUrl(url);
  if (r->status == 409 || r->status == 412) {
    Status hs = StatusFromHttp(r->status, r->headers, r->body, ctx);
    return Status(Code::kConflict,
                  what + " refused: " +
                      (request.parent_commit.empty() ? std::string("conflict")
                                                     : "parent_commit " + request.parent_commit +
                                                           " is not the head of the branch") +
                      " (" + hs.message() + ")",
                  "StaleParentCommit", hs.context());
  }
  if (r->status < 200 || r->status >= 300)
    return StatusFromHttp(r->status, r->headers, r->body, ctx).WithPrefix(what + " failed");
  auto j = json::parse(r->body, nullptr, false);
  if (!j.is_object() || !j.contains("commitOid") || !j["commitOid"].is_string() || !j.contains("commitUrl") ||
      !j["commitUrl"].is_string())
    return BadAnswer(what + ": the answer lacks commitOid/commitUrl", ctx);
  info.commit_oid = j["commitOid"].get<std::string>();
  info.commit_url = j["commitUrl"].get<std::string>();
  auto cpos = info.commit_url.rfind("/commit/");
  info.repo_url = cpos == std::string::npos ? info.commit_url : info.commit_url.substr(0, cpos);
  if (j.contains("pullRequestUrl") && j["pullRequestUrl"].is_string()) {
    info.pr_url = j["pullRequestUrl"].get<std::string>();
    auto d = info.pr_url.rfind("/discussions/");
    if (d != std::string::npos) {
      std::string n = info.pr_url.substr(d + 13);
      if (!n.empty() && n.size() < 9 && std::all_of(n.begin(), n.end(), ::isdigit)) info.pr_num = std::stoi(n);
    }
  }
  if (request.create_pr && info.pr_num < 0)
    return BadAnswer(what + ": create_pr was asked but the answer has no pullRequestUrl ending in /discussions/N", ctx);
  progress.Finish();
  return info;
}

Result<CommitInfo> UploadFolder(const UploadOptions& options, const UploadFolderRequest& request) {
  HUBLOAD_RETURN_IF_ERROR(CheckRequest(request));
  std::error_code ec;
  if (!fs::is_directory(request.folder, ec))
    return Status(Code::kInvalidArgument, "upload to " + request.repo_id + ": '" + request.folder + "' is not a folder",
                  "NotAFolder");
  const std::string prefix = StripSlashes(request.path_in_repo);
  if (!prefix.empty()) HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(prefix));

  // Local files, filtered as huggingface_hub filter_repo_objects.
  std::vector<std::string> ignore = request.ignore_patterns;
  ignore.insert(ignore.end(), kDefaultIgnore.begin(), kDefaultIgnore.end());
  std::vector<CommitAdd> adds;
  fs::path root(request.folder);
  size_t visited = 0;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++visited > 10'000'000) return Status(Code::kInvalidArgument, "'" + request.folder + "' has too many entries");
    std::error_code ec2;
    if (!it->is_regular_file(ec2)) continue;  // files and symlinks to files
    std::string rel = it->path().lexically_relative(root).generic_string();
    if (!MatchesPatterns(rel, request.allow_patterns, ignore)) continue;
    std::string in_repo = prefix.empty() ? rel : prefix + "/" + rel;
    Status v = ValidateRepoPath(in_repo);
    if (!v.ok()) return v.WithPrefix("local file '" + it->path().string() + "' cannot be uploaded");
    adds.push_back({in_repo, it->path().string()});
  }
  if (ec) return Status(Code::kIOError, "cannot list '" + request.folder + "': " + ec.message());
  std::sort(adds.begin(), adds.end(), [](const CommitAdd& a, const CommitAdd& b) { return a.path_in_repo < b.path_in_repo; });

  if (adds.empty() && request.delete_patterns.empty())
    return Status(Code::kInvalidArgument,
                  "nothing to upload from '" + request.folder + "' to " + request.repo_id +
                      ": no file matches the allow/ignore patterns and no delete pattern is given",
                  "EmptyCommit");
  if (request.create_repo) {
    auto url = CreateRepo(options, request.repo_id, request.repo_type, request.private_repo);
    if (!url.ok()) return url.status();
  }

  // Remote files to delete (huggingface_hub _prepare_folder_deletions).
  std::vector<std::string> deletions;
  if (!request.delete_patterns.empty()) {
    ClientOptions co;
    co.config = options.config;
    co.config.offline = false;
    if (co.config.cache_dir.empty()) co.config.cache_dir = (fs::temp_directory_path() / "hubload-unused-cache").string();
    co.transport = options.transport ? options.transport
                                     : MakeRetryingTransport(MakeCurlTransport(options.transport_options), options.retry);
    HubClient client(co);
    auto listing = client.ListFiles(request.repo_id, request.create_pr ? "main" : request.revision, request.repo_type);
    if (!listing.ok()) return listing.status().WithPrefix("listing files to delete in " + request.repo_id);
    std::set<std::string> added;
    for (auto& a : adds) added.insert(a.path_in_repo);
    const std::string pre = prefix.empty() ? "" : prefix + "/";
    for (const auto& f : listing->files) {
      if (f.path.compare(0, pre.size(), pre) != 0) continue;
      std::string rel = f.path.substr(pre.size());
      if (f.path == ".gitattributes" || added.count(f.path)) continue;
      if (MatchesPatterns(rel, request.delete_patterns, {})) deletions.push_back(f.path);
    }
  }
  if (adds.empty() && deletions.empty())
    return Status(Code::kInvalidArgument,
                  "nothing to upload from '" + request.folder + "' to " + request.repo_id +
                      ": no file matches the allow/ignore patterns and nothing is to be deleted",
                  "EmptyCommit");
  UploadFolderRequest r = request;
  if (r.commit_message.empty()) r.commit_message = "Upload folder using hubload";
  return CreateCommit(options, r, adds, deletions);
}

}  // namespace hubload
