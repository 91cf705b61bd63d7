// The `hubload` CLI: one executable, subcommands registered from cmd_*.cc files.
//
// Each cmd_NAME.cc defines a static hubload::cli::Command registration:
//   static hubload::cli::Command reg{"inspect", [](CLI::App& app, hubload::cli::Global& g) {
//     auto* sub = app.add_subcommand("inspect", "...");
//     ...
//     return [=]() -> int { ... return exit_code; };
//   }};
// Exit codes: 0 success, 1 invalid input or failure (always < 128), 2 usage.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "hubload/config.h"
#include "hubload/hub.h"

namespace hubload::cli {

/// Global flags, resolved from the environment like huggingface_hub before parsing.
struct Global {
  HubConfig config;  // --endpoint, --token, --cache-dir (+ HF_HUB_OFFLINE)
  /// HF_HUB_ETAG_TIMEOUT / HF_HUB_DOWNLOAD_TIMEOUT (seconds, default 10).
  double etag_timeout_s = 10;
  double download_timeout_s = 10;
  /// HUBLOAD_LOCK_MODE (auto, flock, lease).
  FileLockOptions lock;

  /// Client options from the above (the one place the CLI maps them).
  ClientOptions Client() const {
    ClientOptions o;
    o.config = config;
    o.etag_timeout_s = etag_timeout_s;
    o.download_timeout_s = download_timeout_s;
    o.lock = lock;
    return o;
  }
};

/// Reads HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT and HUBLOAD_LOCK_MODE
/// into `g`. Returns an error message for a value that is not a positive
/// number of seconds or not auto/flock/lease (a usage error), else "".
std::string ReadEnvironment(Global* g);

/// Adds a subcommand to `app`; returns the action run when that subcommand is chosen.
using Setup = std::function<std::function<int()>(CLI::App& app, Global& g)>;

struct Command {
  Command(std::string name, Setup setup);
};

struct Registered {
  std::string name;
  Setup setup;
};
std::vector<Registered>& Registry();

/// Bytes as text with binary units: "512 B", "1.5 KiB", "3.0 GiB".
std::string HumanBytes(double bytes);

/// Prints "hubload NAME: message" on stderr (one line) and returns 1.
int Fail(const std::string& command, const std::string& message);

}  // namespace hubload::cli
