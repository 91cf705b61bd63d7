// main() of both CLI executables (tools/hubload/cli.h): `hubload` (torch-free;
// HUBLOAD_CLI_TORCH undefined) and `hubload-torch` (HUBLOAD_CLI_TORCH=1).
// Before CLI11 parses anything, the command word is found: an unknown one is
// a usage error naming it (exit 2); in `hubload`, a command of hubload-torch
// (cli::TorchCommands(), or download/load with --distributed) replaces the
// process with hubload-torch and the same argv, so LibTorch is mapped only by
// the commands that use it.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/hubload/cli.h"

namespace {

// Global options that take a value (they may come before the command name).
bool TakesValue(const std::string& a) { return a == "--endpoint" || a == "--token" || a == "--cache-dir"; }

// Index in `args` of the command name: the first argument that is neither an
// option nor the value of a global option; -1 when there is none.
int CommandIndex(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return -1;
    if (!a.empty() && a[0] == '-') {
      if (TakesValue(a)) ++i;
      continue;
    }
    return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hubload::cli;
  // A file-size limit (ulimit -f) must give EFBIG errors naming the file, not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);

  // `hubload download ... --distributed` and `hubload load ... --distributed`
  // are the job-wide variants (cmd_distributed.cc): rewrite them to
  // `download-distributed` / `load-distributed` before parsing.
  std::vector<std::string> args(argv + 1, argv + argc);
  bool distributed = false;
  for (auto it = args.begin(); it != args.end();) {
    if (*it == "--distributed") {
      distributed = true;
      it = args.erase(it);
    } else {
      ++it;
    }
  }
  const int cmd_at = CommandIndex(args);
  if (distributed) {
    if (cmd_at < 0 || (args[cmd_at] != "download" && args[cmd_at] != "load")) {
      std::fprintf(stderr, "hubload: --distributed applies to the download and load subcommands only\n");
      return 2;
    }
    args[cmd_at] += "-distributed";
  }
  const std::string command = cmd_at < 0 ? std::string() : args[cmd_at];
  const bool torch_command = !command.empty() && *TorchCommandHelp(command) != '\0';
#ifndef HUBLOAD_CLI_TORCH
  if (torch_command) return HandOverToTorch(command, argv);
#endif

  // Warnings and logs go to stderr: stdout carries results (paths, --json), as `hf download` does.
  spdlog::set_default_logger(spdlog::stderr_color_mt("hubload"));
  CLI::App app{"hubload: fetch models from the Hugging Face Hub and load them"};
  app.require_subcommand(1);
  // Global options also after the command name (inherited by every subcommand added below).
  app.fallthrough();
  app.set_version_flag("--version", std::string("hubload ") + HUBLOAD_VERSION);
  Global g;
  g.config = hubload::HubConfig::FromEnvironment();
  if (std::string bad = ReadEnvironment(&g); !bad.empty()) {
    std::fprintf(stderr, "hubload: %s\n", bad.c_str());
    return 2;
  }
  app.add_option("--endpoint", g.config.endpoint, "Hub endpoint (default $HF_ENDPOINT, else https://huggingface.co)");
  // The token's value is never echoed back by --help (no default shown).
  app.add_option("--token", g.config.token, "Hub token (default $HF_TOKEN, else the token file under $HF_HOME)");
  app.add_option("--cache-dir", g.config.cache_dir,
                 "cache folder (default $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub)")
      ->capture_default_str();

  std::map<CLI::App*, std::function<int()>> actions;
  std::set<std::string> names;
  for (auto& r : Registry()) {
    size_t before = app.get_subcommands({}).size();
    auto action = r.setup(app, g);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) {
      actions[subs.back()] = std::move(action);
      names.insert(subs.back()->get_name());
    }
  }
#ifndef HUBLOAD_CLI_TORCH
  // Listed in --help with hubload-torch's one-line help; never parsed here (handed over above).
  for (const auto& c : TorchCommands()) {
    app.add_subcommand(c.name, c.help)->allow_extras();
    names.insert(c.name);
  }
#else
  (void)torch_command;
#endif
  ApplyUniformChecks(app);
  if (!command.empty() && !names.count(command)) {
    std::fprintf(stderr, "hubload: unknown command '%s'; see hubload --help\n", command.c_str());
    return 2;
  }

  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  while (!g.config.endpoint.empty() && g.config.endpoint.back() == '/') g.config.endpoint.pop_back();
  for (auto& [sub, action] : actions) {
    if (sub->parsed()) return action();
  }
  return 2;
}
