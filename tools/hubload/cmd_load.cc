// `hubload load REPO_ID|PATH`: resolve, fetch (for a Hub repo id) and load a
// checkpoint into LibTorch tensors through the fetch-and-load pipeline
// (hubload/pipeline.h), then print a summary or the JSON report. A local file,
// index or folder goes through the same pipeline without any network access.
// Structure: parse args -> PretrainedRequest -> LoadStateDict -> print the
// library's report (hubload::LoadReportJson / LoadSummaryText, load.h).
//
// With --device other than cpu, --device-map, --plan-only or --device-backend,
// the device pipeline (hubload/device_pipeline.h) is used instead: headers
// first, a device_map plan, then the staging loader; the plan is printed as a
// table or, with --json, as the same report (every tensor's device and the
// sha256 of its bytes copied back from the device).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "hubload/device.h"
#include "hubload/device_pipeline.h"
#include "hubload/hub.h"
#include "hubload/pipeline.h"
#include "hubload/reasons.h"
#include "hubload/torch_loader.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/hf_uri.h"
#include "tools/hubload/progress_bar.h"
#include "util/log_capture.h"

namespace {

struct LoadArgs {
  hubload::PretrainedRequest request;
  std::string dtype = "auto";
  std::string repo_type = "model";
  bool local = false;
  bool hub = false;
  bool json = false;
  bool quiet = false;
  bool strict = false;
  // Device path.
  std::string device_map;
  std::string max_memory;
  std::vector<std::string> no_split;
  bool plan_only = false;
  std::string device_backend;  // "" (cuda when present), "cuda", "fake"
  int fake_gpus = 1;
  std::string fake_gpu_memory = "1GiB";
  /// Warnings the library already logged on stderr during the load (set by
  /// the action): the report's copy of them is not printed again.
  const hubload::util::WarningCapture* logged = nullptr;
  /// True when the device pipeline handles this load.
  bool UsesDevicePath() const {
    const std::string& d = request.device;
    return !(d.empty() || d == "cpu") || !device_map.empty() || plan_only || !device_backend.empty();
  }
};

// --strict: the index's metadata.total_size warning (safetensors::TotalSizeWarning, reason
// TotalSizeMismatch) fails the load, as `hubload inspect --strict`; other warnings stay warnings.
int StrictFailure(const LoadArgs& args, const hubload::PretrainedInfo& info) {
  if (!args.strict) return 0;
  for (const auto& w : info.warnings) {
    if (w.find(hubload::reason::kTotalSizeMismatch) == std::string::npos) continue;
    hubload::ErrorContext ctx;
    ctx.repo_id = info.source == "hub" ? info.repo_id : "";
    ctx.file = info.index_file;
    return hubload::cli::FailStatus(
        "load",
        hubload::Status(hubload::Code::kInvalidFormat, w + " (an error under --strict)",
                        std::string(hubload::reason::kTotalSizeMismatch), ctx),
        args.json);
  }
  return 0;
}

// The report's warnings on stderr, each once (the Hub-unreachable warning,
// for one, is logged by the client and also part of the report).
void PrintWarnings(const LoadArgs& args, const hubload::PretrainedInfo& info) {
  for (const auto& w : info.warnings)
    if (!args.logged || !args.logged->Has(w)) std::fprintf(stderr, "hubload load: warning: %s\n", w.c_str());
}

int Print(const LoadArgs& args, const hubload::PretrainedInfo& info) {
  if (int rc = StrictFailure(args, info)) return rc;
  PrintWarnings(args, info);
  if (args.json) {
    std::printf("%s\n", hubload::LoadReportJson(info).c_str());
    return 0;
  }
  if (info.source == "hub")
    std::printf("%s@%s (commit %s)\n", info.repo_id.c_str(), info.revision.c_str(), info.commit.c_str());
  hubload::PretrainedInfo shown = info;  // its warnings went to stderr above: each is printed once
  shown.warnings.clear();
  std::fputs(hubload::LoadSummaryText(shown).c_str(), stdout);
  return 0;
}

// Progress on stderr (hubload::cli::ProgressBar) fed by PretrainedRequest::progress.
std::shared_ptr<hubload::cli::ProgressBar> AttachProgress(hubload::PretrainedRequest* req, bool quiet) {
  if (!hubload::cli::ProgressWanted(quiet)) return nullptr;
  auto bar = std::make_shared<hubload::cli::ProgressBar>();
  req->progress = [bar](const hubload::LoadProgress& p) {
    bar->Update(p.file, p.file_bytes_done, p.file_bytes_total, p.bytes_downloaded, p.bytes_total,
                "shards " + std::to_string(p.shards_loaded) + "/" + std::to_string(p.shards_total), p.file.empty());
  };
  return bar;
}

int RunCpuLoad(const hubload::ClientOptions& co, const LoadArgs& args) {
  hubload::HubClient client(co);
  hubload::PretrainedRequest req = args.request;
  auto bar = AttachProgress(&req, args.quiet);
  auto loaded = hubload::LoadStateDict(client, req);
  if (bar) bar->Finish();
  if (!loaded.ok()) return hubload::cli::FailStatus("load", loaded.status(), args.json);
  return Print(args, loaded->info);
}

// ---------------------------------------------------------------------------
// Device path.

hubload::Result<hubload::DeviceLoadOptions> DeviceOptionsOf(const LoadArgs& a) {
  hubload::DeviceLoadOptions o;
  o.device = a.request.device;
  o.plan_only = a.plan_only;
  if (!a.device_map.empty()) {
    HUBLOAD_ASSIGN_OR_RETURN(hubload::DeviceMapOptions m, hubload::ParseDeviceMap(a.device_map));
    if (!a.max_memory.empty()) {
      HUBLOAD_ASSIGN_OR_RETURN(m.max_memory, hubload::ParseMaxMemory(a.max_memory));
    }
    m.no_split_modules = a.no_split;
    o.device_map = std::move(m);
  } else if (!a.max_memory.empty() || !a.no_split.empty()) {
    return hubload::Status(hubload::Code::kInvalidArgument,
                           "--max-memory and --no-split apply to --device-map (e.g. --device-map auto)", "Usage");
  }
  if (a.device_backend == "fake") {
    if (a.fake_gpus < 0)
      return hubload::Status(hubload::Code::kInvalidArgument, "--fake-gpus must be >= 0", "Usage");
    HUBLOAD_ASSIGN_OR_RETURN(uint64_t mem, hubload::ParseMemorySize(a.fake_gpu_memory));
    hubload::FakeDeviceOptions fo;
    fo.devices = a.fake_gpus;
    fo.memory_per_device = mem;
    o.backend = hubload::MakeFakeDeviceBackend(fo);
  } else if (a.device_backend == "cuda") {
    auto b = hubload::MakeCudaBackend();
    if (!b.ok())
      return b.status().WithPrefix("--device-backend cuda (use --plan-only to plan without a GPU, or "
                                   "--device-backend fake to test the path)");
    o.backend = *b;
  } else if (!a.device_backend.empty()) {
    return hubload::Status(hubload::Code::kInvalidArgument,
                           "--device-backend must be cuda or fake, got '" + a.device_backend + "'", "Usage");
  }
  return o;
}

int PrintDevice(const LoadArgs& args, const hubload::DeviceLoadResult& r) {
  const hubload::PretrainedInfo& info = r.info;
  if (args.json) return Print(args, info);
  if (int rc = StrictFailure(args, info)) return rc;
  PrintWarnings(args, info);
  const std::string strategy =
      args.device_map.empty() ? "device" : hubload::StrategyName(hubload::ParseDeviceMap(args.device_map)->strategy);
  if (info.source == "hub")
    std::printf("%s@%s (commit %s)\n", info.repo_id.c_str(), info.revision.c_str(), info.commit.c_str());
  size_t width = 6;
  for (const auto& [prefix, dev] : r.plan.device_map) width = std::max(width, prefix.size() + 2);
  std::printf("device_map (%s, backend %s):\n", strategy.c_str(), r.backend.empty() ? "none" : r.backend.c_str());
  std::printf("  %-*s %s\n", static_cast<int>(width), "PREFIX", "DEVICE");
  for (const auto& [prefix, dev] : r.plan.device_map)
    std::printf("  %-*s %s\n", static_cast<int>(width), prefix.empty() ? "\"\"" : prefix.c_str(),
                dev.ToString().c_str());
  std::printf("bytes per device:\n");
  // GPUs by ordinal, then cpu, then disk (the placement order).
  std::vector<std::pair<hubload::Device, uint64_t>> per_device;
  for (const auto& [dev, bytes] : r.plan.bytes_per_device) {
    auto d = hubload::Device::Parse(dev);
    if (d.ok()) per_device.emplace_back(*d, bytes);
  }
  std::sort(per_device.begin(), per_device.end(), [](const auto& x, const auto& y) {
    auto rank = [](const hubload::Device& d) {
      using K = hubload::Device::Kind;
      return d.kind == K::kCuda ? 0 : d.kind == K::kCpu ? 1 : 2;
    };
    return std::make_pair(rank(x.first), x.first.index) < std::make_pair(rank(y.first), y.first.index);
  });
  for (const auto& [d, bytes] : per_device)
    std::printf("  %-8s %s (%llu B)\n", d.ToString().c_str(),
                hubload::cli::HumanBytes(static_cast<double>(bytes)).c_str(),
                static_cast<unsigned long long>(bytes));
  if (args.plan_only) {
    std::printf("plan only: %zu tensors in %zu file(s), nothing downloaded or loaded\n", r.planned.size(),
                info.files.size());
  } else {
    const auto& ts = r.tensors.tensors();  // restored aliases share a loaded tensor: not counted
    const auto loaded = std::count_if(ts.begin(), ts.end(), [](const auto& t) { return t.alias_of.empty(); });
    std::printf("loaded %zu tensors from %zu file(s)%s in %.3f s (time to first shard %.3f s)\n",
                static_cast<size_t>(loaded), info.files.size(),
                r.disk_tensors.empty() ? "" : (", " + std::to_string(r.disk_tensors.size()) + " left on disk").c_str(),
                info.timings.total_s, info.timings.time_to_first_shard_s);
  }
  return 0;
}

int RunDeviceLoad(const hubload::ClientOptions& co, const LoadArgs& args) {
  auto opts = DeviceOptionsOf(args);
  if (!opts.ok()) return hubload::cli::FailStatus("load", opts.status(), args.json);
  hubload::HubClient client(co);
  hubload::PretrainedRequest req = args.request;
  auto bar = AttachProgress(&req, args.quiet || args.plan_only);
  auto r = hubload::FetchAndLoadToDevice(client, req, *opts);
  if (bar) bar->Finish();
  if (!r.ok()) return hubload::cli::FailStatus("load", r.status(), args.json);
  return PrintDevice(args, *r);
}

hubload::cli::Command reg{"load", [](CLI::App& app, hubload::cli::Global& g) {
  auto* sub = app.add_subcommand("load", hubload::cli::TorchCommandHelp("load"));
  auto a = std::make_shared<LoadArgs>();
  auto& r = a->request;
  sub->add_option("repo_id_or_path", r.repo_id,
                  "Hub repo id (org/name), hf://[datasets/|spaces/]org/name[@rev][/subfolder], or local checkpoint "
                  "folder, .safetensors file or .safetensors.index.json (an existing path wins over a repo id)")
      ->required();
  sub->add_option("--revision", r.revision, "branch, tag, refs/pr/N or commit (Hub)")->capture_default_str();
  sub->add_option("--repo-type", a->repo_type, "model|dataset|space (Hub)")
      ->capture_default_str()
      ->check(hubload::cli::RepoTypeCheck());
  sub->add_option("--subfolder", r.subfolder, "folder holding the model (e.g. transformer, unet)");
  sub->add_option("--variant", r.variant, "weights variant (e.g. fp16)");
  sub->add_flag("--allow-variant-fallback", r.allow_variant_fallback,
                "load the non-variant weights (with a warning) when the variant is absent");
  sub->add_flag("--lenient-index", r.lenient_index,
                "the index is the authority: tensors a shard holds that the index does not map to it are skipped "
                "with a warning (default: an error naming them)");
  sub->add_option("--dtype", a->dtype, "auto|fp32|fp16|bf16 for floating tensors")
      ->capture_default_str()
      ->check(hubload::cli::DtypeCheck());
  sub->add_option("--keep-in-fp32", r.load.keep_in_fp32,
                  "module name kept in fp32 (whole dot-component match); repeatable");
  sub->add_option("--device", r.device,
                  "target device: cpu (LibTorch tensors) or cuda / cuda:N (device memory through the staging loader)")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto d = hubload::Device::Parse(v);
            return d.ok() ? std::string() : d.status().message();
          },
          "cpu|cuda|cuda:N", "Device"));
  auto* device_map = sub->add_option("--device-map", a->device_map,
                  "place the model over several devices as accelerate does: auto, balanced, balanced_low_0, "
                  "sequential, or PREFIX=DEVICE,... (e.g. text_model=0,lm_head=cpu; =cuda:0 for everything)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto m = hubload::ParseDeviceMap(v);
            return m.ok() ? std::string() : m.status().message();
          },
          "STRATEGY|PREFIX=DEVICE,...", "DeviceMap"));
  sub->add_option("--max-memory", a->max_memory,
                  "bytes each device may take with --device-map, e.g. 0=10GB,1=10GB,cpu=30GB (GiB etc. allowed; "
                  "disk=SIZE allows leaving tensors in the cached file)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto m = hubload::ParseMaxMemory(v);  // sizes in the one grammar (hubload/size.h)
            return m.ok() ? std::string() : m.status().message();
          },
          "DEVICE=SIZE,...", "MaxMemory"))
      ->needs(device_map);
  sub->add_option("--no-split", a->no_split,
                  "module that must stay on one device with --device-map (dotted name, * for one segment, e.g. "
                  "model.layers.*); repeatable")
      ->needs(device_map);
  sub->add_flag("--plan-only", a->plan_only,
                "print the device placement computed from the shard headers and stop (nothing downloaded or "
                "loaded; works without a GPU)");
  sub->add_option("--device-backend", a->device_backend,
                  "cuda (default when available) or fake (testing aid: host memory posing as --fake-gpus GPUs, so "
                  "the whole device path runs on a CPU machine)")
      ->check(CLI::IsMember({"cuda", "fake"}));
  sub->add_option("--fake-gpus", a->fake_gpus, "number of GPUs of --device-backend fake")
      ->capture_default_str()
      ->check(hubload::cli::NonNegativeCheck());
  sub->add_option("--fake-gpu-memory", a->fake_gpu_memory, "memory of each fake GPU (e.g. 10GB)")
      ->capture_default_str()
      ->check(hubload::cli::SizeCheck());
  sub->add_option("--max-shards-in-flight", r.max_shards_in_flight,
                  "downloaded shards allowed to wait for the loader (>= 1)")
      ->capture_default_str()
      ->check(hubload::cli::PositiveCheck());
  auto* local = sub->add_flag("--local", a->local, "treat the argument as a local path");
  sub->add_flag("--hub", a->hub, "treat the argument as a Hub repo id")->excludes(local);
  sub->add_flag("--json", a->json,
                "print the JSON report (dtype, shape, sum, sha256 per tensor; timings incl. time_to_first_tensor_s, "
                "download_s, load_s, total_s; on the device path: device_map, bytes_per_device, and per tensor its "
                "device and the sha256 of its bytes copied back)");
  sub->add_flag("--strict", a->strict,
                "an index whose metadata.total_size differs from the tensors' bytes is an error (a warning without "
                "--strict), as hubload inspect --strict");
  sub->add_flag("-q,--quiet", a->quiet,
                "no progress on stderr (also when stderr is not a terminal or HF_HUB_DISABLE_PROGRESS_BARS=1)");
  return [a, sub, &g]() -> int {
    // hf://org/m[@rev][/subfolder]: a Hub repo (never a local path).
    if (hubload::cli::IsHfUri(a->request.repo_id)) {
      if (a->local) {
        std::fprintf(stderr, "hubload load: --local and the hf:// URI '%s' contradict\n", a->request.repo_id.c_str());
        return 2;
      }
      if (int rc = hubload::cli::ApplyRepoArgAsSubfolder(
              "load", &a->request.repo_id, &a->repo_type, sub->get_option("--repo-type")->count() > 0,
              &a->request.revision, sub->get_option("--revision")->count() > 0, &a->request.subfolder,
              sub->get_option("--subfolder")->count() > 0);
          rc != 0)
        return rc;
      a->hub = true;
    }
    auto d = hubload::ParseTargetDtype(a->dtype);
    if (!d.ok()) return hubload::cli::Fail("load", d.status().message());
    a->request.load.dtype = *d;
    a->request.digests = a->json;  // the report carries each tensor's sha256 (and sum)
    auto rt = hubload::ParseRepoType(a->repo_type);
    if (!rt.ok()) return hubload::cli::Fail("load", rt.status().message());
    a->request.repo_type = *rt;
    if (a->local) a->request.source = hubload::PretrainedRequest::Source::kLocal;
    if (a->hub) a->request.source = hubload::PretrainedRequest::Source::kHub;
    hubload::util::WarningCapture logged;
    a->logged = &logged;
    if (a->UsesDevicePath()) return RunDeviceLoad(g.Client(), *a);
    return RunCpuLoad(g.Client(), *a);  // --max-memory and --no-split need --device-map (CLI11 ->needs)
  };
}};

}  // namespace
