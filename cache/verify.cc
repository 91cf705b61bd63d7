// `hf cache verify`: a folder against a tree listing (hubload/cache.h).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "cache/util.h"
#include "hubload/cache.h"
#include "util/digest.h"

namespace hubload {
namespace fs = std::filesystem;

Result<VerifyReport> VerifyFolder(const std::string& folder, const std::vector<ExpectedFile>& expected) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    return Status(Code::kNotFound, "folder " + folder + " to verify does not exist", "NotCached",
                  cache_internal::FileCtx(folder));
  VerifyReport rep;
  std::set<std::string> listed;
  for (const auto& e : expected) {
    HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(e.path));
    listed.insert(e.path);
    const std::string local = folder + "/" + e.path;
    struct stat st;
    if (::stat(local.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      rep.missing.push_back(e.path);
      continue;
    }
    if (static_cast<uint64_t>(st.st_size) != e.size) {
      rep.mismatched.push_back(e.path + ": size " + std::to_string(st.st_size) + " bytes, the listing says " +
                               std::to_string(e.size));
      continue;
    }
    const bool lfs = !e.lfs_sha256.empty();
    auto got = lfs ? util::Sha256File(local) : util::GitBlobIdOfFile(local);
    if (!got.ok()) {
      rep.missing.push_back(e.path);
      continue;
    }
    const std::string& want = lfs ? e.lfs_sha256 : e.blob_id;
    if (want.empty()) {
      rep.verified.push_back(e.path);  // a listing without a hash: the size is all there is to check
    } else if (*got != want) {
      rep.mismatched.push_back(e.path + (lfs ? ": sha256 " : ": git blob sha1 ") + *got + ", expected " + want);
    } else {
      rep.verified.push_back(e.path);
    }
  }
  const fs::path root(folder);
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    std::string rel = it->path().lexically_relative(root).generic_string();
    std::error_code e2;
    if (rel == ".cache" && it->is_directory(e2)) {
      it.disable_recursion_pending();  // local_dir metadata (.cache/huggingface)
      continue;
    }
    if (it->is_directory(e2)) continue;
    if (!listed.count(rel)) rep.extra.push_back(rel);
  }
  for (auto* v : {&rep.verified, &rep.mismatched, &rep.missing, &rep.extra}) std::sort(v->begin(), v->end());
  return rep;
}

}  // namespace hubload
