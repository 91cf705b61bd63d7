// The CLI's shared helpers (tools/hubload/cli.h): the command registry, the
// environment mapping, the option checks and the hand-over to hubload-torch.
// Torch-free: linked into both executables.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hubload/cache.h"
#include "hubload/load.h"
#include "util/text.h"
#include "hubload/size.h"
#include "tools/hubload/cli.h"
#include "util/json.h"

namespace hubload::cli {

std::vector<Registered>& Registry() {
  static std::vector<Registered> r;
  return r;
}

Command::Command(std::string name, Setup setup) {
  Registry().push_back({std::move(name), std::move(setup)});
}

std::string ReadEnvironment(Global* g) {
  g->config = HubConfig::FromEnvironment();
  if (!g->config.environment_errors.empty()) return g->config.environment_errors.front();
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
  // Each line fit for a terminal: a value the user or a server gave (an ESC
  // in a revision) is shown as \xNN, never acted on; very long ones are cut.
  std::string shown;
  size_t from = 0;
  for (size_t nl = message.find('\n'); ; nl = message.find('\n', from)) {
    const size_t end = nl == std::string::npos ? message.size() : nl;
    shown += util::Printable(std::string_view(message).substr(from, end - from), 2000);
    if (nl == std::string::npos) break;
    shown += '\n';
    from = nl + 1;
  }
  std::fprintf(stderr, "hubload %s: %s\n", command.c_str(), shown.c_str());
  return 1;
}

int UsageError(const std::string& command, const std::string& message) {
  Fail(command, message);
  return 2;
}

std::string ErrorJson(const Status& st) {
  nlohmann::ordered_json e;
  e["code"] = CodeName(st.code());
  e["reason"] = st.reason();
  e["message"] = st.message();
  const ErrorContext& c = st.context();
  auto put = [&](const char* k, const std::string& v) {
    if (!v.empty()) e[k] = v;
  };
  put("repo_id", c.repo_id);
  put("revision", c.revision);
  put("file", c.file);
  put("tensor", c.tensor);
  put("url", c.url);
  if (c.http_status != 0) e["http_status"] = c.http_status;
  put("request_id", c.request_id);
  put("error_code", c.error_code);
  if (!c.names.empty()) e["names"] = c.names;
  nlohmann::ordered_json j;
  j["error"] = std::move(e);
  return util::DumpJson(j);
}

int FailStatus(const std::string& command, const Status& st, bool json) {
  if (json) std::printf("%s\n", ErrorJson(st).c_str());
  return Fail(command, st.ToString());
}

// ---- option checks -------------------------------------------------------

namespace {
// A check refusing what `parse` refuses, with its message (which quotes the value).
template <typename Parse>
CLI::Validator FromParser(Parse parse, const char* desc, const char* name) {
  return CLI::Validator(
      [parse](std::string& v) -> std::string {
        auto r = parse(v);
        return r.ok() ? std::string() : r.status().message();
      },
      desc, name);
}
}  // namespace

CLI::Validator RepoTypeCheck() {
  return FromParser([](const std::string& v) { return ParseRepoType(v); }, "model|dataset|space", "RepoType");
}
CLI::Validator DtypeCheck() {
  return FromParser([](const std::string& v) { return ParseTargetDtype(v); }, "auto|fp32|fp16|bf16", "Dtype");
}
CLI::Validator SizeCheck() {
  return FromParser([](const std::string& v) { return ParseMemorySize(v); }, "SIZE", "Size");
}

CLI::Validator SizeToBytes() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        auto r = ParseMemorySize(v);
        if (!r.ok()) return r.status().message();
        v = std::to_string(*r);
        return {};
      },
      "SIZE", "SizeToBytes");
}
CLI::Validator NonEmptyCheck() {
  return CLI::Validator([](std::string& v) -> std::string { return v.empty() ? "'' (empty) is not allowed" : ""; },
                        "", "NonEmpty");
}

