// `hubload demo-model OUT_DIR [--size-mb N] [--seed S]`: writes a deterministic
// diffusers-style pipeline folder for the main job (tools/demo.sh):
//
//   model_index.json                       {"transformer": [...], "text_encoder": [...], "scheduler": [...]}
//   scheduler/scheduler_config.json
//   transformer/config.json
//   transformer/diffusion_pytorch_model-0000i-of-0000N.safetensors      F32 weights, BF16, I64 buffers
//   transformer/diffusion_pytorch_model.safetensors.index.json
//   transformer/diffusion_pytorch_model.fp16-0000i-of-0000M.safetensors F16 weights, BF16, I64 buffers
//   transformer/diffusion_pytorch_model.safetensors.index.fp16.json
//   text_encoder/config.json
//   text_encoder/model.safetensors                                      BF16 embeddings, F32 norms, I64 ids
//
// Every value comes from a splitmix64 stream seeded by (seed, tensor name), so the
// same arguments always give byte-identical files. The fp16 variant holds the
// fp32 values rounded to nearest-even (as torch's .half()).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hubload/safetensors.h"
#include "hubload/split.h"
#include "tools/hubload/cli.h"
#include "util/json.h"
#include "util/text.h"

namespace {

namespace fs = std::filesystem;
using hubload::safetensors::Dtype;

struct SplitMix64 {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1).
  float Uniform() { return static_cast<float>(static_cast<double>(Next() >> 40) / static_cast<double>(1ull << 23) - 1.0); }
};

