#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tools/hubload/cli.h"

namespace hubload::cli {

std::vector<Registered>& Registry() {
  static std::vector<Registered> r;
  return r;
}

Command::Command(std::string name, Setup setup) {
  Registry().push_back({std::move(name), std::move(setup)});
}

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (b >= 1024 && i < 4) {
    b /= 1024;
    ++i;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f %s" : "%.1f %s", b, units[i]);
  return buf;
}

std::string ReadEnvironment(Global* g) {
  auto seconds = [](const char* name, double* out) -> std::string {
    const char* v = std::getenv(name);
    if (!v || !*v) return {};
    char* end = nullptr;
    double x = std::strtod(v, &end);
    if (!end || *end != '\0' || !(x > 0) || x > 1e6)
      return std::string(name) + "='" + v + "' is not a positive number of seconds";
    *out = x;
    return {};
  };
  if (auto e = seconds("HF_HUB_ETAG_TIMEOUT", &g->etag_timeout_s); !e.empty()) return e;
  if (auto e = seconds("HF_HUB_DOWNLOAD_TIMEOUT", &g->download_timeout_s); !e.empty()) return e;
  if (const char* m = std::getenv("HUBLOAD_LOCK_MODE"); m && *m) {
    std::string v = m;
    if (v == "auto") g->lock.mode = LockMode::kAuto;
    else if (v == "flock") g->lock.mode = LockMode::kFlock;
    else if (v == "lease") g->lock.mode = LockMode::kLease;
    else return "HUBLOAD_LOCK_MODE='" + v + "' is not one of auto, flock, lease";
  }
  return {};
}

int Fail(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "hubload %s: %s\n", command.c_str(), message.c_str());
  return 1;
}

}  // namespace hubload::cli

int main(int argc, char** argv) {
  using namespace hubload::cli;
  // A file-size limit (ulimit -f) must give EFBIG errors naming the file, not kill the process.
  std::signal(SIGXFSZ, SIG_IGN);
  // Warnings and logs go to stderr: stdout carries results (paths, --json), as `hf download` does.
  spdlog::set_default_logger(spdlog::stderr_color_mt("hubload"));
  CLI::App app{"hubload: fetch models from the Hugging Face Hub and load them"};
  app.require_subcommand(1);
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
  for (auto& r : Registry()) {
    size_t before = app.get_subcommands({}).size();
    auto action = r.setup(app, g);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) actions[subs.back()] = std::move(action);
  }
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
  if (distributed) {
    bool rewritten = false;
    for (auto& a : args) {
      if (a == "download" || a == "load") {
        a += "-distributed";
        rewritten = true;
        break;
      }
    }
    if (!rewritten) {
      std::fprintf(stderr, "hubload: --distributed applies to the download and load subcommands only\n");
      return 2;
    }
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
