// hubload/config.h: where hubload talks to and where it caches, resolved the
// way huggingface_hub resolves them (huggingface_hub/constants.py).
//
// The library core never reads the environment on its own; callers that want
// huggingface_hub's behaviour call HubConfig::FromEnvironment() explicitly
// (the CLI does). Thread safety: plain value type.
#pragma once

#include <string>

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

  /// Resolves every field as huggingface_hub does:
  ///  - endpoint: $HF_ENDPOINT, else https://huggingface.co (trailing '/' removed);
  ///  - token: $HF_TOKEN, else the file $HF_TOKEN_PATH, else $HF_HOME/token
  ///    (whitespace trimmed; empty when absent);
  ///  - cache_dir: $HF_HUB_CACHE, else $HF_HOME/hub, where $HF_HOME defaults to
  ///    $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface;
  ///  - offline: $HF_HUB_OFFLINE is one of 1/ON/YES/TRUE (case-insensitive).
  /// Never fails: missing variables and unreadable token files fall back.
  static HubConfig FromEnvironment();

  /// $HF_HOME resolved as above (no trailing '/').
  static std::string HfHome();
};

}  // namespace hubload
