// `hubload reshard SRC OUT_DIR`: read a single-file or sharded checkpoint and
// write it sharded exactly as huggingface_hub's save_torch_state_dict does.
#include <cstdio>
#include <string>

#include "hubload/split.h"
#include "hubload/pipeline.h"
#include "hubload/torch_loader.h"
#include "tools/hubload/cli.h"

namespace {

hubload::cli::Command reg{"reshard", [](CLI::App& app, hubload::cli::Global&) {
  auto* sub = app.add_subcommand("reshard", "Rewrite a checkpoint as safetensors shards (huggingface_hub split)");
  struct Args {
    std::string src, out, max_shard_size = "10GB", variant, dtype = "auto", weights_name, src_variant, subfolder;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("src", a->src, "checkpoint folder, .safetensors file or .safetensors.index.json")->required();
  sub->add_option("out_dir", a->out, "output folder (created if needed)")->required();
  sub->add_option("--max-shard-size", a->max_shard_size, "decimal size (5GB = 5*10^9 bytes) or bytes")
      ->capture_default_str();
  sub->add_option("--variant", a->variant, "variant of the written files (e.g. fp16)");
  sub->add_option("--dtype", a->dtype, "auto|fp32|fp16|bf16 for floating tensors")->capture_default_str();
  sub->add_option("--weights-name", a->weights_name,
                  "file stem: model or diffusion_pytorch_model (default: the source's, else model)");
  sub->add_option("--src-variant", a->src_variant, "variant of the source weights");
  sub->add_option("--subfolder", a->subfolder, "folder inside SRC holding the model");
  return [a]() -> int {
    auto d = hubload::ParseTargetDtype(a->dtype);
    if (!d.ok()) return hubload::cli::Fail("reshard", d.status().message());
    auto max = hubload::ParseMaxShardSize(a->max_shard_size);
    if (!max.ok()) return hubload::cli::Fail("reshard", max.status().message());
    hubload::ResolveOptions ro;
    ro.variant = a->src_variant;
    ro.subfolder = a->subfolder;
    hubload::LoadOptions lo;
    lo.dtype = *d;
    // Zero-copy views are safe even when OUT_DIR == SRC: files are replaced by rename and
    // stale files unlinked, never truncated, so the mappings stay valid.
    auto ck = hubload::LoadCheckpoint(a->src, ro, lo);
    if (!ck.ok()) return hubload::cli::Fail("reshard", ck.status().ToString());
    for (const auto& w : ck->warnings) std::fprintf(stderr, "hubload reshard: warning: %s\n", w.c_str());
    hubload::SaveOptions so;
    so.max_shard_size = *max;
    so.variant = a->variant;
    so.weights_name = a->weights_name;
    if (so.weights_name.empty())
      so.weights_name = ck->resolved.weights_name == "diffusion_pytorch_model" ? "diffusion_pytorch_model" : "model";
    auto r = hubload::SaveSharded(ck->tensors, a->out, so);
    if (!r.ok()) return hubload::cli::Fail("reshard", r.status().ToString());
    for (const auto& f : r->files) std::printf("wrote %s\n", f.c_str());
    if (!r->index_file.empty()) std::printf("wrote %s\n", r->index_file.c_str());
    for (const auto& f : r->removed_stale) std::printf("removed stale %s\n", f.c_str());
    std::printf("total_size %llu bytes in %zu file(s)\n", static_cast<unsigned long long>(r->total_size),
                r->files.size());
    return 0;
  };
}};

}  // namespace
