// hubload/config.h: where hubload talks to, where it caches and how long it
// waits for the Hub, resolved the way huggingface_hub resolves them
// (huggingface_hub/constants.py).
//
// The library core never reads the environment on its own; callers that want
// huggingface_hub's behaviour call HubConfig::FromEnvironment() explicitly
// (the CLI does). Thread safety: plain value type.
#pragma once

#include <string>
#include <vector>

namespace hubload {

/// Default Hub endpoint when neither an option nor $HF_ENDPOINT is given.
inline constexpr const char* kDefaultEndpoint = "https://huggingface.co";

struct HubConfig {
  /// Base URL of the Hub, without a trailing slash. Default kDefaultEndpoint.
  std::string endpoint = kDefaultEndpoint;
  /// Bearer token, or empty for anonymous access. Never logged or printed.
  std::string token;
  /// Cache root holding models--org--name/ folders.
  std::string cache_dir;
  /// True when no network request may be made ($HF_HUB_OFFLINE=1).
  bool offline = false;
  /// Limit of one metadata request (HEAD, revision, tree page), seconds
  /// (huggingface_hub HF_HUB_ETAG_TIMEOUT, default 10). A Hub that does not
  /// answer within it counts as unreachable (cache fallback, see HubClient).
  double etag_timeout_s = 10;
  /// A download that receives no byte for this many seconds is stalled
  /// (Code::kNetwork "Stalled", then resumed with Range up to
  /// ClientOptions::max_resume_attempts times); huggingface_hub
  /// HF_HUB_DOWNLOAD_TIMEOUT, default 10.
  double download_timeout_s = 10;
  /// Filled by FromEnvironment: one message per variable whose value it could
  /// not use, naming the variable and the rule (e.g. "HF_HUB_ETAG_TIMEOUT='abc'
  /// is not a positive number of seconds"); that field keeps its default.
  /// huggingface_hub refuses such values at import; the CLI exits 2.
  std::vector<std::string> environment_errors;

  /// Resolves every field as huggingface_hub does:
  ///  - endpoint: $HF_ENDPOINT, else https://huggingface.co (trailing '/' removed);
  ///  - token: $HF_TOKEN, else the file $HF_TOKEN_PATH, else $HF_HOME/token
  ///    (whitespace trimmed; empty when absent);
  ///  - cache_dir: $HF_HUB_CACHE, else $HF_HOME/hub, where $HF_HOME defaults to
  ///    $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface;
  ///  - offline: $HF_HUB_OFFLINE is one of 1/ON/YES/TRUE (case-insensitive);
  ///  - etag_timeout_s: $HF_HUB_ETAG_TIMEOUT, download_timeout_s:
  ///    $HF_HUB_DOWNLOAD_TIMEOUT (seconds, > 0 and <= 1e6, fractions allowed).
  /// Never fails: missing variables and unreadable token files fall back;
  /// unusable timeout values keep the default and are listed in
  /// environment_errors.
  static HubConfig FromEnvironment();

  /// $HF_HOME resolved as above (no trailing '/').
  static std::string HfHome();
};

}  // namespace hubload
