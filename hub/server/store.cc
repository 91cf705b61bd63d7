// The server's store: Hugging Face cache layout plus .hubload-repo.json.
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "hub/server/store_internal.h"

namespace hubload::server {
namespace internal {
namespace {

std::mutex& CommitMutex() {
  static std::mutex mu;
  return mu;
}

std::string Digest(const EVP_MD* md, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, md, nullptr);
  return HexOf(out, len);
}

std::string RandomHex(size_t bytes) {
  std::vector<unsigned char> b(bytes);
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) {
    for (auto& c : b) c = static_cast<unsigned char>(std::rand());
  }
  return HexOf(b.data(), b.size());
}

bool ReadText(const fs::path& p, std::string* out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

Status WriteAtomic(const fs::path& p, const std::string& data) {
  fs::path tmp = p;
  tmp += ".tmp-" + RandomHex(4);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return Status(Code::kIOError, "cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return Status(Code::kIOError, "cannot rename into " + p.string() + ": " + ec.message());
  }
  return Status::Ok();
}

bool IsWithin(const fs::path& canonical_root, const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::canonical(p, ec);
  if (ec) return false;
  auto r = canonical_root.native();
  auto s = c.native();
  return s == r || (s.size() > r.size() && s.compare(0, r.size(), r) == 0 && s[r.size()] == '/');
}

const char* kLfsExtensions[] = {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".onnx", ".msgpack",
                                ".gguf", ".npy", ".npz", ".pkl", ".pickle", ".parquet", ".arrow", ".zip",
                                ".tar", ".gz", ".tgz", ".model", ".ot", ".tflite", ".joblib"};

}  // namespace

std::string HexOf(const unsigned char* md, size_t n) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(hex[md[i] >> 4]);
    s.push_back(hex[md[i] & 15]);
  }
  return s;
}

std::string Sha256Hex(const std::string& data) { return Digest(EVP_sha256(), data); }
std::string Sha1Hex(const std::string& data) { return Digest(EVP_sha1(), data); }

bool HashFile(const fs::path& p, std::string* sha256, std::string* git_sha1, uint64_t* size) {
  std::error_code ec;
  uint64_t n = fs::file_size(p, ec);
  if (ec) return false;
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return false;
  EVP_MD_CTX* c256 = EVP_MD_CTX_new();
  EVP_MD_CTX* c1 = EVP_MD_CTX_new();
  EVP_DigestInit_ex(c256, EVP_sha256(), nullptr);
  EVP_DigestInit_ex(c1, EVP_sha1(), nullptr);
  std::string hdr = "blob " + std::to_string(n);
  EVP_DigestUpdate(c1, hdr.data(), hdr.size() + 1);  // includes the NUL
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    EVP_DigestUpdate(c256, buf.data(), got);
    EVP_DigestUpdate(c1, buf.data(), got);
    total += got;
  }
  bool ok = !std::ferror(f) && total == n;
  std::fclose(f);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(c256, md, &len);
  if (sha256) *sha256 = HexOf(md, len);
  EVP_DigestFinal_ex(c1, md, &len);
  if (git_sha1) *git_sha1 = HexOf(md, len);
  EVP_MD_CTX_free(c256);
  EVP_MD_CTX_free(c1);
  if (size) *size = total;
  return ok;
}

