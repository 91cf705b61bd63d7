// `hubload load PATH`: load a local checkpoint (file, index or folder resolved as
// loading-semantics.md section A) into LibTorch tensors and print a summary or
// the JSON report. Structure: parse args -> LoadRequest -> RunLoad -> print; the
// fetch-and-load pipeline can extend RunLoad for repo ids and reuse the printing
// (hubload::LoadReportJson / LoadSummaryText).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "hubload/torch_loader.h"
#include "tools/hubload/cli.h"

namespace {

struct LoadRequest {
  std::string path;
  hubload::ResolveOptions resolve;
  hubload::LoadOptions load;
  bool json = false;
};

struct LoadOutcome {
  hubload::Checkpoint checkpoint;
  std::vector<std::pair<std::string, double>> timings;
};

hubload::Result<LoadOutcome> RunLoad(const LoadRequest& req) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  LoadOutcome out;
  HUBLOAD_ASSIGN_OR_RETURN(out.checkpoint, hubload::LoadCheckpoint(req.path, req.resolve, req.load));
  auto t1 = Clock::now();
  out.timings.emplace_back("load_s", std::chrono::duration<double>(t1 - t0).count());
  return out;
}

int Print(const LoadRequest& req, LoadOutcome& out) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  for (const auto& w : out.checkpoint.warnings) std::fprintf(stderr, "hubload load: warning: %s\n", w.c_str());
  if (req.json) {
    // Summaries (sums, hashes) are part of the report; time them separately.
    auto j = hubload::LoadReportJson(out.checkpoint.files, out.checkpoint.tensors, {}, out.checkpoint.warnings);
    if (!j.ok()) return hubload::cli::Fail("load", j.status().ToString());
    out.timings.emplace_back("summarize_s", std::chrono::duration<double>(Clock::now() - t0).count());
    j = hubload::LoadReportJson(out.checkpoint.files, out.checkpoint.tensors, out.timings, out.checkpoint.warnings);
    if (!j.ok()) return hubload::cli::Fail("load", j.status().ToString());
    std::printf("%s\n", j->c_str());
  } else {
    std::fputs(hubload::LoadSummaryText(out.checkpoint.files, out.checkpoint.tensors, out.timings).c_str(), stdout);
  }
  return 0;
}

hubload::cli::Command reg{"load", [](CLI::App& app, hubload::cli::Global&) {
  auto* sub = app.add_subcommand("load", "Load a local checkpoint (file, index or folder) into LibTorch tensors");
  auto req = std::make_shared<LoadRequest>();
  auto dtype = std::make_shared<std::string>("auto");
  sub->add_option("path", req->path, "checkpoint folder, .safetensors file or .safetensors.index.json")->required();
  sub->add_option("--subfolder", req->resolve.subfolder, "folder inside PATH holding the model (e.g. unet)");
  sub->add_option("--variant", req->resolve.variant, "weights variant (e.g. fp16)");
  sub->add_option("--dtype", *dtype, "auto|fp32|fp16|bf16 for floating tensors")->capture_default_str();
  sub->add_option("--keep-in-fp32", req->load.keep_in_fp32,
                  "module name kept in fp32 (whole dot-component match); repeatable");
  sub->add_flag("--json", req->json, "print the JSON report (dtype, shape, sum, sha256 per tensor)");
  return [req, dtype]() -> int {
    auto d = hubload::ParseTargetDtype(*dtype);
    if (!d.ok()) return hubload::cli::Fail("load", d.status().message());
    req->load.dtype = *d;
    auto out = RunLoad(*req);
    if (!out.ok()) return hubload::cli::Fail("load", out.status().ToString());
    return Print(*req, *out);
  };
}};

}  // namespace