namespace {
// A whole decimal number >= `min` (min >= 0; up to 2^64-1; no sign, spaces or exponent).
CLI::Validator WholeNumberAtLeast(unsigned long long min, const char* name) {
  return CLI::Validator(
      [min](std::string& v) -> std::string {
        if (!v.empty() && v[0] == '-') return "'" + v + "' must be >= " + std::to_string(min);
        errno = 0;
        char* end = nullptr;
        unsigned long long x = v.empty() ? 0 : std::strtoull(v.c_str(), &end, 10);
        if (v.empty() || v[0] == '+' || v[0] == ' ' || !end || *end != '\0' || errno == ERANGE)
          return "'" + v + "' is not a whole number";
        if (x < min) return "'" + v + "' must be >= " + std::to_string(min);
        return {};
      },
      "", name);
}

void ApplyTo(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string& n = o->get_name();  // "--long" for a long option
    if (n == "--repo-type") o->check(RepoTypeCheck());
    else if (n == "--dtype") o->check(DtypeCheck());
    else if (n == "--revision" || n == "--local-dir" || n == "--cache-dir") o->check(NonEmptyCheck());
    else if (n == "--workers" || n == "--max-workers" || n == "--max-shards-in-flight") o->check(PositiveCheck());
  }
  for (CLI::App* sub : app.get_subcommands({})) ApplyTo(*sub);
}
}  // namespace

CLI::Validator PositiveCheck() { return WholeNumberAtLeast(1, "Positive"); }
CLI::Validator NonNegativeCheck() { return WholeNumberAtLeast(0, "NonNegative"); }

void ApplyUniformChecks(CLI::App& app) { ApplyTo(app); }

// ---- the hand-over to hubload-torch -----------------------------------------

const std::vector<TorchCommand>& TorchCommands() {
  static const std::vector<TorchCommand> commands = {
      {"load",
       "Load a model by Hub repo id (downloading into the cache, each shard loaded as it arrives) or from a local "
       "checkpoint (file, index or folder) into LibTorch tensors"},
      {"reshard", "Rewrite a checkpoint as safetensors shards (huggingface_hub split), every tensor byte as stored"},
      {"download-distributed",
       "snapshot download shared by a whole job: each file is fetched from the Hub once per job and broadcast to "
       "the other nodes' caches (run one process per rank, e.g. under torchrun, srun or a Kubernetes indexed Job)"},
      {"load-distributed",
       "load a model's weights on every rank of a job while one download per job feeds all nodes' caches"},
  };
  return commands;
}

const char* TorchCommandHelp(const std::string& name) {
  for (const auto& c : TorchCommands())
    if (name == c.name) return c.help;
  return "";
}

int HandOverToTorch(const std::string& command, char** argv) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  std::vector<fs::path> candidates;
  if (!ec) {
    candidates.push_back(self.parent_path() / "hubload-torch");
#ifdef HUBLOAD_TORCH_RELDIR
    candidates.push_back((self.parent_path() / HUBLOAD_TORCH_RELDIR / "hubload-torch").lexically_normal());
#endif
  }
  std::string looked;
  for (const auto& c : candidates) {
    if (!looked.empty()) looked += ", ";
    looked += c.string();
    if (::access(c.c_str(), X_OK) != 0) continue;
    std::fflush(nullptr);
    ::execv(c.c_str(), argv);
    int e = errno;
    std::fprintf(stderr, "hubload: '%s' needs hubload-torch (the LibTorch part of the CLI): execv %s: %s\n",
                 command.c_str(), c.c_str(), std::strerror(e));
    return 1;
  }
  std::fprintf(stderr,
               "hubload: '%s' needs hubload-torch (the LibTorch part of the CLI), not found (looked at %s)%s\n",
               command.c_str(), looked.empty() ? "nothing: /proc/self/exe unreadable" : looked.c_str(),
               ec ? "" : "; install it or build the hubload_cli_torch target");
  return 1;
}

}  // namespace hubload::cli
