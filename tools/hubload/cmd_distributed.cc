// `hubload download-distributed` and `hubload load-distributed`: the job-wide
// variants of `hubload download` / `hubload load` (hubload/distributed.h).
// The job position comes from the torchrun environment (MASTER_ADDR,
// MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK),
// with Slurm (SLURM_PROCID, ...) and Kubernetes indexed Job
// (JOB_COMPLETION_INDEX) fallbacks; --master-addr/--master-port/--rank/...
// override it. Every rank prints one line on stdout: the snapshot folder
// (download) or a JSON summary (load --json). Rank 0 draws the progress of its
// node's prefetch on stderr when it is a terminal (not with --quiet or
// HF_HUB_DISABLE_PROGRESS_BARS=1).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "hubload/distributed.h"
#include "hubload/hub.h"
#include "hubload/size.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"
#include "tools/hubload/progress_bar.h"

namespace {

namespace hd = hubload::distributed;

// Options shared by both subcommands (job position, timeouts, chunking).
struct JobFlags {
  std::string master_addr;
  int master_port = -1, rank = -1, world_size = -1, local_rank = -1, local_world_size = -1, node_rank = -1;
  double timeout_s = 600, heartbeat_timeout_s = 30;
  std::string chunk_bytes = "16MiB";  // a size (hubload/size.h)
  std::string assignment = "size";
  std::string revision = "main";
  std::string repo_type = "model";

  void Add(CLI::App* sub) {
    sub->add_option("--revision", revision, "branch, tag or commit")->capture_default_str();
    namespace cli = hubload::cli;
    sub->add_option("--repo-type", repo_type, "model, dataset or space")
        ->capture_default_str()
        ->check(cli::RepoTypeCheck());
    sub->add_option("--master-addr", master_addr, "rendezvous host (default $MASTER_ADDR)");
    sub->add_option("--master-port", master_port, "rendezvous port (default $MASTER_PORT)")
        ->check(CLI::Range(1, 65535));
    sub->add_option("--rank", rank, "this process's rank (default $RANK, $SLURM_PROCID, $JOB_COMPLETION_INDEX)")
        ->check(cli::NonNegativeCheck());
    sub->add_option("--world-size", world_size, "ranks in the job (default $WORLD_SIZE, $SLURM_NTASKS)")
        ->check(cli::PositiveCheck());
    sub->add_option("--local-rank", local_rank, "rank on this node (default $LOCAL_RANK, $SLURM_LOCALID, 0)")
        ->check(cli::NonNegativeCheck());
    sub->add_option("--local-world-size", local_world_size,
                    "ranks on this node (default $LOCAL_WORLD_SIZE, $SLURM_NTASKS_PER_NODE, 1)")
        ->check(cli::PositiveCheck());
    sub->add_option("--node-rank", node_rank, "node index (default $GROUP_RANK, $SLURM_NODEID, rank / local world size)")
        ->check(cli::NonNegativeCheck());
    sub->add_option("--timeout", timeout_s, "rendezvous / broadcast chunk / barrier timeout, seconds (> 0)")
        ->capture_default_str()
        ->check(CLI::Range(1e-3, 1e7));
    sub->add_option("--heartbeat-timeout", heartbeat_timeout_s,
                    "a rank silent this long is declared dead, seconds (> 0)")
        ->capture_default_str()
        ->check(CLI::Range(1e-3, 1e7));
    sub->add_option("--chunk-bytes", chunk_bytes, "bytes per broadcast chunk, 1KiB .. 1GiB (e.g. 16MiB, 4MB, 65536)")
        ->capture_default_str()
        ->check(cli::SizeCheck())
        ->check(CLI::Validator(
            [](std::string& v) -> std::string {
              auto n = hubload::ParseMemorySize(v);  // the range DistOptions::chunk_bytes allows
              return !n.ok() || (*n >= 1024 && *n <= (1ull << 30)) ? "" : "'" + v + "' is not within 1KiB .. 1GiB";
            },
            "SIZE", "ChunkBytes"));
    sub->add_option("--assign", assignment, "how files go to download ranks: size or round-robin")
        ->check(CLI::IsMember({"size", "round-robin"}))
        ->capture_default_str();
  }

