// main() of both CLI executables (tools/hubload/cli.h): `hubload` (torch-free;
// HUBLOAD_CLI_TORCH undefined) and `hubload-torch` (HUBLOAD_CLI_TORCH=1).
// Before CLI11 parses anything, the command word is found: an unknown one, an
// unknown option before it (a mistyped global option) or an unknown nested
// command word (`cache lss`) is a usage error naming it (exit 2); in `hubload`,
// a command of hubload-torch
// (cli::TorchCommands(), or download/load with --distributed) replaces the
// process with hubload-torch and the same argv, so LibTorch is mapped only by
// the commands that use it.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tools/hubload/cli.h"
#include "tools/hubload/guard.h"
#include "tools/hubload/progress_bar.h"

namespace {

// Global options that take a value (they may come before the command name).
bool TakesValue(const std::string& a) { return a == "--endpoint" || a == "--token" || a == "--cache-dir"; }

// Options allowed before the command name: the global ones, --version and --help.
bool IsLeadingOption(const std::string& a) {
  const std::string name = a.substr(0, a.find('='));
  return TakesValue(name) || a == "--version" || a == "--help" || a == "-h";
}

// Index in `args` of the command name: the first argument that is neither an
// option nor the value of a global option; -1 when there is none. An option
// before it that is not a global one (a typo such as --endpont) is returned
// in `*unknown`: its value would otherwise be taken for the command.
int CommandIndex(const std::vector<std::string>& args, std::string* unknown) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return -1;
    if (!a.empty() && a[0] == '-') {
      if (!IsLeadingOption(a) && unknown->empty()) *unknown = a.substr(0, a.find('='));
      if (TakesValue(a)) ++i;
      continue;
    }
    return static_cast<int>(i);
  }
  return -1;
}

// Commands that neither lock the cache nor talk to a Hub: a bad HF_HUB_*_TIMEOUT
// or HUBLOAD_LOCK_MODE is no usage error for them (nor for --version and --help).
bool IgnoresClientEnvironment(const std::string& command) {
  for (const char* c : {"inspect", "serve", "store", "env", "demo-model", "reshard"})
    if (command == c) return true;
  return false;
}

// For a command with subcommands (`cache`, `repo`, `repo branch`, ...): the
// first word after it that is not an option or an option's value must name one
// of them; returns the message naming the unknown word, else "".
std::string UnknownSubcommand(CLI::App& app, const std::vector<std::string>& args, int cmd_at) {
  CLI::App* cur = nullptr;
  for (CLI::App* s : app.get_subcommands({}))
    if (s->check_name(args[cmd_at])) cur = s;
  std::string path = args[cmd_at];
  for (size_t i = cmd_at + 1; cur && i < args.size(); ++i) {
    std::vector<CLI::App*> subs = cur->get_subcommands({});
    if (subs.empty()) break;
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-') {
      if (a.find('=') != std::string::npos) continue;
      const CLI::Option* o = cur->get_option_no_throw(a);
      if (!o) o = app.get_option_no_throw(a);
      if (o && o->get_items_expected_max() > 0) ++i;
      continue;
    }
    CLI::App* next = nullptr;
    std::string names;
    for (CLI::App* s : subs) {
      if (s->check_name(a)) next = s;
      names += (names.empty() ? "" : ", ") + s->get_name();
    }
    if (!next)
      return "unknown command '" + path + " " + a + "' (the commands of 'hubload " + path + "' are " + names +
             "); see hubload " + path + " --help";
    cur = next;
    path += " " + a;
  }
  return "";
}

// The parsed command path below `app` ("cache rm"; "" when none was parsed).
std::string CommandPath(const CLI::App& app, std::vector<const CLI::App*>* chain) {
  std::string path;
  const CLI::App* at = &app;
  chain->push_back(at);
  for (bool found = true; found;) {
    found = false;
    for (const CLI::App* sub : at->get_subcommands()) {
      path += (path.empty() ? "" : " ") + sub->get_name();
      chain->push_back(sub);
      at = sub;
      found = true;
      break;
    }
  }
  return path;
}

