// `hubload load REPO_ID|PATH`: resolve, fetch (for a Hub repo id) and load a
// checkpoint into LibTorch tensors through the fetch-and-load pipeline
// (hubload/pipeline.h), then print a summary or the JSON report. A local file,
// index or folder goes through the same pipeline without any network access.
// Structure: parse args -> PretrainedRequest -> RunLoad -> print
// (hubload::LoadReportJson / LoadSummaryText, torch_loader.h).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "hubload/hub.h"
#include "hubload/pipeline.h"
#include "hubload/torch_loader.h"
#include "tools/hubload/cli.h"

namespace {

struct LoadArgs {
  hubload::PretrainedRequest request;
  std::string dtype = "auto";
  std::string repo_type = "model";
  bool local = false;
  bool hub = false;
  bool json = false;
};

struct LoadOutcome {
  hubload::PretrainedStateDict loaded;
  std::vector<std::pair<std::string, double>> timings;
};

hubload::Result<LoadOutcome> RunLoad(const hubload::HubConfig& config, const LoadArgs& args) {
  hubload::ClientOptions co;
  co.config = config;
  hubload::HubClient client(co);
  LoadOutcome out;
  HUBLOAD_ASSIGN_OR_RETURN(out.loaded, hubload::LoadStateDict(client, args.request));
  const auto& t = out.loaded.info.timings;
  out.timings = {{"time_to_first_tensor_s", t.time_to_first_tensor_s},
                 {"download_s", t.download_s},
                 {"load_s", t.load_s},
                 {"total_s", t.total_s}};
  return out;
}

int Print(const LoadArgs& args, LoadOutcome& out) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  const auto& info = out.loaded.info;
  for (const auto& w : info.warnings) std::fprintf(stderr, "hubload load: warning: %s\n", w.c_str());
  if (args.json) {
    // Summaries (sums, hashes) are part of the report; time them separately.
    auto j = hubload::LoadReportJson(info.files, out.loaded.tensors, {}, info.warnings);
    if (!j.ok()) return hubload::cli::Fail("load", j.status().ToString());
    out.timings.emplace_back("summarize_s", std::chrono::duration<double>(Clock::now() - t0).count());
    j = hubload::LoadReportJson(info.files, out.loaded.tensors, out.timings, info.warnings);
    if (!j.ok()) return hubload::cli::Fail("load", j.status().ToString());
    std::printf("%s\n", j->c_str());
  } else {
    if (info.source == "hub")
      std::printf("%s@%s (commit %s)\n", info.repo_id.c_str(), args.request.revision.c_str(), info.commit.c_str());
    std::fputs(hubload::LoadSummaryText(info.files, out.loaded.tensors, out.timings).c_str(), stdout);
  }
  return 0;
}

hubload::cli::Command reg{"load", [](CLI::App& app, hubload::cli::Global& g) {
  auto* sub = app.add_subcommand(
      "load", "Load a model by Hub repo id (downloading into the cache, each shard loaded as it arrives) or from a "
              "local checkpoint (file, index or folder) into LibTorch tensors");
  auto a = std::make_shared<LoadArgs>();
  auto& r = a->request;
  sub->add_option("repo_id_or_path", r.repo_id,
                  "Hub repo id (org/name) or local checkpoint folder, .safetensors file or .safetensors.index.json "
                  "(an existing path wins)")
      ->required();
  sub->add_option("--revision", r.revision, "branch, tag, refs/pr/N or commit (Hub)")->capture_default_str();
  sub->add_option("--repo-type", a->repo_type, "model|dataset|space (Hub)")->capture_default_str();
  sub->add_option("--subfolder", r.subfolder, "folder holding the model (e.g. transformer, unet)");
  sub->add_option("--variant", r.variant, "weights variant (e.g. fp16)");
  sub->add_flag("--allow-variant-fallback", r.allow_variant_fallback,
                "load the non-variant weights (with a warning) when the variant is absent");
  sub->add_option("--dtype", a->dtype, "auto|fp32|fp16|bf16 for floating tensors")->capture_default_str();
  sub->add_option("--keep-in-fp32", r.load.keep_in_fp32,
                  "module name kept in fp32 (whole dot-component match); repeatable");
  sub->add_option("--device", r.device, "target device (only cpu is supported)")->capture_default_str();
  sub->add_option("--max-shards-in-flight", r.max_shards_in_flight,
                  "downloaded shards allowed to wait for the loader")->capture_default_str();
  auto* local = sub->add_flag("--local", a->local, "treat the argument as a local path");
  sub->add_flag("--hub", a->hub, "treat the argument as a Hub repo id")->excludes(local);
  sub->add_flag("--json", a->json,
                "print the JSON report (dtype, shape, sum, sha256 per tensor; timings incl. time_to_first_tensor_s, "
                "download_s, load_s, total_s)");
  return [a, &g]() -> int {
    auto d = hubload::ParseTargetDtype(a->dtype);
    if (!d.ok()) return hubload::cli::Fail("load", d.status().message());
    a->request.load.dtype = *d;
    auto rt = hubload::ParseRepoType(a->repo_type);
    if (!rt.ok()) return hubload::cli::Fail("load", rt.status().message());
    a->request.repo_type = *rt;
    if (a->local) a->request.source = hubload::PretrainedRequest::Source::kLocal;
    if (a->hub) a->request.source = hubload::PretrainedRequest::Source::kHub;
    auto out = RunLoad(g.config, *a);
    if (!out.ok()) return hubload::cli::Fail("load", out.status().ToString());
    return Print(*a, *out);
  };
}};

}  // namespace