  // The environment first, then the flags given explicitly.
  hubload::Result<hd::DistOptions> Resolve() const {
    hd::DistEnv env;
    bool all_flags = !master_addr.empty() && master_port > 0 && rank >= 0 && world_size > 0;
    if (!all_flags) {
      auto e = hd::EnvFromEnvironment();
      if (!e.ok()) return e.status();
      env = *e;
    }
    if (!master_addr.empty()) env.master_addr = master_addr;
    if (master_port > 0) {
      if (master_port > 65535)
        return hubload::Status(hubload::Code::kInvalidArgument, "--master-port must be 1..65535");
      env.master_port = static_cast<uint16_t>(master_port);
    }
    if (rank >= 0) env.rank = rank;
    if (world_size > 0) env.world_size = world_size;
    if (local_rank >= 0) env.local_rank = local_rank;
    if (local_world_size > 0) env.local_world_size = local_world_size;
    if (node_rank >= 0) env.node_rank = node_rank;
    HUBLOAD_RETURN_IF_ERROR(hd::Validate(env));
    hd::DistOptions o;
    o.env = env;
    o.timeout_s = timeout_s;
    o.heartbeat_timeout_s = heartbeat_timeout_s;
    HUBLOAD_ASSIGN_OR_RETURN(o.chunk_bytes, hubload::ParseMemorySize(chunk_bytes));
    o.assignment = assignment == "round-robin" ? hd::DistOptions::Assignment::kRoundRobin
                                               : hd::DistOptions::Assignment::kBySize;
    if (const char* f = std::getenv("HUBLOAD_DIST_FAULT_KILL_AFTER_CHUNKS")) o.fault_kill_after_chunks = std::atoll(f);
    if (const char* f = std::getenv("HUBLOAD_DIST_FAULT_SIGNAL"))
      o.fault_signal = std::string(f) == "STOP" ? SIGSTOP : SIGKILL;
    return o;
  }
};

hubload::ClientOptions MakeClient(const hubload::cli::Global& g) {
  return g.Client();  // g.config comes from HubConfig::FromEnvironment() (ReadEnvironment, main.cc)
}

// Progress (progress_bar.h) of this node's prefetch, drawn by rank 0 only (a
// node leader; the other ranks share its terminal under torchrun). Files and
// bytes of the job's transfer that rank 0's node cache holds.
std::shared_ptr<hubload::cli::ProgressBar> AttachProgress(hd::DistOptions* o, bool quiet) {
  if (o->env.rank != 0 || !hubload::cli::ProgressWanted(quiet)) return nullptr;
  auto bar = std::make_shared<hubload::cli::ProgressBar>();
  o->on_progress = [b = bar.get()](const hd::DistProgress& p) {
    const bool file_end = p.file_bytes_done >= p.file_bytes_total;
    b->Update(p.path, p.file_bytes_done, p.file_bytes_total, p.bytes_done, p.bytes_total,
              "files " + std::to_string(p.files_done) + "/" + std::to_string(p.files_total) + "  [rank 0]",
              file_end && (p.files_done == 1 || p.files_done == p.files_total));
  };
  return bar;
}

std::string Prefix(const hd::DistOptions& o) { return "[rank " + std::to_string(o.env.rank) + "] "; }

// A failed job may leave Gloo worker threads blocked on dead peers until their
// timeout: print the error and leave at once instead of running destructors.
[[noreturn]] void FailJob(const char* cmd, const hd::DistOptions& o, const hubload::Status& st) {
  hubload::cli::Fail(cmd, Prefix(o) + st.ToString());
  std::fflush(nullptr);
  std::_Exit(1);
}

hubload::cli::Command download_reg{
    "download-distributed", [](CLI::App& app, hubload::cli::Global& g) -> std::function<int()> {
      auto* sub = app.add_subcommand("download-distributed", hubload::cli::TorchCommandHelp("download-distributed"));
      auto repo_id = std::make_shared<std::string>();
      auto include = std::make_shared<std::vector<std::string>>();
      auto exclude = std::make_shared<std::vector<std::string>>();
      auto flags = std::make_shared<JobFlags>();
      auto quiet = std::make_shared<bool>(false);
      sub->add_option("repo_id", *repo_id, "repo id (org/name) or hf://[datasets/|spaces/]org/name[@rev]")
          ->required();
      sub->add_option("--include", *include, "glob patterns of files to fetch (fnmatch, as hf download)");
      sub->add_option("--exclude", *exclude, "glob patterns of files to skip");
      sub->add_flag("-q,--quiet", *quiet, "print only the snapshot folder (no progress, no summary line)");
      flags->Add(sub);
      return [&g, sub, repo_id, include, exclude, flags, quiet]() -> int {
        const char* cmd = "download-distributed";
        if (int rc = hubload::cli::ApplyRepoArg(cmd, repo_id.get(), &flags->repo_type,
                                                sub->get_option("--repo-type")->count() > 0, &flags->revision,
                                                sub->get_option("--revision")->count() > 0, nullptr);
            rc != 0)
          return rc;
        auto type = hubload::ParseRepoType(flags->repo_type);
        if (!type.ok()) return hubload::cli::Fail(cmd, type.status().ToString());
        auto opts = flags->Resolve();
        if (!opts.ok()) return hubload::cli::Fail(cmd, opts.status().ToString());
        hubload::HubClient client(MakeClient(g));
        hd::PrefetchRequest req;
        req.repo_id = *repo_id;
        req.revision = flags->revision;
        req.repo_type = *type;
        req.allow_patterns = *include;
        req.ignore_patterns = *exclude;
        auto bar = AttachProgress(&*opts, *quiet);
        auto r = hd::Prefetch(client, req, *opts);
        if (bar) bar->Finish();
        if (!r.ok()) FailJob(cmd, *opts, r.status());
        if (!*quiet) {
          std::fprintf(stderr, "%s%s: %zu files at %s; downloaded %llu bytes, sent %llu, received %llu\n",
                       Prefix(*opts).c_str(), opts->env.Describe().c_str(), r->files.size(), r->commit.c_str(),
                       static_cast<unsigned long long>(r->bytes_downloaded),
                       static_cast<unsigned long long>(r->bytes_sent),
                       static_cast<unsigned long long>(r->bytes_received));
        }
        std::printf("%s\n", r->snapshot_dir.c_str());
        return 0;
      };
    }};

hubload::cli::Command load_reg{
    "load-distributed", [](CLI::App& app, hubload::cli::Global& g) -> std::function<int()> {
      auto* sub = app.add_subcommand("load-distributed", hubload::cli::TorchCommandHelp("load-distributed"));
      auto repo_id = std::make_shared<std::string>();
      auto flags = std::make_shared<JobFlags>();
      auto subfolder = std::make_shared<std::string>();
      auto variant = std::make_shared<std::string>();
      auto dtype = std::make_shared<std::string>("auto");
      auto tensors = std::make_shared<std::string>();
      auto json_out = std::make_shared<std::string>();
      auto quiet = std::make_shared<bool>(false);
      auto lenient_index = std::make_shared<bool>(false);
      sub->add_option("repo_id", *repo_id, "repo id (org/name) or hf://[datasets/|spaces/]org/name[@rev][/subfolder]")
          ->required();
      sub->add_flag("-q,--quiet", *quiet, "no progress output");
      sub->add_flag("--lenient-index", *lenient_index,
                    "the index is the authority: tensors a shard holds that the index does not map to it are skipped "
                    "with a warning (default: an error naming them)");
      sub->add_option("--subfolder", *subfolder, "model folder inside the repo (e.g. unet)");
      sub->add_option("--variant", *variant, "weights variant (e.g. fp16)");
      sub->add_option("--dtype", *dtype, "auto, fp32, fp16 or bf16")->capture_default_str();
      sub->add_option("--tensors", *tensors,
                      "ECMAScript regex: this rank takes only the tensors whose name it matches (regex_search)")
          ->check(CLI::Validator(
              [](std::string& v) -> std::string {
                try {
                  std::regex re(v, std::regex::ECMAScript);
                  (void)re;
                  return {};
                } catch (const std::regex_error& e) {
                  return "'" + v + "' is not a valid regex: " + e.what();
                }
              },
              "REGEX", "Regex"));
      sub->add_option("--json", *json_out,
                      "write the load report (hubload load --json's schema, with this rank's tensors) to this file "
                      "('-' = stdout); '{rank}' in the name is replaced by the rank");
      flags->Add(sub);
      return [&g, sub, repo_id, flags, subfolder, variant, dtype, tensors, json_out, quiet, lenient_index]() -> int {
        const char* cmd = "load-distributed";
        if (int rc = hubload::cli::ApplyRepoArgAsSubfolder(
                cmd, repo_id.get(), &flags->repo_type, sub->get_option("--repo-type")->count() > 0, &flags->revision,
                sub->get_option("--revision")->count() > 0, subfolder.get(), sub->get_option("--subfolder")->count() > 0);
            rc != 0)
          return rc;
        auto type = hubload::ParseRepoType(flags->repo_type);
        if (!type.ok()) return hubload::cli::Fail(cmd, type.status().ToString());
        auto opts = flags->Resolve();
        if (!opts.ok()) return hubload::cli::Fail(cmd, opts.status().ToString());
        hd::LoadRequest req;
        req.repo_id = *repo_id;
        req.revision = flags->revision;
        req.repo_type = *type;
        req.resolve.subfolder = *subfolder;
        req.resolve.variant = *variant;
        auto td = hubload::ParseTargetDtype(*dtype);
        if (!td.ok()) return hubload::cli::Fail(cmd, td.status().ToString());
        req.load.dtype = *td;
        req.digests = true;
        req.lenient_index = *lenient_index;
        if (!tensors->empty()) {
          std::shared_ptr<std::regex> re;
          try {
            re = std::make_shared<std::regex>(*tensors, std::regex::ECMAScript);
          } catch (const std::regex_error& e) {
            return hubload::cli::UsageError(cmd, "--tensors '" + *tensors + "' is not a valid regex: " + e.what());  // checked above
          }
          req.filter = [re](const std::string& name) { return std::regex_search(name, *re); };
        }
        hubload::HubClient client(MakeClient(g));
        auto bar = AttachProgress(&*opts, *quiet);
        auto r = hd::Load(client, req, *opts, nullptr);
        if (bar) bar->Finish();
        if (!r.ok()) FailJob(cmd, *opts, r.status());
        const std::string report = hubload::LoadReportJson(r->info);
        std::fprintf(stderr, "%s%s: %llu tensors from %zu files\n", Prefix(*opts).c_str(),
                     opts->env.Describe().c_str(), static_cast<unsigned long long>(r->info.num_tensors),
                     r->info.load_order.size());
        if (json_out->empty()) return 0;
        if (*json_out == "-") {
          std::printf("%s\n", report.c_str());
          return 0;
        }
        std::string path = *json_out;
        for (size_t p; (p = path.find("{rank}")) != std::string::npos;)
          path.replace(p, 6, std::to_string(opts->env.rank));
        std::ofstream out(path, std::ios::binary | std::ios::trunc);
        out << report << "\n";
        if (!out) return hubload::cli::Fail(cmd, "cannot write " + path);
        return 0;
      };
    }};

}  // namespace
