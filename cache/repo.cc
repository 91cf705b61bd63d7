// The repo vocabulary: types, ids, commit hashes, the path rule (hubload/repo.h).
#include "hubload/repo.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "cache/util.h"
#include "hubload/reasons.h"
#include "util/text.h"
#include "util/utf8.h"

namespace hubload {
namespace {

constexpr size_t kMaxPathBytes = 4096;   // Linux PATH_MAX
constexpr size_t kMaxSegmentBytes = 255;  // Linux NAME_MAX
// huggingface_hub _commit_api.FORBIDDEN_FOLDERS; compared exactly (case-sensitive).
constexpr std::string_view kForbiddenFolders[] = {".git", ".cache"};

}  // namespace

const char* RepoTypeName(RepoType t) {
  switch (t) {
    case RepoType::kModel: return "model";
    case RepoType::kDataset: return "dataset";
    case RepoType::kSpace: return "space";
  }
  return "model";
}

Result<RepoType> ParseRepoType(std::string_view s) {
  if (s == "model" || s == "models") return RepoType::kModel;
  if (s == "dataset" || s == "datasets") return RepoType::kDataset;
  if (s == "space" || s == "spaces") return RepoType::kSpace;
  return Status(Code::kInvalidArgument,
                "unknown repo type '" + std::string(s) + "': expected model, dataset or space", reason::kBadRepoType);
}

bool IsCommitHash(std::string_view s) {
  if (s.size() != 40) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Status ValidateRepoId(std::string_view repo_id) {
  auto bad = [&](const std::string& rule) {
    return Status(Code::kInvalidArgument, "invalid repo id '" + std::string(repo_id) + "': " + rule,
                  reason::kBadRepoId);
  };
  if (repo_id.empty()) return bad("empty");
  if (repo_id.size() > 96) return bad("longer than 96 characters");
  size_t slashes = std::count(repo_id.begin(), repo_id.end(), '/');
  if (slashes > 1) return bad("expected 'name' or 'namespace/name'");
  size_t start = 0;
  for (int i = 0; i <= static_cast<int>(slashes); ++i) {
    size_t end = repo_id.find('/', start);
    if (end == std::string_view::npos) end = repo_id.size();
    std::string_view seg = repo_id.substr(start, end - start);
    if (seg.empty()) return bad("empty segment");
    if (seg.find("..") != std::string_view::npos || seg.find("--") != std::string_view::npos)
      return bad("'..' and '--' are forbidden");
    if (seg.front() == '-' || seg.front() == '.' || seg.back() == '-' || seg.back() == '.')
      return bad("segments cannot start or end with '-' or '.'");
    for (char c : seg) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
        return bad("only letters, digits, '-', '_' and '.' are allowed");
    }
    start = end + 1;
  }
  if (repo_id.size() >= 4 && repo_id.substr(repo_id.size() - 4) == ".git") return bad("cannot end with '.git'");
  return Status::Ok();
}

Status ValidateRepoPath(std::string_view path) {
  const bool utf8 = util::IsValidUtf8(path);
  auto fail = [&](std::string_view why, const std::string& rule) {
    const std::string shown = util::Printable(path, 512);
    return Status(Code::kInvalidArgument, "unsafe file name '" + shown + "' in repo: " + rule, why,
                  cache_internal::FileCtx(shown));
  };
  auto bad = [&](const std::string& rule) { return fail(reason::kUnsafePath, rule); };
  if (path.empty()) return bad("empty name");
  if (!utf8) return bad("not valid UTF-8 (Hub paths are JSON strings)");
  if (path.size() > kMaxPathBytes) return bad("longer than " + std::to_string(kMaxPathBytes) + " bytes");
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return bad("control character");
    if (c == '\\') return bad("backslash (a Windows separator) is not allowed");
  }
  if (path.front() == '/') return bad("absolute path");
  if (path.size() >= 2 && std::isalpha(static_cast<unsigned char>(path[0])) && path[1] == ':')
    return bad("Windows drive path");
  std::string_view forbidden;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg.empty()) return bad("empty path segment");
    if (seg == "." || seg == "..") return bad("'.' or '..' segment");
    if (seg.size() > kMaxSegmentBytes)
      return bad("a segment longer than " + std::to_string(kMaxSegmentBytes) + " bytes");
    if (seg.size() >= 2 && seg[1] == ':') return bad("Windows drive path");
    for (std::string_view f : kForbiddenFolders)
      if (seg == f && forbidden.empty()) forbidden = f;
    start = end + 1;
  }
  if (!forbidden.empty())
    return fail(reason::kForbiddenFolder, "a '" + std::string(forbidden) +
                                              "' segment is forbidden (the Hub and huggingface_hub refuse "
                                              "'.git' and '.cache' folders in a repo)");
  return Status::Ok();
}

}  // namespace hubload
