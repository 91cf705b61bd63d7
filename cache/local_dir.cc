// huggingface_hub local_dir metadata (cache/local_dir.h).
#include "cache/local_dir.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "hubload/cache.h"
#include "util/file_io.h"

namespace hubload::cache_internal {
namespace fs = std::filesystem;

std::string LocalDirMetaPath(const std::string& dir, const std::string& path) {
  return dir + "/.cache/huggingface/download/" + path + ".metadata";
}

std::string LocalDirPartialPath(const std::string& dir, const std::string& path, const std::string& etag,
                                bool ranged) {
  return dir + "/.cache/huggingface/download/" + path + "." + etag + (ranged ? ".ranges.incomplete" : ".incomplete");
}

std::optional<LocalDirMeta> ReadLocalDirMeta(const std::string& dir, const std::string& path) {
  std::string mp = LocalDirMetaPath(dir, path);
  auto text = util::ReadSmallFile(mp, 1 << 16);
  if (!text.ok()) {
    if (text.status().code() != Code::kNotFound)
      spdlog::warn("ignoring the local_dir metadata file {}: {}", mp, text.status().message());
    return std::nullopt;
  }
  // Three lines: commit, etag, timestamp (huggingface_hub read_download_metadata).
  std::string lines[3];
  size_t pos = 0;
  for (auto& line : lines) {
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos) nl = text->size();
    line = text->substr(pos, nl - pos);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    pos = std::min(text->size(), nl + 1);
  }
  LocalDirMeta m;
  m.commit = lines[0];
  m.etag = lines[1];
  char* end = nullptr;
  m.timestamp = std::strtod(lines[2].c_str(), &end);
  bool ts_ok = !lines[2].empty() && end && *end == '\0';
  if (!IsCommitHash(m.commit) || m.etag.empty() || m.etag.find('/') != std::string::npos || !ts_ok) {
    spdlog::warn("ignoring the corrupt local_dir metadata file {} (expected commit, etag and timestamp lines)", mp);
    return std::nullopt;
  }
  struct stat st;
  if (::stat((dir + "/" + path).c_str(), &st) != 0) return std::nullopt;
  if (static_cast<double>(st.st_mtime) > m.timestamp + 1) return std::nullopt;  // edited since
  return m;
}

Status WriteLocalDirMeta(const std::string& dir, const std::string& path, const std::string& commit,
                         const std::string& etag) {
  std::string base = dir + "/.cache/huggingface";
  std::error_code ec;
  if (!fs::exists(base + "/.gitignore", ec)) HUBLOAD_RETURN_IF_ERROR(util::AtomicWriteFile(base + "/.gitignore", "*"));
  HUBLOAD_RETURN_IF_ERROR(WriteCacheDirTag(base));
  double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return util::AtomicWriteFile(LocalDirMetaPath(dir, path), commit + "\n" + etag + "\n" + std::to_string(now) + "\n");
}

std::vector<std::pair<std::string, uint64_t>> ListLocalDirFiles(const std::string& dir) {
  std::vector<std::pair<std::string, uint64_t>> out;
  const fs::path root(dir);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(root).generic_string();
    std::error_code e2;
    if (it->is_directory(e2)) {
      if (rel == ".cache") it.disable_recursion_pending();  // the local_dir metadata (.cache/huggingface)
      continue;
    }
    const uintmax_t n = it->is_regular_file(e2) ? it->file_size(e2) : 0;
    out.emplace_back(rel, e2 ? 0 : static_cast<uint64_t>(n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hubload::cache_internal
