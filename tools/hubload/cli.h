// The `hubload` CLI: subcommands registered from cmd_*.cc files into two
// executables built from the same registration scheme (tools/hubload/CMakeLists.txt):
//   hubload        torch-free (download, push, cache, serve, store, inspect, ...);
//                  it lists every command in --help and execv()s hubload-torch,
//                  with the same argv, for a command it does not have (TorchCommands()).
//   hubload-torch  every command (libexec/hubload/ when installed, next to hubload in
//                  the build tree).
// A cmd_*.cc goes into both unless tools/hubload/CMakeLists.txt lists it in
// HUBLOAD_TORCH_CMDS (those may include LibTorch headers; the others must not).
//
// Each cmd_NAME.cc defines a static hubload::cli::Command registration:
//   static hubload::cli::Command reg{"inspect", [](CLI::App& app, hubload::cli::Global& g) {
//     auto* sub = app.add_subcommand("inspect", "...");
//     ...
//     return [=]() -> int { ... return exit_code; };
//   }};
// Exit codes: 0 success, 1 invalid input or failure (always < 128), 2 usage
// (unknown command, unknown option, a value refused by a ->check()).
//
// Global options --endpoint, --token, --cache-dir are accepted before or after
// the command name (CLI11 fallthrough, inherited by every subcommand); a
// subcommand that defines an option of the same name takes it for itself.
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
  /// --endpoint, --token, --cache-dir; HF_HUB_OFFLINE, HF_HUB_ETAG_TIMEOUT,
  /// HF_HUB_DOWNLOAD_TIMEOUT (HubConfig::FromEnvironment).
  HubConfig config;
  /// --cache-dir was on the command line (not only from the environment).
  bool cache_dir_given = false;
  /// HUBLOAD_LOCK_MODE (auto, flock, lease).
  FileLockOptions lock;

  /// Client options from the above (the one place the CLI maps them).
  ClientOptions Client() const {
    ClientOptions o;
    o.config = config;
    o.lock = lock;
    return o;
  }
};

/// The environment: g->config from HubConfig::FromEnvironment() (endpoint,
/// token, cache, offline, HF_HUB_ETAG_TIMEOUT, HF_HUB_DOWNLOAD_TIMEOUT) and
/// HUBLOAD_LOCK_MODE. Returns an error message for a value the library could
/// not use (HubConfig::environment_errors) or a lock mode that is not
/// auto/flock/lease (a usage error), else "".
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

/// CLI11 validators for `->check(...)`: a refused value is a usage error
/// (exit 2) printed as "--option: <message quoting the value>".
/// RepoTypeCheck: model|dataset|space (and plurals), as ParseRepoType (cache.h).
CLI::Validator RepoTypeCheck();
/// DtypeCheck: auto|fp32|fp16|bf16 and the torch_dtype spellings, as ParseTargetDtype (load.h).
CLI::Validator DtypeCheck();
/// SizeCheck: a byte size in the one size grammar (ParseMemorySize, size.h: 10GB, 10GiB, bytes).
CLI::Validator SizeCheck();
/// SizeToBytes: as SizeCheck, and rewrites the text to its byte count, for
/// `->transform(SizeToBytes())` on an integer option ("150MB" -> 150000000).
CLI::Validator SizeToBytes();
/// NonEmptyCheck: any text but "" (a revision, a name).
CLI::Validator NonEmptyCheck();
/// PositiveCheck: a whole number >= 1 (counts: workers, shards in flight, ...).
CLI::Validator PositiveCheck();
/// NonNegativeCheck: a whole number >= 0 (ports, ranks, byte counts where 0 means "none").
CLI::Validator NonNegativeCheck();

/// Rules main() applies to every option of every command (registered or not
/// in this file), so that a command does not have to repeat them: --repo-type
/// gets RepoTypeCheck, --dtype DtypeCheck, --revision NonEmptyCheck, and
/// --workers, --max-workers, --max-shards-in-flight PositiveCheck. A command may add stricter checks of its own.
void ApplyUniformChecks(CLI::App& app);

/// A command that only hubload-torch has, with the one-line help that both
/// executables show (the single source of that text).
struct TorchCommand {
  const char* name;
  const char* help;
};
/// Every command of hubload-torch that hubload hands over: load, reshard,
/// download-distributed, load-distributed.
const std::vector<TorchCommand>& TorchCommands();
/// The help line of TorchCommands() entry `name` ("" when not one).
const char* TorchCommandHelp(const std::string& name);
/// Replaces this process with hubload-torch (found next to /proc/self/exe,
/// then in HUBLOAD_TORCH_RELDIR, ../libexec/hubload/ when installed) run with
/// `argv` unchanged. Returns only on failure: prints one line naming the
/// `command` and every path looked at (or the execv errno) and returns 1.
int HandOverToTorch(const std::string& command, char** argv);

/// Bytes as text with binary units: "512 B", "1.5 KiB", "3.0 GiB".
std::string HumanBytes(double bytes);

/// Prints "hubload NAME: message" on stderr (one line) and returns 1.
int Fail(const std::string& command, const std::string& message);
/// The same for a usage error (an option value refused by its grammar, checked
/// after parsing): returns 2.
int UsageError(const std::string& command, const std::string& message);

/// The JSON error object a --json command prints for `st` (one line):
/// {"error": {"code", "reason", "message", and the ErrorContext fields that
/// are set: "repo_id", "revision", "file", "tensor", "url", "http_status",
/// "request_id", "error_code", "names" (the full list the message cuts)}}.
std::string ErrorJson(const Status& st);
/// Fail(command, st.ToString()); with `json` also prints ErrorJson(st) on
/// stdout, where a --json caller reads the report. Returns 1.
int FailStatus(const std::string& command, const Status& st, bool json);

}  // namespace hubload::cli