std::string Base64Decode(const std::string& in, bool* ok) {
  std::string clean;
  clean.reserve(in.size());
  for (char c : in)
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  *ok = true;
  if (clean.empty()) return {};
  if (clean.size() % 4 != 0) {
    *ok = false;
    return {};
  }
  std::string out(clean.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()), static_cast<int>(clean.size()));
  if (n < 0) {
    *ok = false;
    return {};
  }
  size_t pad = 0;
  if (clean.size() >= 1 && clean.back() == '=') ++pad;
  if (clean.size() >= 2 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

std::string Base64Encode(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool PercentDecode(const std::string& in, std::string* out, bool plus_is_space) {
  out->clear();
  out->reserve(in.size());
  auto hexval = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int a = hexval(in[i + 1]), b = hexval(in[i + 2]);
      if (a < 0 || b < 0) return false;
      out->push_back(static_cast<char>(a * 16 + b));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

std::string PercentEncode(const std::string& in, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : in) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

bool IsHex(const std::string& s, size_t min_len, size_t max_len) {
  if (s.size() < min_len || s.size() > max_len) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string NowIso8601() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

std::string LfsPointer(const std::string& sha256, uint64_t size) {
  return "version https://git-lfs.github.com/spec/v1\noid sha256:" + sha256 + "\nsize " + std::to_string(size) + "\n";
}

bool IsSafeRepoPath(const std::string& path) {
  if (path.empty() || path.size() > 4096 || path.front() == '/' || path.back() == '/') return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string seg = path.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == ".." || seg.size() > 255) return false;
    start = end + 1;
  }
  for (char c : path)
    if (c == '\\' || c == '\0' || c == '\n' || c == '\r') return false;
  return true;
}

bool IsSafeRefName(const std::string& ref) {
  if (!IsSafeRepoPath(ref)) return false;
  for (char c : ref)
    if (static_cast<unsigned char>(c) < 0x20 || c == ' ' || c == '~' || c == '^' || c == ':' || c == '?' ||
        c == '*' || c == '[')
      return false;
  return true;
}

bool IsValidRepoType(const std::string& t) { return t == "model" || t == "dataset" || t == "space"; }

bool IsValidRepoId(const std::string& id) {
  if (id.empty() || id.size() > 200) return false;
  size_t slash = id.find('/');
  if (slash != std::string::npos && id.find('/', slash + 1) != std::string::npos) return false;
  size_t start = 0;
  while (true) {
    size_t end = id.find('/', start);
    std::string seg = id.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (seg.empty() || seg == "." || seg == ".." || seg.find("--") != std::string::npos || seg.front() == '-' ||
        seg.front() == '.')
      return false;
    for (char c : seg)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return true;
}

bool IsLfsPath(const std::string& path, uint64_t size, uint64_t threshold, bool by_extension) {
  if (size == 0) return false;
  if (size >= threshold) return true;
  if (!by_extension) return false;
  for (const char* ext : kLfsExtensions) {
    std::string e = ext;
    if (path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

RepoSettings LoadSettings(const fs::path& repo_dir) {
  RepoSettings s;
  std::string text;
  if (!ReadText(repo_dir / ".hubload-repo.json", &text)) return s;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return s;
  s.private_repo = j.value("private", false);
  if (j.contains("gated") && j["gated"].is_string()) s.gated = j["gated"].get<std::string>();
  if (j.contains("read_tokens_sha256") && j["read_tokens_sha256"].is_array())
    for (auto& v : j["read_tokens_sha256"])
      if (v.is_string()) s.read_sha256.push_back(v.get<std::string>());
  if (j.contains("gated_tokens_sha256") && j["gated_tokens_sha256"].is_array())
    for (auto& v : j["gated_tokens_sha256"])
      if (v.is_string()) s.gated_sha256.push_back(v.get<std::string>());
  s.created_at = j.value("created_at", "");
  if (j.contains("commits") && j["commits"].is_object()) s.commits = j["commits"];
  return s;
}

Status SaveSettings(const fs::path& repo_dir, const RepoSettings& s) {
  nlohmann::json j;
  j["private"] = s.private_repo;
  if (s.gated.empty()) {
    j["gated"] = false;
  } else {
    j["gated"] = s.gated;
  }
  j["read_tokens_sha256"] = s.read_sha256;
  j["gated_tokens_sha256"] = s.gated_sha256;
  j["created_at"] = s.created_at;
  j["commits"] = s.commits;
  return WriteAtomic(repo_dir / ".hubload-repo.json", j.dump(1));
}

std::optional<fs::path> RepoDir(const fs::path& root, const std::string& repo_type, const std::string& repo_id) {
  std::string name = RepoFolderName(repo_type, repo_id);
  if (name.empty()) return std::nullopt;
  return root / name;
}

std::optional<std::string> ResolveRevision(const fs::path& repo_dir, const std::string& revision) {
  std::string rev = revision == "HEAD" ? "main" : revision;
  std::error_code ec;
  if (IsSafeRefName(rev)) {
    fs::path ref = repo_dir / "refs" / rev;
    std::string text;
    if (fs::is_regular_file(ref, ec) && ReadText(ref, &text)) {
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
      if (IsHex(text, 40, 40) && fs::is_directory(repo_dir / "snapshots" / text, ec)) return text;
      return std::nullopt;
    }
  }
  std::string lower = rev;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (IsHex(lower, 40, 40)) {
    if (fs::is_directory(repo_dir / "snapshots" / lower, ec)) return lower;
    return std::nullopt;
  }
  if (IsHex(lower, 7, 39)) {
    std::string found;
    for (auto it = fs::directory_iterator(repo_dir / "snapshots", ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      std::string n = it->path().filename().string();
      if (IsHex(n, 40, 40) && n.compare(0, lower.size(), lower) == 0) {
        if (!found.empty()) return std::nullopt;  // ambiguous
        found = n;
      }
    }
    if (!found.empty()) return found;
  }
  return std::nullopt;
}

namespace {

// Fills content fields of a file entry from its resolved location.
bool DescribeFile(const fs::path& canonical_root, const fs::path& link, Entry* e) {
  std::error_code ec;
  if (!IsWithin(canonical_root, link)) return false;
  fs::path target = fs::canonical(link, ec);
  if (ec || !fs::is_regular_file(target, ec)) return false;
  e->file = target;
  e->size = fs::file_size(target, ec);
  if (ec) return false;
  std::string name = target.filename().string();
  bool in_blobs = target.parent_path().filename() == "blobs";
  if (in_blobs && IsHex(name, 64, 64)) {
    e->lfs = true;
    e->sha256 = name;
    e->etag = name;
    std::string ptr = LfsPointer(name, e->size);
    e->pointer_size = ptr.size();
    e->oid = GitBlobSha1(ptr);
    e->blob_name = name;
  } else if (in_blobs && IsHex(name, 40, 40)) {
    e->lfs = false;
    e->etag = name;
    e->oid = name;
    e->blob_name = name;
  } else {
    // A plain file (not a blob): hash it.
    std::string sha1;
    if (!HashFile(target, nullptr, &sha1, nullptr)) return false;
    e->etag = sha1;
    e->oid = sha1;
  }
  return true;
}

std::string DirOid(const std::vector<std::pair<std::string, std::string>>& children) {
  std::string s = "tree\n";
  for (auto& [n, o] : children) s += n + " " + o + "\n";
  return Sha1Hex(s);
}

// Recursively lists `dir_path` (absolute) whose repo path is `rel`.
// Returns the pseudo-oid of the directory.
std::string Walk(const fs::path& canonical_root, const fs::path& dir_path, const std::string& rel, bool recursive,
                 int depth, std::vector<Entry>* out) {
  std::vector<std::pair<std::string, std::string>> children;
  std::error_code ec;
  std::vector<fs::directory_entry> items;
  for (auto it = fs::directory_iterator(dir_path, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    items.push_back(*it);
  std::sort(items.begin(), items.end(),
            [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
  for (auto& it : items) {
    std::string name = it.path().filename().string();
    std::string p = rel.empty() ? name : rel + "/" + name;
    std::error_code ec2;
    if (fs::is_directory(it.path(), ec2) && !fs::is_symlink(it.path(), ec2)) {
      Entry d;
      d.path = p;
      d.is_dir = true;
      size_t pos = out ? out->size() : 0;
      if (out && depth >= 0) out->push_back(d);
      std::vector<Entry>* sub = (recursive && out) ? out : nullptr;
      std::string oid = depth > 64 ? Sha1Hex(p) : Walk(canonical_root, it.path(), p, recursive, depth + 1, sub);
      if (out && depth >= 0) (*out)[pos].oid = oid;
      children.push_back({name, oid});
    } else {
      Entry e;
      e.path = p;
      if (!DescribeFile(canonical_root, it.path(), &e)) continue;
      children.push_back({name, e.oid});
      if (out) out->push_back(std::move(e));
    }
  }
  return DirOid(children);
}

}  // namespace

Result<Entry> Stat(const fs::path& root, const fs::path& repo_dir, const std::string& commit, const std::string& path) {
  std::error_code ec;
  fs::path croot = fs::canonical(root, ec);
  if (ec) return Status(Code::kIOError, "store root unreadable: " + root.string());
  fs::path snap = repo_dir / "snapshots" / commit;
  Entry e;
  e.path = path;
  if (path.empty()) {
    e.is_dir = true;
    e.oid = Walk(croot, snap, "", false, 0, nullptr);
    return e;
  }
  if (!IsSafeRepoPath(path)) return Status(Code::kInvalidArgument, "invalid path in repo: " + path);
  fs::path p = snap / path;
  if (!fs::exists(fs::symlink_status(p, ec))) return Status(Code::kEntryNotFound, "no such entry: " + path);
  if (!IsWithin(croot, p)) return Status(Code::kPermissionDenied, "entry escapes the store: " + path);
  if (fs::is_directory(p, ec)) {
    if (fs::is_symlink(p, ec)) return Status(Code::kEntryNotFound, "no such entry: " + path);
    e.is_dir = true;
    e.oid = Walk(croot, p, path, false, 0, nullptr);
    return e;
  }
  if (!DescribeFile(croot, p, &e)) return Status(Code::kEntryNotFound, "no such file: " + path);
  return e;
}

Result<std::vector<Entry>> List(const fs::path& root, const fs::path& repo_dir, const std::string& commit,
                                const std::string& dir, bool recursive) {
  std::error_code ec;
  fs::path croot = fs::canonical(root, ec);
  if (ec) return Status(Code::kIOError, "store root unreadable: " + root.string());
  fs::path base = repo_dir / "snapshots" / commit;
  if (!dir.empty()) {
    if (!IsSafeRepoPath(dir)) return Status(Code::kInvalidArgument, "invalid path in repo: " + dir);
    base /= dir;
    if (!fs::is_directory(base, ec) || fs::is_symlink(base, ec) || !IsWithin(croot, base))
      return Status(Code::kEntryNotFound, "no such directory: " + dir);
  }
  std::vector<Entry> out;
  Walk(croot, base, dir, recursive, 0, &out);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });
  return out;
}

LastCommit LastCommitFor(const fs::path& repo_dir, const std::string& commit, const std::string& path) {
  RepoSettings s = LoadSettings(repo_dir);
  auto info = [&](const std::string& id) {
    LastCommit lc;
    lc.id = id;
    if (s.commits.contains(id)) {
      lc.title = s.commits[id].value("title", "");
      lc.date = s.commits[id].value("date", "");
    }
    if (lc.date.empty()) lc.date = NowIso8601();
    return lc;
  };
  auto target_of = [&](const std::string& c) -> std::string {
    std::error_code ec;
    fs::path p = repo_dir / "snapshots" / c / path;
    if (fs::is_symlink(p, ec)) return fs::read_symlink(p, ec).filename().string();
    if (fs::exists(p, ec)) return "#plain";
    return "";
  };
  std::string cur = commit;
  std::string blob = target_of(cur);
  for (int i = 0; i < 10000 && !blob.empty(); ++i) {
    if (!s.commits.contains(cur)) break;
    std::string parent = s.commits[cur].value("parent", "");
    if (parent.empty() || target_of(parent) != blob) break;
    cur = parent;
  }
  return info(cur);
}

Status InstallBlob(const fs::path& repo_dir, const fs::path& tmp_file, const std::string& name) {
  std::error_code ec;
  fs::create_directories(repo_dir / "blobs", ec);
  fs::path dst = repo_dir / "blobs" / name;
  if (fs::exists(dst, ec)) {
    fs::remove(tmp_file, ec);
    return Status::Ok();
  }
  fs::rename(tmp_file, dst, ec);
  if (ec) {
    fs::remove(tmp_file, ec);
    return Status(Code::kIOError, "cannot install blob " + dst.string() + ": " + ec.message());
  }
  return Status::Ok();
}

namespace {

// Writes an added file into blobs/, returns the blob name.
Result<std::string> Ingest(const fs::path& repo_dir, const Op& op, const CommitOptions& o) {
  std::error_code ec;
  fs::create_directories(repo_dir / "blobs", ec);
  if (ec) return Status(Code::kIOError, "cannot create " + (repo_dir / "blobs").string() + ": " + ec.message());
  fs::path tmp = repo_dir / "blobs" / (".incoming-" + RandomHex(8));
  if (!op.local_file.empty()) {
    fs::copy_file(op.local_file, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      ErrorContext c;
      c.file = op.local_file;
      return Status(Code::kIOError, "cannot read " + op.local_file + ": " + ec.message(), "", c);
    }
  } else {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(op.content.data(), static_cast<std::streamsize>(op.content.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return Status(Code::kIOError, "cannot write blob for " + op.path);
    }
  }
  std::string sha256, sha1;
  uint64_t size = 0;
  if (!HashFile(tmp, &sha256, &sha1, &size)) {
    fs::remove(tmp, ec);
    return Status(Code::kIOError, "cannot hash blob for " + op.path);
  }
  bool lfs = op.lfs.has_value() ? *op.lfs : IsLfsPath(op.path, size, o.lfs_threshold_bytes, o.lfs_by_extension);
  std::string name = lfs ? sha256 : sha1;
  HUBLOAD_RETURN_IF_ERROR(InstallBlob(repo_dir, tmp, name));
  return name;
}

// Reads a snapshot as {path -> blob name}; plain files are ingested as blobs.
Result<std::map<std::string, std::string>> ReadTree(const fs::path& repo_dir, const std::string& commit,
                                                    const CommitOptions& o) {
  std::map<std::string, std::string> tree;
  fs::path snap = repo_dir / "snapshots" / commit;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snap, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code ec2;
    if (it->is_directory(ec2) && !it->is_symlink(ec2)) continue;
    std::string rel = it->path().lexically_relative(snap).generic_string();
    if (it->is_symlink(ec2)) {
      fs::path target = fs::read_symlink(it->path(), ec2);
      std::string name = target.filename().string();
      if (target.parent_path().filename() == "blobs" && (IsHex(name, 40, 40) || IsHex(name, 64, 64)) &&
          fs::exists(repo_dir / "blobs" / name, ec2)) {
        tree[rel] = name;
        continue;
      }
    }
    if (it->is_regular_file(ec2)) {
      Op op;
      op.path = rel;
      op.local_file = it->path().string();
      HUBLOAD_ASSIGN_OR_RETURN(std::string name, Ingest(repo_dir, op, o));
      tree[rel] = name;
    }
  }
  if (ec) return Status(Code::kIOError, "cannot read snapshot " + snap.string() + ": " + ec.message());
  return tree;
}

}  // namespace

Result<std::string> Commit(const fs::path& root, const std::string& repo_id, const std::vector<Op>& ops,
                           const CommitOptions& o, bool create_repo) {
  ErrorContext ctx;
  ctx.repo_id = repo_id;
  ctx.revision = o.branch;
  if (!IsValidRepoType(o.repo_type))
    return Status(Code::kInvalidArgument, "invalid repo type '" + o.repo_type + "' (model|dataset|space)", "", ctx);
  if (!IsValidRepoId(repo_id)) return Status(Code::kInvalidArgument, "invalid repo_id '" + repo_id + "'", "", ctx);
  if (!IsSafeRefName(o.branch) || IsHex(o.branch, 40, 40))
    return Status(Code::kInvalidArgument, "invalid branch name '" + o.branch + "'", "", ctx);
  for (auto& op : ops)
    if (!IsSafeRepoPath(op.path))
      return Status(Code::kInvalidArgument,
                    "invalid path in repo '" + op.path + "' (must be relative, without '..' or empty segments)", "",
                    ctx);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return Status(Code::kInvalidArgument, "store root is not a folder: " + root.string());
  fs::path repo_dir = *RepoDir(root, o.repo_type, repo_id);

  std::lock_guard<std::mutex> lock(CommitMutex());
  if (!fs::is_directory(repo_dir, ec)) {
    if (!create_repo) return Status(Code::kRepoNotFound, "repository not found: " + repo_id, "RepoNotFound", ctx);
    fs::create_directories(repo_dir / "blobs", ec);
    fs::create_directories(repo_dir / "refs", ec);
    fs::create_directories(repo_dir / "snapshots", ec);
    if (ec) return Status(Code::kIOError, "cannot create " + repo_dir.string() + ": " + ec.message(), "", ctx);
  }
  fs::create_directories(repo_dir / "snapshots", ec);
  std::optional<std::string> head;
  if (fs::exists(repo_dir / "refs" / o.branch, ec)) {
    head = ResolveRevision(repo_dir, o.branch);
    if (!head) return Status(Code::kIOError, "ref " + o.branch + " of " + repo_id + " is corrupt", "", ctx);
  }
  if (!o.parent_commit.empty()) {
    std::string pc = o.parent_commit;
    if (!IsHex(pc, 7, 40)) return Status(Code::kInvalidArgument, "parent_commit is not 7-40 hex: " + pc, "", ctx);
    if (!head || head->compare(0, pc.size(), pc) != 0)
      return Status(Code::kConflict,
                    "parent_commit " + pc + " is not the head of " + o.branch + " (head " + (head ? *head : "none") +
                        ")",
                    "ParentMismatch", ctx);
  }
  std::string base;
  if (!o.base_commit.empty()) {
    auto b = ResolveRevision(repo_dir, o.base_commit);
    if (!b) return Status(Code::kRevisionNotFound, "base commit not found: " + o.base_commit, "RevisionNotFound", ctx);
    base = *b;
  } else if (head) {
    base = *head;
  }
  std::map<std::string, std::string> tree;
  if (!base.empty()) {
    HUBLOAD_ASSIGN_OR_RETURN(tree, ReadTree(repo_dir, base, o));
  }
  for (auto& op : ops) {
    ctx.file = op.path;
    if (op.kind == CommitOperation::Kind::kDelete) {
      if (!tree.erase(op.path))
        return Status(Code::kEntryNotFound, "cannot delete " + op.path + ": not in " + repo_id, "EntryNotFound", ctx);
    } else if (op.kind == CommitOperation::Kind::kDeleteFolder) {
      std::string prefix = op.path + "/";
      size_t n = 0;
      for (auto it = tree.lower_bound(prefix); it != tree.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
        it = tree.erase(it);
        ++n;
      }
      if (n == 0)
        return Status(Code::kEntryNotFound, "cannot delete folder " + op.path + ": not in " + repo_id,
                      "EntryNotFound", ctx);
    } else {
      std::string name;
      if (!op.existing_blob.empty()) {
        if (!fs::exists(repo_dir / "blobs" / op.existing_blob, ec))
          return Status(Code::kNotFound, "object " + op.existing_blob + " for " + op.path + " was never uploaded",
                        "", ctx);
        name = op.existing_blob;
      } else {
        HUBLOAD_ASSIGN_OR_RETURN(name, Ingest(repo_dir, op, o));
      }
      tree[op.path] = name;
    }
  }
  ctx.file.clear();
  // A path may not be both a file and a folder.
  for (auto it = tree.begin(); it != tree.end(); ++it) {
    auto next = std::next(it);
    if (next != tree.end() && next->first.size() > it->first.size() &&
        next->first.compare(0, it->first.size(), it->first) == 0 && next->first[it->first.size()] == '/')
      return Status(Code::kInvalidArgument, "'" + it->first + "' would be both a file and a folder", "", ctx);
  }
  std::string manifest = "parent " + base + "\nmessage " + o.message + "\n" + o.description + "\n";
  for (auto& [p, b] : tree) manifest += p + '\0' + b + "\n";
  manifest += "nonce " + NowIso8601() + RandomHex(8);
  std::string commit = Sha1Hex(manifest);

  fs::path tmp = repo_dir / "snapshots" / (".tmp-" + commit);
  fs::remove_all(tmp, ec);
  for (auto& [p, b] : tree) {
    fs::path link = tmp / p;
    fs::create_directories(link.parent_path(), ec);
    size_t depth = std::count(p.begin(), p.end(), '/');
    std::string target = "../../";
    for (size_t i = 0; i < depth; ++i) target += "../";
    target += "blobs/" + b;
    fs::create_symlink(target, link, ec);
    if (ec) {
      fs::remove_all(tmp, ec);
      return Status(Code::kIOError, "cannot create snapshot link " + link.string(), "", ctx);
    }
  }
  fs::create_directories(tmp, ec);
  fs::rename(tmp, repo_dir / "snapshots" / commit, ec);
  if (ec) {
    std::error_code ec2;
    fs::remove_all(tmp, ec2);
    return Status(Code::kIOError, "cannot publish snapshot " + commit + ": " + ec.message(), "", ctx);
  }
  RepoSettings s = LoadSettings(repo_dir);
  if (s.created_at.empty()) s.created_at = NowIso8601();
  s.commits[commit] = {{"parent", base}, {"title", o.message}, {"date", NowIso8601()}};
  HUBLOAD_RETURN_IF_ERROR(SaveSettings(repo_dir, s));
  fs::path ref = repo_dir / "refs" / o.branch;
  fs::create_directories(ref.parent_path(), ec);
  HUBLOAD_RETURN_IF_ERROR(WriteAtomic(ref, commit));
  return commit;
}

}  // namespace internal

namespace fs = std::filesystem;

std::string RepoFolderName(const std::string& repo_type, const std::string& repo_id) {
  if (!internal::IsValidRepoType(repo_type) || !internal::IsValidRepoId(repo_id)) return {};
  std::string name = repo_type + "s";
  size_t start = 0;
  while (true) {
    size_t end = repo_id.find('/', start);
    name += "--" + repo_id.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return name;
}

std::string GitBlobSha1(const std::string& content) {
  std::string hdr = "blob " + std::to_string(content.size());
  hdr.push_back('\0');
  return internal::Sha1Hex(hdr + content);
}

namespace {

Status ApplyAccess(const fs::path& repo_dir, const RepoAccess& a) {
  internal::RepoSettings s = internal::LoadSettings(repo_dir);
  s.private_repo = a.private_repo;
  s.gated = (a.gated == "false") ? "" : a.gated;
  s.read_sha256.clear();
  s.gated_sha256.clear();
  for (auto& t : a.read_tokens) s.read_sha256.push_back(internal::Sha256Hex(t));
  for (auto& t : a.gated_tokens) s.gated_sha256.push_back(internal::Sha256Hex(t));
  if (s.created_at.empty()) s.created_at = internal::NowIso8601();
  return internal::SaveSettings(repo_dir, s);
}

Result<std::string> CreateFromOps(const std::string& root, const std::string& repo_id,
                                  const std::vector<internal::Op>& ops, const CreateRepoOptions& o) {
  if (o.gated != "" && o.gated != "false" && o.gated != "auto" && o.gated != "manual")
    return Status(Code::kInvalidArgument, "gated must be auto or manual, got '" + o.gated + "'");
  auto dir = internal::RepoDir(root, o.repo_type, repo_id);
  if (!dir) return Status(Code::kInvalidArgument, "invalid repo_id '" + repo_id + "' or repo type '" + o.repo_type + "'");
  std::error_code ec;
  if (fs::exists(*dir, ec) && o.fail_if_exists)
    return Status(Code::kConflict, "repository already exists: " + repo_id);
  // Remove everything the folder does not contain: the commit tree is exactly `ops`.
  CommitOptions co;
  co.repo_type = o.repo_type;
  co.branch = o.branch;
  co.message = o.commit_message;
  co.lfs_threshold_bytes = o.lfs_threshold_bytes;
  co.lfs_by_extension = o.lfs_by_extension;
  std::vector<internal::Op> all = ops;
  if (fs::exists(*dir, ec)) {
    auto head = internal::ResolveRevision(*dir, o.branch);
    if (head) {
      auto listing = internal::List(root, *dir, *head, "", true);
      if (listing.ok()) {
        std::set<std::string> keep;
        for (auto& op : ops) keep.insert(op.path);
        for (auto& e : *listing)
          if (!e.is_dir && !keep.count(e.path)) {
            internal::Op d;
            d.kind = CommitOperation::Kind::kDelete;
            d.path = e.path;
            all.push_back(d);
          }
      }
    }
  }
  HUBLOAD_ASSIGN_OR_RETURN(std::string commit, internal::Commit(root, repo_id, all, co, true));
  RepoAccess a;
  a.private_repo = o.private_repo;
  a.gated = o.gated;
  a.read_tokens = o.read_tokens;
  a.gated_tokens = o.gated_tokens;
  HUBLOAD_RETURN_IF_ERROR(ApplyAccess(*dir, a));
  return commit;
}

}  // namespace

Result<std::string> CreateRepoFromFolder(const std::string& root, const std::string& repo_id,
                                         const std::string& folder, const CreateRepoOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return Status(Code::kInvalidArgument, "not a folder: " + folder);
  std::vector<internal::Op> ops;
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename() == ".git" && it->is_directory()) {
      it.disable_recursion_pending();
      continue;
    }
    std::error_code ec2;
    if (!it->is_regular_file(ec2)) continue;
    internal::Op op;
    op.path = it->path().lexically_relative(folder).generic_string();
    op.local_file = it->path().string();
    ops.push_back(op);
  }
  if (ec) return Status(Code::kIOError, "cannot list " + folder + ": " + ec.message());
  return CreateFromOps(root, repo_id, ops, o);
}

Result<std::string> CreateRepoFromFiles(const std::string& root, const std::string& repo_id,
                                        const std::map<std::string, std::string>& files, const CreateRepoOptions& o) {
  std::vector<internal::Op> ops;
  for (auto& [p, c] : files) {
    internal::Op op;
    op.path = p;
    op.content = c;
    ops.push_back(op);
  }
  return CreateFromOps(root, repo_id, ops, o);
}

Result<std::string> CommitFiles(const std::string& root, const std::string& repo_id,
                                const std::vector<CommitOperation>& ops, const CommitOptions& options) {
  std::vector<internal::Op> iops;
  for (auto& op : ops) {
    internal::Op o;
    o.kind = op.kind;
    o.path = op.path;
    o.content = op.content;
    o.local_file = op.local_file;
    o.lfs = op.lfs;
    iops.push_back(o);
  }
  return internal::Commit(root, repo_id, iops, options, false);
}

Result<std::string> ReplaceFile(const std::string& root, const std::string& repo_id, const std::string& path,
                                const std::string& content, const CommitOptions& options) {
  CommitOperation op;
  op.path = path;
  op.content = content;
  CommitOptions o = options;
  if (o.message == "Update files") o.message = "Update " + path;
  return CommitFiles(root, repo_id, {op}, o);
}

Status SetRef(const std::string& root, const std::string& repo_id, const std::string& ref_name,
              const std::string& commit, const std::string& repo_type) {
  auto dir = internal::RepoDir(root, repo_type, repo_id);
  if (!dir) return Status(Code::kInvalidArgument, "invalid repo_id '" + repo_id + "'");
  std::error_code ec;
  if (!fs::is_directory(*dir, ec)) return Status(Code::kRepoNotFound, "repository not found: " + repo_id, "RepoNotFound");
  if (!internal::IsSafeRefName(ref_name)) return Status(Code::kInvalidArgument, "invalid ref name '" + ref_name + "'");
  if (!internal::IsHex(commit, 40, 40) || !fs::is_directory(*dir / "snapshots" / commit, ec))
    return Status(Code::kRevisionNotFound, "commit " + commit + " not in " + repo_id, "RevisionNotFound");
  fs::path ref = *dir / "refs" / ref_name;
  fs::create_directories(ref.parent_path(), ec);
  return internal::WriteAtomic(ref, commit);
}

Status SetRepoAccess(const std::string& root, const std::string& repo_id, const RepoAccess& access,
                     const std::string& repo_type) {
  auto dir = internal::RepoDir(root, repo_type, repo_id);
  if (!dir) return Status(Code::kInvalidArgument, "invalid repo_id '" + repo_id + "'");
  std::error_code ec;
  if (!fs::is_directory(*dir, ec)) return Status(Code::kRepoNotFound, "repository not found: " + repo_id, "RepoNotFound");
  return ApplyAccess(*dir, access);
}

}  // namespace hubload::server
