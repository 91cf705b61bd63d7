// hubload/size.h: the one grammar of byte sizes, for every option that takes
// a size (--max-memory, --max-shard-size, SaveOptions::max_shard_size, fake
// GPU memory). Torch-free.
//
// Thread safety: pure function; call from any thread.
#pragma once

#include <cstdint>
#include <string_view>

#include "hubload/status.h"

namespace hubload {

/// Parses a byte size as accelerate's convert_file_size_to_int: "10GB" =
/// 10 * 10^9 bytes, "10GiB" = 10 * 2^30, units B/KB/MB/GB/TB and
/// KiB/MiB/GiB/TiB (case-insensitive prefix), decimals allowed ("1.5GB" =
/// 1,500,000,000; computed exactly, rounded down like accelerate's
/// int(float * unit)), a plain integer is bytes, spaces around the number and
/// unit are ignored. huggingface_hub's parse_size_to_int reads the same
/// decimal units the same way. Stricter than accelerate: a decimal unit ending
/// in a lowercase 'b' ("10Gb", "10gb", "100b"), which accelerate reads as
/// *bits*, is refused as ambiguous; exponents, signs, fractional bytes and
/// values >= 2^64 are refused. 0 is accepted (callers refuse it where it makes
/// no sense). Errors: kInvalidArgument (reason InvalidMemorySize) quoting the
/// text and listing the accepted units.
Result<uint64_t> ParseMemorySize(std::string_view text);

}  // namespace hubload
