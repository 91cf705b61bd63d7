// `hf cache verify`: a folder against a tree listing (hubload/cache.h).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "cache/util.h"
#include "hubload/cache.h"
#include "cache/local_dir.h"
#include "hubload/reasons.h"
#include "util/digest.h"

namespace hubload {
namespace fs = std::filesystem;

Result<VerifyReport> VerifyFolder(const std::string& folder, const std::vector<ExpectedFile>& expected,
                                  const VerifyProgressCallback& on_progress) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    return Status(Code::kNotFound, "folder " + folder + " to verify does not exist", reason::kNotCached,
                  cache_internal::FileCtx(folder));
  VerifyReport rep;
  std::set<std::string> listed;
  VerifyProgress prog;
  prog.files_total = expected.size();
  for (const auto& e : expected) prog.bytes_total += e.size;
  // One listed file: sorted into `rep`; the hash reports its blocks through on_block.
  auto check = [&rep](const ExpectedFile& e, const std::string& local, const util::HashedBytesCallback& on_block) {
    struct stat st;
    if (::stat(local.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      rep.missing.push_back(e.path);
      return;
    }
    if (static_cast<uint64_t>(st.st_size) != e.size) {
      rep.mismatched.push_back(e.path + ": size " + std::to_string(st.st_size) + " bytes, the listing says " +
                               std::to_string(e.size));
      return;
    }
    const bool lfs = !e.lfs_sha256.empty();
    auto got = lfs ? util::Sha256File(local, on_block) : util::GitBlobIdOfFile(local, on_block);
    if (!got.ok()) {
      rep.missing.push_back(e.path);
      return;
    }
    const std::string& want = lfs ? e.lfs_sha256 : e.blob_id;
    if (want.empty()) {
      rep.verified.push_back(e.path);  // a listing without a hash: the size is all there is to check
    } else if (*got != want) {
      rep.mismatched.push_back(e.path + (lfs ? ": sha256 " : ": git blob sha1 ") + *got + ", expected " + want);
    } else {
      rep.verified.push_back(e.path);
    }
  };
  for (const auto& e : expected) {
    HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(e.path));
    listed.insert(e.path);
    prog.path = e.path;
    prog.file_bytes_total = e.size;
    prog.file_bytes_done = 0;
    const uint64_t before = prog.bytes_done;
    util::HashedBytesCallback on_block;
    if (on_progress)
      on_block = [&](uint64_t n) {
        prog.file_bytes_done = n;
        prog.bytes_done = before + n;
        on_progress(prog);
      };
    check(e, folder + "/" + e.path, on_block);
    // Each listed file ends with one call, whatever was found (absent files count as done).
    prog.file_bytes_done = e.size;
    prog.bytes_done = before + e.size;
    ++prog.files_done;
    if (on_progress) on_progress(prog);
  }
  for (const auto& [rel, size] : cache_internal::ListLocalDirFiles(folder))
    if (!listed.count(rel)) rep.extra.push_back(rel);
  for (auto* v : {&rep.verified, &rep.mismatched, &rep.missing, &rep.extra}) std::sort(v->begin(), v->end());
  return rep;
}

}  // namespace hubload
