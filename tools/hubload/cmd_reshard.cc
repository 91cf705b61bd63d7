// `hubload reshard SRC OUT_DIR`: rewrite a single-file or sharded checkpoint as
// huggingface_hub's save_torch_state_dict splits it, byte for byte (every dtype
// and the source __metadata__ kept); only an explicit --dtype converts floating
// tensors, through LibTorch's loader. A torch.save source (pytorch_model.bin,
// sharded or not) is read by the restricted reader and converted to
// safetensors first (pickle::ConvertToSafetensors), then resharded.
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "hubload/load.h"
#include "hubload/pickle.h"
#include "hubload/split.h"
#include "hubload/torch_loader.h"
#include "loader/pipeline/plan.h"
#include "tools/hubload/cli.h"
#include "tools/hubload/progress_bar.h"

namespace {

// A floating tensor converted by the LibTorch loader; the tensor owns the bytes.
hubload::Result<hubload::ConvertedTensorBytes> ConvertWithTorch(const hubload::safetensors::SafetensorsFile& file,
                                                                const hubload::safetensors::TensorInfo& info,
                                                                hubload::safetensors::Dtype to) {
  hubload::LoadOptions lo;
  lo.dtype = to == hubload::safetensors::Dtype::F32   ? hubload::TargetDtype::kF32
             : to == hubload::safetensors::Dtype::F16 ? hubload::TargetDtype::kF16
                                                      : hubload::TargetDtype::kBF16;
  auto t = hubload::LoadTensor(file, info, lo);
  if (!t.ok()) return t.status();
  auto owner = std::make_shared<at::Tensor>(std::move(t).value());
  hubload::ConvertedTensorBytes out;
  out.nbytes = static_cast<uint64_t>(owner->numel()) * owner->element_size();
  out.data = out.nbytes ? static_cast<const uint8_t*>(owner->data_ptr()) : nullptr;
  out.owner = owner;
  return out;
}

// A folder removed when it goes out of scope ("" = none).
struct TempFolder {
  std::string path;
  ~TempFolder() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

// Replaces the pickle shards of `plan` in `source` by safetensors copies in a
// temporary folder inside `out_dir` (each checked against the .bin index first).
hubload::Status ConvertPickleShards(const hubload::pipeline_internal::FetchPlan& plan, const std::string& out_dir,
                                    hubload::ReshardSource* source, TempFolder* tmp) {
  namespace fs = std::filesystem;
  bool any = false;
  for (const auto& s : plan.shards) any |= s.format == hubload::pipeline_internal::ShardFormat::kPickle;
  if (!any) return hubload::Status::Ok();
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  std::string templ = (fs::path(out_dir) / ".hubload-reshard-XXXXXX").string();
  if (!::mkdtemp(templ.data()))
    return hubload::Status(hubload::Code::kIOError, "cannot create a temporary folder in '" + out_dir + "'");
  tmp->path = templ;
  source->files.clear();
  source->index_file.clear();  // the .bin index is checked here; its shards are renamed
  for (size_t i = 0; i < plan.shards.size(); ++i) {
    const auto& s = plan.shards[i];
    if (s.format != hubload::pipeline_internal::ShardFormat::kPickle) {
      source->files.push_back(s.local_path);
      continue;
    }
    auto f = hubload::pickle::PickleFile::Open(s.local_path);
    if (!f.ok()) return f.status();
    if (plan.sharded)
      HUBLOAD_RETURN_IF_ERROR(
          hubload::pickle::CheckShardAgainstIndex(plan.index, fs::path(s.local_path).filename().string(), f->checkpoint()));
    std::string out = (fs::path(tmp->path) / ("part-" + std::to_string(i) + ".safetensors")).string();
    HUBLOAD_RETURN_IF_ERROR(hubload::pickle::ConvertToSafetensors(*f, out));
    source->files.push_back(out);
  }
  return hubload::Status::Ok();
}

hubload::cli::Command reg{"reshard", [](CLI::App& app, hubload::cli::Global&) {
  auto* sub = app.add_subcommand("reshard", hubload::cli::TorchCommandHelp("reshard"));
  struct Args {
    std::string src, out, max_shard_size = "10GB", variant, dtype = "auto", weights_name, src_variant, subfolder;
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  sub->add_option("src", a->src, "checkpoint folder, .safetensors or .bin file, or a .safetensors/.bin index")->required();
  sub->add_option("out_dir", a->out, "output folder (created if needed)")->required();
  sub->add_option("--max-shard-size", a->max_shard_size,
                  "bytes per shard: 5GB = 5*10^9, 5GiB = 5*2^30, KB/MB/TB and KiB/MiB/TiB, or plain bytes")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            auto s = hubload::ParseMaxShardSize(v);
            return s.ok() ? std::string() : s.status().message();
          },
          "SIZE", "MaxShardSize"));
  sub->add_option("--variant", a->variant, "variant of the written files (e.g. fp16)");
  sub->add_option("--dtype", a->dtype,
                  "auto (default: every tensor as stored) or fp32|fp16|bf16: convert floating tensors only")
      ->capture_default_str()
      ->check(hubload::cli::DtypeCheck());
  sub->add_option("--weights-name", a->weights_name,
                  "file stem: model or diffusion_pytorch_model (default: the source's, else model)");
  sub->add_option("--src-variant", a->src_variant, "variant of the source weights");
  sub->add_option("--subfolder", a->subfolder, "folder inside SRC holding the model");
  sub->add_flag("-q,--quiet", a->quiet, "no progress output");
  return [a]() -> int {
    auto d = hubload::ParseTargetDtype(a->dtype);
    if (!d.ok()) return hubload::cli::Fail("reshard", d.status().message());
    auto max = hubload::ParseMaxShardSize(a->max_shard_size);
    if (!max.ok()) return hubload::cli::Fail("reshard", "--max-shard-size: " + max.status().message());
    // SRC is resolved as `hubload load PATH` resolves it: the load driver's fetch plan.
    hubload::PretrainedRequest req;
    req.repo_id = a->src;
    req.source = hubload::PretrainedRequest::Source::kLocal;
    req.variant = a->src_variant;
    req.subfolder = a->subfolder;
    hubload::PretrainedInfo info;
    auto plan = hubload::pipeline_internal::MakeFetchPlan(nullptr, req, /*allow_pickle=*/true, &info);
    if (!plan.ok()) return hubload::cli::Fail("reshard", plan.status().ToString());
    for (const auto& w : info.warnings) std::fprintf(stderr, "hubload reshard: warning: %s\n", w.c_str());
    hubload::ReshardSource source;
    source.files = info.local_files;
    source.index_file = info.index_file;
    // torch.save shards (.bin, issue 16): each converted to a temporary safetensors file first.
    TempFolder tmp;
    if (auto st = ConvertPickleShards(*plan, a->out, &source, &tmp); !st.ok())
      return hubload::cli::Fail("reshard", st.ToString());
    source.weights_name = info.resolved.weights_name;
    hubload::ReshardOptions opts;
    opts.max_shard_size = *max;
    opts.variant = a->variant;
    opts.weights_name = a->weights_name;
    if (*d != hubload::TargetDtype::kAuto) {
      opts.float_dtype = *d == hubload::TargetDtype::kF32   ? hubload::safetensors::Dtype::F32
                         : *d == hubload::TargetDtype::kF16 ? hubload::safetensors::Dtype::F16
                                                            : hubload::safetensors::Dtype::BF16;
      opts.convert = ConvertWithTorch;
    }
    // Progress on a terminal (progress_bar.h): tensor bytes written of the total, per output shard.
    std::unique_ptr<hubload::cli::ProgressBar> bar;
    if (hubload::cli::ProgressWanted(a->quiet)) {
      bar = std::make_unique<hubload::cli::ProgressBar>();
      opts.on_progress = [b = bar.get()](const hubload::ReshardProgress& p) {
        const bool edge = p.file_bytes_done == 0 || p.file_bytes_done == p.file_bytes_total;
        b->Update(p.file, p.file_bytes_done, p.file_bytes_total, p.bytes_done, p.bytes_total,
                  "shards " + std::to_string(p.files_done) + "/" + std::to_string(p.files_total), edge);
      };
    }
    auto r = hubload::ReshardCheckpoint(source, a->out, opts);
    if (bar) bar->Finish();
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
