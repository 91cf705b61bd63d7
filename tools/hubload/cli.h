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

namespace hubload::cli {

/// Global flags, resolved from the environment like huggingface_hub before parsing.
struct Global {
  HubConfig config;  // --endpoint, --token, --cache-dir (+ HF_HUB_OFFLINE)
};

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
