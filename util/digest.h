// util/digest.h: streaming digests over OpenSSL EVP (SHA-NI where the CPU has
// it): sha256 (LFS oids, blob names), sha1 and the git blob id
// (sha1("blob <size>\0" + content), the oid of a regular file in the Hub's
// tree API), HMAC-SHA256 (signed URLs).
//
// Thread safety: a hasher is used by one thread at a time; the free functions
// are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "hubload/status.h"

namespace hubload::util {

/// A running digest. Copyable (the state is duplicated: a copy can be
/// finished while the original goes on, as the blob writers do to check a
/// prefix).
class Digest {
 public:
  enum class Kind { kSha256, kSha1 };
  explicit Digest(Kind kind = Kind::kSha256);
  ~Digest();
  Digest(const Digest& other);
  Digest& operator=(const Digest& other);
  Digest(Digest&&) noexcept;
  Digest& operator=(Digest&&) noexcept;

  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  /// Lower-case hex of the digest of everything given so far; the hasher
  /// itself is left unchanged (it finishes a copy).
  std::string HexDigest() const;
  /// Starts over with nothing hashed.
  void Reset();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

/// The git blob id of a file of `size` bytes: a sha1 started with the git
/// header "blob <size>\0"; feed exactly `size` content bytes.
Digest GitBlobHasher(uint64_t size);

std::string Sha256Hex(std::string_view data);
std::string Sha1Hex(std::string_view data);
/// git hash-object of `content` (huggingface_hub git_hash).
std::string GitBlobId(std::string_view content);
/// Raw 32-byte HMAC-SHA256 of `data` under `key`.
std::string HmacSha256(std::string_view key, std::string_view data);

/// Called after each block read by Sha256File / GitBlobIdOfFile with the
/// bytes of the file hashed so far (on the hashing thread).
using HashedBytesCallback = std::function<void(uint64_t bytes_hashed)>;
/// sha256 of a whole file (read in 1 MiB blocks). Errors: IoError's.
Result<std::string> Sha256File(const std::string& path, const HashedBytesCallback& on_block = {});
/// Git blob id of a whole file. Errors: IoError's.
Result<std::string> GitBlobIdOfFile(const std::string& path, const HashedBytesCallback& on_block = {});

}  // namespace hubload::util
