#include "util/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "util/file_io.h"
#include "util/hex.h"

namespace hubload::util {

struct Digest::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  const EVP_MD* type = nullptr;
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Digest::Digest(Kind kind) : ctx_(std::make_unique<Ctx>()) {
  ctx_->type = kind == Kind::kSha1 ? EVP_sha1() : EVP_sha256();
  EVP_DigestInit_ex(ctx_->md, ctx_->type, nullptr);
}
Digest::~Digest() = default;
Digest::Digest(Digest&&) noexcept = default;
Digest& Digest::operator=(Digest&&) noexcept = default;
Digest::Digest(const Digest& other) : ctx_(std::make_unique<Ctx>()) {
  ctx_->type = other.ctx_->type;
  EVP_MD_CTX_copy_ex(ctx_->md, other.ctx_->md);
}
Digest& Digest::operator=(const Digest& other) {
  if (this != &other) {
    ctx_->type = other.ctx_->type;
    EVP_MD_CTX_copy_ex(ctx_->md, other.ctx_->md);
  }
  return *this;
}

void Digest::Update(const void* data, size_t n) {
  if (n > 0) EVP_DigestUpdate(ctx_->md, data, n);
}

std::string Digest::HexDigest() const {
  EVP_MD_CTX* c = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(c, ctx_->md);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(c, out, &len);
  EVP_MD_CTX_free(c);
  return Hex(out, len);
}

void Digest::Reset() { EVP_DigestInit_ex(ctx_->md, ctx_->type, nullptr); }

Digest GitBlobHasher(uint64_t size) {
  Digest d(Digest::Kind::kSha1);
  std::string header = "blob " + std::to_string(size);
  d.Update(header.data(), header.size() + 1);  // the NUL ends the header
  return d;
}

std::string Sha256Hex(std::string_view data) {
  Digest d(Digest::Kind::kSha256);
  d.Update(data);
  return d.HexDigest();
}

std::string Sha1Hex(std::string_view data) {
  Digest d(Digest::Kind::kSha1);
  d.Update(data);
  return d.HexDigest();
}

std::string GitBlobId(std::string_view content) {
  Digest d = GitBlobHasher(content.size());
  d.Update(content);
  return d.HexDigest();
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

namespace {
Status HashFile(const std::string& path, bool git, const HashedBytesCallback& on_block, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return IoError("cannot stat", path, e);
  }
  Digest d = git ? GitBlobHasher(static_cast<uint64_t>(st.st_size)) : Digest(Digest::Kind::kSha256);
  std::vector<char> buf(1 << 20);
  uint64_t hashed = 0;
  while (true) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      return IoError("cannot read", path, e);
    }
    if (r == 0) break;
    d.Update(buf.data(), static_cast<size_t>(r));
    hashed += static_cast<uint64_t>(r);
    if (on_block) on_block(hashed);
  }
  ::close(fd);
  *out = d.HexDigest();
  return Status::Ok();
}
}  // namespace

Result<std::string> Sha256File(const std::string& path, const HashedBytesCallback& on_block) {
  std::string out;
  HUBLOAD_RETURN_IF_ERROR(HashFile(path, false, on_block, &out));
  return out;
}

Result<std::string> GitBlobIdOfFile(const std::string& path, const HashedBytesCallback& on_block) {
  std::string out;
  HUBLOAD_RETURN_IF_ERROR(HashFile(path, true, on_block, &out));
  return out;
}

}  // namespace hubload::util
