// Store names, hashing and the LFS rule (store_internal.h).
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <vector>

#include "hub/server/store_internal.h"
#include "util/digest.h"
#include "util/hex.h"

namespace hubload::server::internal {
namespace {

const char* kLfsExtensions[] = {".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".onnx", ".msgpack",
                                ".gguf", ".npy", ".npz", ".pkl", ".pickle", ".parquet", ".arrow", ".zip",
                                ".tar", ".gz", ".tgz", ".model", ".ot", ".tflite", ".joblib"};

}  // namespace

std::mutex& CommitMutex() {
  static std::mutex mu;
  return mu;
}

bool IsHexOf(std::string_view s, size_t min_len, size_t max_len) {
  return s.size() >= min_len && s.size() <= max_len && util::IsLowerHex(s);
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

bool HashFile(const fs::path& p, std::string* sha256, std::string* git_sha1, uint64_t* size) {
  std::error_code ec;
  uint64_t n = fs::file_size(p, ec);
  if (ec) return false;
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (!f) return false;
  util::Digest d256(util::Digest::Kind::kSha256);
  util::Digest d1 = util::GitBlobHasher(n);
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  size_t got;
  while ((got = std::fread(buf.data(), 1, buf.size(), f)) > 0) {
    if (sha256) d256.Update(buf.data(), got);
    if (git_sha1) d1.Update(buf.data(), got);
    total += got;
  }
  bool ok = !std::ferror(f) && total == n;
  std::fclose(f);
  if (sha256) *sha256 = d256.HexDigest();
  if (git_sha1) *git_sha1 = d1.HexDigest();
  if (size) *size = total;
  return ok;
}

// The one path rule (hubload/repo.h): structure and the .git/.cache folders.
bool IsSafeRepoPath(const std::string& path) { return ValidateRepoPath(path).ok(); }

bool IsCommittablePath(const std::string& path) { return IsSafeRepoPath(path); }

std::string RefNameSafetyProblem(const std::string& ref) {
  if (auto st = ValidateRepoPath(ref); !st.ok()) {  // "unsafe file name '...' in repo: RULE": the rule
    const std::string& m = st.message();
    const size_t at = m.find(" in repo: ");
    return at == std::string::npos ? m : m.substr(at + 10);
  }
  // A ref is a file under refs/ written through a temporary sibling
  // ("<name>.tmp<random>"): every segment leaves room for that suffix within
  // NAME_MAX (255), so a long name is a 400, not a failed write.
  constexpr size_t kMaxRefSegmentBytes = 200;
  for (size_t start = 0; start <= ref.size();) {
    size_t end = ref.find('/', start);
    if (end == std::string::npos) end = ref.size();
    if (end - start > kMaxRefSegmentBytes) return "a component is longer than 200 bytes";
    start = end + 1;
  }
  for (char c : ref)
    if (static_cast<unsigned char>(c) < 0x20 || c == ' ' || c == '~' || c == '^' || c == ':' || c == '?' ||
        c == '*' || c == '[' || c == 0x7f)
      return "no control character, space, '~', '^', ':', '?', '*' or '['";
  if (ref.find("..") != std::string::npos) return "no '..'";
  if (ref.find("@{") != std::string::npos) return "no '@{'";
  return "";
}

bool IsSafeRefName(const std::string& ref) { return RefNameSafetyProblem(ref).empty(); }

std::string NewRefNameProblem(const std::string& name) {
  if (std::string why = RefNameSafetyProblem(name); !why.empty()) return why;
  if (IsHexOf(name, 40, 40)) return "40 hex digits are read as a commit id";
  if (name == "HEAD") return "'HEAD' is reserved";
  if (std::string why = GitRefNameProblem(name); !why.empty()) return why + " (git check-ref-format)";
  return "";
}

std::string GitRefNameProblem(const std::string& ref) {
  if (ref == "@") return "the name '@' is reserved";
  if (!ref.empty() && ref[0] == '-') return "a name may not start with '-'";
  if (!ref.empty() && ref.back() == '.') return "a name may not end with '.'";
  for (size_t start = 0; start <= ref.size();) {
    size_t end = ref.find('/', start);
    if (end == std::string::npos) end = ref.size();
    std::string_view seg(ref.data() + start, end - start);
    if (!seg.empty() && seg[0] == '.') return "a component may not start with '.'";
    if (seg.size() >= 5 && seg.substr(seg.size() - 5) == ".lock") return "a component may not end with '.lock'";
    start = end + 1;
  }
  return "";
}

bool IsValidRepoId(const std::string& id) { return ValidateRepoId(id).ok(); }

const char* TypePrefix(RepoType type) {
  switch (type) {
    case RepoType::kDataset: return "datasets/";
    case RepoType::kSpace: return "spaces/";
    case RepoType::kModel: break;
  }
  return "";
}

bool IsLfsPath(const std::string& path, uint64_t size, uint64_t threshold, bool by_extension) {
  if (size == 0) return false;
  if (size >= threshold) return true;
  if (!by_extension) return false;
  for (const char* ext : kLfsExtensions) {
    std::string_view e = ext;
    if (path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

std::optional<fs::path> RepoDir(const fs::path& root, RepoType repo_type, const std::string& repo_id) {
  if (!IsValidRepoId(repo_id)) return std::nullopt;
  return root / RepoFolderName(repo_id, repo_type);
}

}  // namespace hubload::server::internal
