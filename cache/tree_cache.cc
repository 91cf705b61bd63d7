// trees/<commit>.json and listings of snapshot folders (cache/tree_cache.h).
#include "cache/tree_cache.h"
#include "cache/util.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "util/file_io.h"
#include "util/json.h"
#include "hubload/reasons.h"

namespace hubload::cache_internal {
namespace fs = std::filesystem;

namespace {

void SortByPath(std::vector<TreeEntry>* v) {
  std::sort(v->begin(), v->end(), [](const TreeEntry& a, const TreeEntry& b) { return a.path < b.path; });
}

}  // namespace

Result<std::vector<TreeEntry>> ParseTreeCacheText(const std::string& text, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json j, util::ParseJson(text, doc));
  util::JsonIn root(j, doc);
  HUBLOAD_ASSIGN_OR_RETURN(util::JsonIn files, root.Object("files"));
  HUBLOAD_ASSIGN_OR_RETURN(auto members, files.Members());
  std::vector<TreeEntry> out;
  for (auto& [p, e] : members) {
    Status safe = ValidateRepoPath(p);
    if (!safe.ok()) return safe;
    TreeEntry f;
    f.path = p;
    HUBLOAD_ASSIGN_OR_RETURN(f.size, e.Uint("size"));
    HUBLOAD_ASSIGN_OR_RETURN(f.blob_id, e.StringOr("blob_id", ""));
    HUBLOAD_ASSIGN_OR_RETURN(auto lfs, e.OptString("lfs_sha256"));
    if (lfs) f.lfs_sha256 = *lfs;
    out.push_back(std::move(f));
  }
  SortByPath(&out);
  return out;
}

std::string TreeCachePath(const RepoCache& rc, const std::string& commit) {
  return rc.repo_dir() + "/trees/" + commit + ".json";
}

std::optional<std::vector<TreeEntry>> ReadTreeCache(const RepoCache& rc, const std::string& commit) {
  if (!IsCommitHash(commit)) return std::nullopt;
  std::string path = TreeCachePath(rc, commit);
  auto text = util::ReadSmallFile(path);
  if (!text.ok()) {
    if (text.status().code() != Code::kNotFound)
      spdlog::warn("ignoring the tree cache file {}: {}", path, text.status().message());
    return std::nullopt;
  }
  auto tree = ParseTreeCacheText(*text, path);
  if (!tree.ok()) {
    spdlog::warn("ignoring the corrupt tree cache file {} (it is written again when the tree is fetched): {}", path,
                 tree.status().message());
    return std::nullopt;
  }
  return std::move(*tree);
}

Status WriteTreeCache(const RepoCache& rc, const std::string& commit, const std::vector<TreeEntry>& files) {
  nlohmann::json out = nlohmann::json::object();
  for (auto& f : files) {
    nlohmann::json e = {{"size", f.size}, {"blob_id", f.blob_id}};
    if (!f.lfs_sha256.empty()) {
      e["lfs_sha256"] = f.lfs_sha256;
      e["lfs_size"] = f.size;
    }
    out[f.path] = std::move(e);
  }
  nlohmann::json doc = {{"format_version", 1}, {"files", std::move(out)}};
  return WriteCreatingCache(rc.cache_dir(), [&] { return util::AtomicWriteFile(TreeCachePath(rc, commit), util::DumpJson(doc)); });
}

Result<std::vector<TreeEntry>> ListSnapshotFolder(const RepoCache& rc, const std::string& commit) {
  std::error_code ec;
  fs::path dir = rc.SnapshotDir(commit);
  if (!fs::is_directory(dir, ec))
    return Status(Code::kNotFound, "no snapshot folder " + dir.string(), reason::kNotFound);
  std::vector<TreeEntry> out;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::error_code e2;
    if (it->is_directory(e2)) continue;
    TreeEntry f;
    f.path = it->path().lexically_relative(dir).generic_string();
    f.size = it->file_size(e2);
    if (e2) continue;  // dangling pointer: not cached
    std::string blob = fs::read_symlink(it->path(), e2).filename().string();
    if (blob.size() == 64) f.lfs_sha256 = blob;
    else f.blob_id = blob;
    out.push_back(std::move(f));
  }
  SortByPath(&out);
  return out;
}

}  // namespace hubload::cache_internal
