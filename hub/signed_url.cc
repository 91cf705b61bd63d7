// Renewable signed CDN URL (hub/signed_url.h).
#include "hub/signed_url.h"

#include <algorithm>

namespace hubload::hub_internal {

std::pair<std::string, uint64_t> SignedUrl::Current() const {
  std::lock_guard<std::mutex> l(mu_);
  return {url_, gen_};
}

Status SignedUrl::Renew(uint64_t gen) {
  // Held across the re-resolve on purpose: the other workers whose URL
  // expired at the same moment wait here for its result.
  std::lock_guard<std::mutex> l(mu_);
  if (gen != gen_) return Status::Ok();
  HUBLOAD_ASSIGN_OR_RETURN(std::string fresh, resolve_());
  url_ = std::move(fresh);
  ++gen_;
  return Status::Ok();
}

void SignedUrl::MarkProductive(uint64_t gen) {
  std::lock_guard<std::mutex> l(mu_);
  productive_ = std::max(productive_, static_cast<int64_t>(gen));
}

bool SignedUrl::Productive(uint64_t gen) const {
  std::lock_guard<std::mutex> l(mu_);
  return productive_ >= static_cast<int64_t>(gen);
}

uint64_t SignedUrl::renewals() const {
  std::lock_guard<std::mutex> l(mu_);
  return gen_;
}

}  // namespace hubload::hub_internal
