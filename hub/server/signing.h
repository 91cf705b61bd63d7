// Signed URLs of the CDN listener and of the upload actions: an HMAC-SHA256
// over (path, expiry, nonce) with a per-process random key, so a URL is valid
// without Authorization and only until its expiry (B44).
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace hubload::server::internal {

class Signer {
 public:
  /// Draws the key (OpenSSL RAND_bytes). ok() is false when that failed.
  Signer();
  bool ok() const { return !key_.empty(); }

  /// "?exp=<unix seconds>&n=<nonce>&sig=<64 hex>" for `path` (raw, as it
  /// will be requested), valid for `ttl_s` seconds from now; every call gives
  /// a different URL (the nonce), as a CDN's signed URLs are.
  std::string Query(const std::string& path, int ttl_s) const;

  enum class Verdict { kOk, kBad, kExpired };
  /// Checks the exp/sig query parameters of a request to `raw_path`.
  Verdict Check(const std::string& raw_path, const std::multimap<std::string, std::string>& query) const;

 private:
  std::string Sign(const std::string& path, int64_t exp, const std::string& nonce) const;
  std::string key_;
};

}  // namespace hubload::server::internal