// A parse error as "hubload COMMAND: message" on stderr (exit 2). CLI11 2.1
// lists unexpected arguments reversed; they are listed here in the order given.
int UsageError(const CLI::App& app, const CLI::ParseError& e) {
  std::vector<const CLI::App*> chain;
  const std::string path = CommandPath(app, &chain);
  std::string message = e.what();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    for (const CLI::App* a : chain) {
      std::vector<std::string> extra = a->remaining(false);
      if (extra.empty()) continue;
      message = extra.size() > 1 ? "the following arguments were not expected:" : "this argument was not expected:";
      for (const auto& x : extra) message += " " + x;
      break;
    }
  }
  std::fprintf(stderr, "hubload%s%s: %s\nRun with --help for more information.\n", path.empty() ? "" : " ",
               path.c_str(), message.c_str());
  return 2;
}

// Every command's --help ends with the global options (they are accepted
// before or after the command name but belong to the top level in CLI11),
// less those the command defines itself (serve --token).
void AddGlobalsFooter(CLI::App& app, const std::vector<const CLI::Option*>& globals) {
  for (CLI::App* sub : app.get_subcommands({})) {
    std::string footer = "Global options (before or after the command name):";
    for (const CLI::Option* o : globals) {
      if (sub->get_option_no_throw(o->get_name()) != nullptr) continue;
      char line[512];
      std::snprintf(line, sizeof line, "\n  %-12s %s", o->get_name().c_str(), o->get_description().c_str());
      footer += line;
    }
    sub->footer(footer);
    AddGlobalsFooter(*sub, globals);
  }
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
  std::string unknown_option;
  const int cmd_at = CommandIndex(args, &unknown_option);
  if (!unknown_option.empty()) {
    std::fprintf(stderr, "hubload: unknown option '%s' before the command; see hubload --help\n",
                 unknown_option.c_str());
    return 2;
  }
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
  hubload::cli::InstallBarAwareLogger();  // library warnings print around the progress bar
  CLI::App app{"hubload: fetch models from the Hugging Face Hub and load them", "hubload"};
  app.require_subcommand(1);
  // Global options also after the command name (inherited by every subcommand added below).
  app.fallthrough();
  app.set_version_flag("--version", std::string("hubload ") + HUBLOAD_VERSION);
  Global g;
  const std::string bad_environment = ReadEnvironment(&g);  // a usage error once a command needs it (below)
  app.add_option("--endpoint", g.config.endpoint, "Hub endpoint (default $HF_ENDPOINT, else https://huggingface.co)");
  // The token's value is never echoed back by --help (no default shown).
  app.add_option("--token", g.config.token, "Hub token (default $HF_TOKEN, else the token file under $HF_HOME)");
  CLI::Option* cache_dir_opt = app.add_option("--cache-dir", g.config.cache_dir,
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
  if (!command.empty())
    if (std::string bad = UnknownSubcommand(app, args, cmd_at); !bad.empty()) {
      std::fprintf(stderr, "hubload: %s\n", bad.c_str());
      return 2;
    }

  AddGlobalsFooter(app, {app.get_option("--endpoint"), app.get_option("--token"), cache_dir_opt});

  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);  // --help, --version
    return UsageError(app, e);
  }
  if (!bad_environment.empty() && !IgnoresClientEnvironment(command)) {
    std::fprintf(stderr, "hubload: %s\n", bad_environment.c_str());
    return 2;
  }
  while (!g.config.endpoint.empty() && g.config.endpoint.back() == '/') g.config.endpoint.pop_back();
  g.cache_dir_given = cache_dir_opt->count() > 0;
  for (auto& [sub, action] : actions) {
    if (!sub->parsed()) continue;
    const int rc = RunGuarded(sub->get_name(), action);
    // stdout carries the result (a path, --json): a result that could not be
    // written (a full disk, a closed stdout) is a failure, as in coreutils.
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      const int e = errno;
      std::fprintf(stderr, "hubload %s: cannot write the result to standard output: %s\n", sub->get_name().c_str(),
                   e ? std::strerror(e) : "write error");
      return rc != 0 ? rc : 1;
    }
    return rc;
  }
  return 2;
}
