// Private to cache/ and hub/: the free-space preflight of a download (B37).
// Thread safety: pure function (statvfs/stat).
#pragma once

#include <cstdint>
#include <string>

#include "hubload/status.h"

namespace hubload::cache_internal {

/// kDiskFull reason "InsufficientSpace" (message naming `dir`, the file of
/// `ctx`, the bytes needed and available) when the file system of `dir`
/// (created if missing) has fewer free bytes than `size` minus what the
/// partials already hold (`single_partial`: its length; `ranged_partial`: its
/// allocated blocks, it is sparse). OK when the size is unknown (< 0) or the
/// file system cannot say.
Status CheckFreeSpace(const std::string& dir, int64_t size, const std::string& single_partial,
                      const std::string& ranged_partial, const ErrorContext& ctx);

}  // namespace hubload::cache_internal
