// HMAC-signed URLs (hub/server/signing.h).
#include "hub/server/signing.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <chrono>

#include "util/digest.h"
#include "util/file_io.h"
#include "util/hex.h"

namespace hubload::server::internal {
namespace {

int64_t NowUnix() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Signer::Signer() {
  std::string k(32, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(k.data()), static_cast<int>(k.size())) == 1) key_ = std::move(k);
}

std::string Signer::Sign(const std::string& path, int64_t exp, const std::string& nonce) const {
  return util::Hex(util::HmacSha256(key_, path + "\n" + std::to_string(exp) + "\n" + nonce));
}

std::string Signer::Query(const std::string& path, int ttl_s) const {
  int64_t exp = NowUnix() + ttl_s;
  std::string nonce = util::RandomSuffix();  // every URL handed out is a new one (byte budgets are per URL)
  return "?exp=" + std::to_string(exp) + "&n=" + nonce + "&sig=" + Sign(path, exp, nonce);
}

Signer::Verdict Signer::Check(const std::string& raw_path, const std::multimap<std::string, std::string>& query) const {
  auto get = [&](const char* k) {
    auto it = query.find(k);
    return it == query.end() ? std::string() : it->second;
  };
  std::string exp_s = get("exp"), sig = get("sig"), nonce = get("n");
  if (exp_s.empty() || sig.empty() || exp_s.size() > 18) return Verdict::kBad;
  for (char c : exp_s)
    if (c < '0' || c > '9') return Verdict::kBad;
  int64_t exp = std::stoll(exp_s);
  std::string want = Sign(raw_path, exp, nonce);
  if (want.size() != sig.size() || CRYPTO_memcmp(want.data(), sig.data(), want.size()) != 0) return Verdict::kBad;
  return exp < NowUnix() ? Verdict::kExpired : Verdict::kOk;
}

}  // namespace hubload::server::internal
