// Free-space preflight (cache/free_space.h).
#include "cache/free_space.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <filesystem>

#include "hubload/reasons.h"

namespace hubload::cache_internal {

Status CheckFreeSpace(const std::string& dir, int64_t size, const std::string& single_partial,
                      const std::string& ranged_partial, const ErrorContext& ctx) {
  struct stat st;
  int64_t have = 0;
  if (::stat(single_partial.c_str(), &st) == 0) have = st.st_size;
  if (::stat(ranged_partial.c_str(), &st) == 0)  // sparse: count allocated bytes
    have = std::max<int64_t>(have, std::min<int64_t>(static_cast<int64_t>(st.st_blocks) * 512, size));
  const int64_t need = size - have;
  if (need <= 0) return Status::Ok();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  struct statvfs sv;
  if (::statvfs(dir.c_str(), &sv) != 0) return Status::Ok();
  uint64_t avail = static_cast<uint64_t>(sv.f_bavail) * sv.f_frsize;
  if (avail >= static_cast<uint64_t>(need)) return Status::Ok();
  return Status(Code::kDiskFull,
                "not enough free space in " + dir + " for '" + ctx.file + "': needs " + std::to_string(need) +
                    " bytes, " + std::to_string(avail) + " available",
                reason::kInsufficientSpace, ctx);
}

}  // namespace hubload::cache_internal