uint64_t Fnv1a(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9E3779B97F4A7C15ull);
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// IEEE binary16, round to nearest even (finite inputs of small magnitude).
uint16_t ToF16(float f) {
  uint32_t x = FloatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFFu;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf (never for demo values)
  if (exp <= 0) {                                                 // subnormal half
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // carries into the exponent correctly
  return static_cast<uint16_t>(half);
}

/// bfloat16, round to nearest even (finite inputs).
uint16_t ToBF16(float f) {
  uint32_t x = FloatBits(f);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7FFFu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

/// One tensor spec; values are generated on demand.
struct Spec {
  std::string name;
  std::vector<uint64_t> shape;
  enum Kind { kWeight, kOnes, kPositions } kind = kWeight;
  float scale = 0.02f;
  bool bf16 = false;  // stored as BF16 in every variant
  bool i64 = false;   // integer buffer
  Spec(std::string n, std::vector<uint64_t> sh, Kind k = kWeight, float sc = 0.02f, bool b = false, bool i = false)
      : name(std::move(n)), shape(std::move(sh)), kind(k), scale(sc), bf16(b), i64(i) {}
  uint64_t numel() const {
    uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

/// Bytes of `s` for the checkpoint flavour (fp16 = half precision floats).
std::string Materialize(const Spec& s, uint64_t seed, bool fp16, Dtype* dtype) {
  const uint64_t n = s.numel();
  std::string out;
  if (s.i64) {
    *dtype = Dtype::I64;
    out.resize(n * 8);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t v = static_cast<int64_t>(i);
      std::memcpy(&out[i * 8], &v, 8);
    }
    return out;
  }
  SplitMix64 rng{Fnv1a(s.name, seed)};
  auto value = [&](uint64_t) -> float {
    if (s.kind == Spec::kOnes) return 1.0f + 0.01f * rng.Uniform();
    return s.scale * rng.Uniform();
  };
  if (s.bf16 || fp16) {
    *dtype = s.bf16 ? Dtype::BF16 : Dtype::F16;
    out.resize(n * 2);
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h = s.bf16 ? ToBF16(value(i)) : ToF16(value(i));
      std::memcpy(&out[i * 2], &h, 2);
    }
    return out;
  }
  *dtype = Dtype::F32;
  out.resize(n * 4);
  for (uint64_t i = 0; i < n; ++i) {
    float v = value(i);
    std::memcpy(&out[i * 4], &v, 4);
  }
  return out;
}

uint64_t BytesOf(const Spec& s, bool fp16) { return s.numel() * (s.i64 ? 8 : (s.bf16 || fp16) ? 2 : 4); }

// "stem[.variant]-0000i-of-0000N.safetensors" (hubload/split.h's pattern).
std::string ShardName(const std::string& stem, const std::string& variant, size_t i, size_t n) {
  std::string name = hubload::ShardFilenamePattern(stem, variant);
  return name.replace(name.find("{suffix}"), 8, hubload::util::FormatShardSuffix(i, n));
}

bool WriteText(const fs::path& p, const std::string& text) {
  std::error_code ec;
  fs::create_directories(p.parent_path(), ec);
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

hubload::Status WriteFileOf(const fs::path& path, const std::vector<const Spec*>& specs, uint64_t seed, bool fp16) {
  std::vector<std::string> bufs;
  std::vector<hubload::safetensors::TensorToWrite> tw;
  bufs.reserve(specs.size());
  for (const Spec* s : specs) {
    Dtype d;
    bufs.push_back(Materialize(*s, seed, fp16, &d));
    tw.push_back({s->name, d, s->shape, bufs.back().data(), bufs.back().size()});
  }
  return hubload::safetensors::WriteFile(path.string(), std::move(tw));
}

/// Sharded save: greedy split in spec order at `max_shard_bytes`, index last.
hubload::Status WriteSharded(const fs::path& dir, const std::string& stem, const std::string& variant,
                             const std::vector<Spec>& specs, uint64_t seed, bool fp16, uint64_t max_shard_bytes,
                             size_t* n_shards, uint64_t* total) {
  std::vector<std::vector<const Spec*>> shards(1);
  uint64_t cur = 0;
  *total = 0;
  for (const auto& s : specs) {
    uint64_t b = BytesOf(s, fp16);
    if (cur > 0 && cur + b > max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(&s);
    cur += b;
    *total += b;
  }
  *n_shards = shards.size();
  nlohmann::ordered_json index;
  index["metadata"]["total_size"] = *total;
  nlohmann::json wm = nlohmann::json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    std::string name = ShardName(stem, variant, i + 1, shards.size());
    HUBLOAD_RETURN_IF_ERROR(WriteFileOf(dir / name, shards[i], seed, fp16));
    for (const Spec* s : shards[i]) wm[s->name] = name;
  }
  index["weight_map"] = wm;
  std::string index_name = stem + ".safetensors.index" + (variant.empty() ? "" : "." + variant) + ".json";
  if (!WriteText(dir / index_name, hubload::util::DumpJson(index, 2) + "\n"))
    return hubload::Status(hubload::Code::kIOError, "cannot write " + (dir / index_name).string(), "IOError");
  return hubload::Status::Ok();
}

int RunDemo(const std::string& out_dir, uint64_t size_mb, uint64_t seed) {
  if (size_mb < 1 || size_mb > 100000) return hubload::cli::Fail("demo-model", "--size-mb must be in [1, 100000]");
  const fs::path root(out_dir);
  std::error_code ec;
  fs::create_directories(root / "transformer", ec);
  fs::create_directories(root / "text_encoder", ec);
  fs::create_directories(root / "scheduler", ec);
  if (ec) return hubload::cli::Fail("demo-model", "cannot create " + out_dir + ": " + ec.message());

  // Budget: ~62% transformer fp32, ~31% its fp16 variant, ~7% text encoder.
  const uint64_t budget = size_mb * 1000 * 1000;
  const uint64_t d = 512;
  const uint64_t block_bytes = 12 * d * d * 4;  // attention 4·d² + MLP 8·d², fp32
  uint64_t blocks = std::max<uint64_t>(1, (budget * 62 / 100) / block_bytes);
  std::vector<Spec> tr;
  tr.push_back({"pos_embed.proj.weight", {d, 16, 2, 2}});
  tr.push_back({"pos_embed.proj.bias", {d}, Spec::kWeight, 0.01f});
  tr.push_back({"pos_embed.position_ids", {1024}, Spec::kPositions, 0.0f, false, true});
  tr.push_back({"time_embed.linear_1.weight", {d, 256}});
  tr.push_back({"time_embed.linear_1.bias", {d}, Spec::kWeight, 0.01f});
  tr.push_back({"scale_shift_table", {2, d}, Spec::kWeight, 0.5f, true});
  for (uint64_t b = 0; b < blocks; ++b) {
    std::string p = "transformer_blocks." + std::to_string(b) + ".";
    tr.push_back({p + "norm1.weight", {d}, Spec::kOnes});
    for (const char* m : {"attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0"}) {
      tr.push_back({p + m + ".weight", {d, d}});
      tr.push_back({p + m + ".bias", {d}, Spec::kWeight, 0.01f});
    }
    tr.push_back({p + "norm2.weight", {d}, Spec::kOnes});
    tr.push_back({p + "ff.net.0.proj.weight", {4 * d, d}});
    tr.push_back({p + "ff.net.0.proj.bias", {4 * d}, Spec::kWeight, 0.01f});
    tr.push_back({p + "ff.net.2.weight", {d, 4 * d}});
    tr.push_back({p + "ff.net.2.bias", {d}, Spec::kWeight, 0.01f});
  }
  tr.push_back({"norm_out.weight", {d}, Spec::kOnes});
  tr.push_back({"proj_out.weight", {64, d}});
  tr.push_back({"proj_out.bias", {64}, Spec::kWeight, 0.01f});

  // Shards of unequal sizes on purpose: ~1/4 of the fp32 weights per shard.
  uint64_t tr_bytes = 0;
  for (const auto& s : tr) tr_bytes += BytesOf(s, false);
  const uint64_t max_shard = std::max<uint64_t>(tr_bytes / 4 + 1, 4 * d * d * 4 + 1);
  size_t n32 = 0, n16 = 0;
  uint64_t total32 = 0, total16 = 0;
  auto st = WriteSharded(root / "transformer", "diffusion_pytorch_model", "", tr, seed, false, max_shard, &n32, &total32);
  if (st.ok())
    st = WriteSharded(root / "transformer", "diffusion_pytorch_model", "fp16", tr, seed, true, max_shard, &n16,
                      &total16);
  if (!st.ok()) return hubload::cli::Fail("demo-model", st.ToString());

  // Text encoder: single file, BF16 embeddings.
  const uint64_t te_budget = std::max<uint64_t>(budget * 7 / 100, 2 * 1000 * 1000);
  const uint64_t vocab = std::max<uint64_t>(16, te_budget / (d * 2));
  std::vector<Spec> te;
  te.push_back({"embeddings.token_embedding.weight", {vocab, d}, Spec::kWeight, 0.02f, true});
  te.push_back({"embeddings.position_ids", {1, 77}, Spec::kPositions, 0.0f, false, true});
  te.push_back({"final_layer_norm.weight", {d}, Spec::kOnes});
  te.push_back({"final_layer_norm.bias", {d}, Spec::kWeight, 0.01f});
  std::vector<const Spec*> te_ptrs;
  for (const auto& s : te) te_ptrs.push_back(&s);
  st = WriteFileOf(root / "text_encoder" / "model.safetensors", te_ptrs, seed, false);
  if (!st.ok()) return hubload::cli::Fail("demo-model", st.ToString());

  nlohmann::ordered_json mi;
  mi["_class_name"] = "DemoPipeline";
  mi["_diffusers_version"] = "0.32.0";
  mi["scheduler"] = {"diffusers", "FlowMatchEulerDiscreteScheduler"};
  mi["text_encoder"] = {"transformers", "DemoTextModel"};
  mi["transformer"] = {"diffusers", "DemoTransformer2DModel"};
  nlohmann::ordered_json tc;
  tc["_class_name"] = "DemoTransformer2DModel";
  tc["hidden_size"] = d;
  tc["num_layers"] = blocks;
  tc["patch_size"] = 2;
  nlohmann::ordered_json tec;
  tec["architectures"] = {"DemoTextModel"};
  tec["hidden_size"] = d;
  tec["vocab_size"] = vocab;
  tec["torch_dtype"] = "bfloat16";
  nlohmann::ordered_json sc;
  sc["_class_name"] = "FlowMatchEulerDiscreteScheduler";
  sc["num_train_timesteps"] = 1000;
  bool ok = WriteText(root / "model_index.json", hubload::util::DumpJson(mi, 2) + "\n") &&
            WriteText(root / "transformer" / "config.json", hubload::util::DumpJson(tc, 2) + "\n") &&
            WriteText(root / "text_encoder" / "config.json", hubload::util::DumpJson(tec, 2) + "\n") &&
            WriteText(root / "scheduler" / "scheduler_config.json", hubload::util::DumpJson(sc, 2) + "\n");
  if (!ok) return hubload::cli::Fail("demo-model", "cannot write the JSON files under " + out_dir);
  std::printf("demo model written to %s (seed %llu)\n", out_dir.c_str(), static_cast<unsigned long long>(seed));
  std::printf("  transformer: %zu tensors, %zu fp32 shards (%.1f MB), %zu fp16 shards (%.1f MB)\n", tr.size(), n32,
              total32 / 1e6, n16, total16 / 1e6);
  std::printf("  text_encoder: %zu tensors (%.1f MB)\n", te.size(), vocab * d * 2 / 1e6);
  return 0;
}

struct DemoArgs {
  std::string out_dir;
  uint64_t size_mb = 300;
  uint64_t seed = 0;
};

hubload::cli::Command reg{"demo-model", [](CLI::App& app, hubload::cli::Global&) {
  auto a = std::make_shared<DemoArgs>();
  auto* sub = app.add_subcommand("demo-model",
                                 "Write a deterministic diffusers-style pipeline folder (sharded transformer with an "
                                 "fp16 variant, text encoder) for the main job");
  sub->add_option("out_dir", a->out_dir, "folder to write (created)")->required();
  sub->add_option("--size-mb", a->size_mb, "approximate total size in MB (10^6 bytes, >= 1)")
      ->capture_default_str()
      ->check(hubload::cli::PositiveCheck());
  sub->add_option("--seed", a->seed, "seed of the value streams")
      ->capture_default_str()
      ->check(hubload::cli::NonNegativeCheck());
  return [a]() { return RunDemo(a->out_dir, a->size_mb, a->seed); };
}};

}  // namespace
