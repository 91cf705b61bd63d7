// LibTorch loader: dtype conversions (exhaustive float8), real files, keep-in-fp32,
// sharded save. Expected values are computed here from raw bytes / formulas.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hubload/split.h"
#include "hubload/pipeline.h"
#include "testing/report.h"
#include "hubload/torch_loader.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using safetensors::Dtype;
using testing::TempDir;

void WriteOne(const std::string& path, std::vector<safetensors::TensorToWrite> t) {
  Status st = safetensors::WriteFile(path, std::move(t));
  ASSERT_OK(st);
}

safetensors::SafetensorsFile MustOpen(const std::string& path) {
  auto f = safetensors::SafetensorsFile::Open(path);
  EXPECT_OK(f);
  return std::move(f).value();
}

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Independent OCP FP8 decoding (formulas from the OCP OFP8 / MX specs).
double RefE4M3(uint8_t c) {
  int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return std::copysign(NAN, s ? -1.0 : 1.0);
  double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return s ? -v : v;
}
double RefE5M2(uint8_t c) {
  int s = c >> 7, e = (c >> 2) & 31, m = c & 3;
  double v;
  if (e == 31) v = m == 0 ? INFINITY : NAN;
  else v = e == 0 ? std::ldexp(m, -16) : std::ldexp(4 + m, e - 17);
  return s ? -v : v;
}
double RefE8M0(uint8_t c) { return c == 255 ? NAN : std::ldexp(1.0, c - 127); }

void CheckFp8(Dtype dtype, double (*ref)(uint8_t)) {
  TempDir dir;
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  std::string path = dir.str() + "/f8.safetensors";
  WriteOne(path, {{"codes", dtype, {16, 16}, codes.data(), 256}});
  auto file = MustOpen(path);
  const auto& info = file.header().tensors.at(0);
  LoadOptions f32;
  f32.dtype = TargetDtype::kF32;
  auto t32 = LoadTensor(file, info, f32);
  ASSERT_OK(t32);
  ASSERT_EQ(t32->scalar_type(), at::kFloat);
  ASSERT_EQ(t32->sizes(), at::IntArrayRef({16, 16}));
  auto autod = LoadTensor(file, info, LoadOptions{});
  ASSERT_OK(autod);
  ASSERT_EQ(autod->scalar_type(), at::kBFloat16);
  const float* p = t32->data_ptr<float>();
  const uint16_t* b = static_cast<const uint16_t*>(autod->data_ptr());
  for (int i = 0; i < 256; ++i) {
    double want = ref(static_cast<uint8_t>(i));
    SCOPED_TRACE(::testing::Message() << safetensors::DtypeName(dtype) << " code " << i);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(p[i]));
      EXPECT_EQ(std::signbit(p[i]), std::signbit(want));
      uint16_t bb = b[i];
      EXPECT_EQ(bb & 0x7F80, 0x7F80);
      EXPECT_NE(bb & 0x007F, 0);
      continue;
    }
    // Exactly representable in float32: compare values and bit patterns.
    float wantf = static_cast<float>(want);
    ASSERT_EQ(static_cast<double>(wantf), want);
    EXPECT_EQ(FloatBits(p[i]), FloatBits(wantf));
    // ... and in bfloat16: the low half of the float32 pattern is zero.
    ASSERT_EQ(FloatBits(wantf) & 0xFFFF, 0u);
    EXPECT_EQ(b[i], FloatBits(wantf) >> 16);
  }
}

TEST(Float8, E4M3FNAllCodesExact) { CheckFp8(Dtype::F8_E4M3, RefE4M3); }
TEST(Float8, E5M2AllCodesExact) { CheckFp8(Dtype::F8_E5M2, RefE5M2); }
TEST(Float8, E8M0AllCodesExact) { CheckFp8(Dtype::F8_E8M0, RefE8M0); }

TEST(Float8, ToHalfRoundsOnlyOutOfRange) {
  TempDir dir;
  std::vector<uint8_t> codes(256);
  for (int i = 0; i < 256; ++i) codes[i] = static_cast<uint8_t>(i);
  std::string path = dir.str() + "/f8.safetensors";
  WriteOne(path, {{"e4", Dtype::F8_E4M3, {256}, codes.data(), 256}, {"e5", Dtype::F8_E5M2, {256}, codes.data(), 256}});
  auto file = MustOpen(path);
  LoadOptions o;
  o.dtype = TargetDtype::kF16;
  auto sd = LoadTensors(file, o);
  ASSERT_OK(sd);
  for (auto& [name, t] : *sd) {
    ASSERT_EQ(t.scalar_type(), at::kHalf);
    auto f = t.to(at::kFloat);
    for (int i = 0; i < 256; ++i) {
      double want = name == "e4" ? RefE4M3(i) : RefE5M2(i);
      float got = f.data_ptr<float>()[i];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << name << " " << i;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << name << " " << i;  // E4M3/E5M2 fit fp16 exactly
      }
    }
  }
}

TEST(Widening, UnsignedToNextSignedAndRefusals) {
  TempDir dir;
  uint16_t u16[4] = {0, 1, 65535, 32768};
  uint32_t u32[3] = {0, 4294967295u, 2147483648u};
  uint64_t u64ok[2] = {0, 9223372036854775807ull};
  uint64_t u64bad[2] = {1, 9223372036854775808ull};
  uint8_t f4[1] = {0x21};
  std::string path = dir.str() + "/u.safetensors";
  WriteOne(path, {{"u16", Dtype::U16, {4}, u16, 8},
                  {"u32", Dtype::U32, {3}, u32, 12},
                  {"u64ok", Dtype::U64, {2}, u64ok, 16},
                  {"u64bad", Dtype::U64, {2}, u64bad, 16},
                  {"f4", Dtype::F4, {2}, f4, 1}});
  auto file = MustOpen(path);
  auto get = [&](const std::string& n) { return LoadTensor(file, *file.header().Find(n), LoadOptions{}); };
  auto a = get("u16");
  ASSERT_OK(a);
  EXPECT_EQ(a->scalar_type(), at::kInt);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a->data_ptr<int32_t>()[i], static_cast<int32_t>(u16[i]));
  auto b = get("u32");
  ASSERT_OK(b);
  EXPECT_EQ(b->scalar_type(), at::kLong);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b->data_ptr<int64_t>()[i], static_cast<int64_t>(u32[i]));
  auto c = get("u64ok");
  ASSERT_OK(c);
  EXPECT_EQ(c->data_ptr<int64_t>()[1], INT64_MAX);
  auto d = get("u64bad");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kUnsupported);
  EXPECT_NE(d.status().message().find("u64bad"), std::string::npos);
  EXPECT_NE(d.status().message().find("element 1"), std::string::npos);
  auto e = get("f4");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), Code::kUnsupported);
  EXPECT_NE(e.status().message().find("'f4'"), std::string::npos);
  EXPECT_NE(e.status().message().find("F4"), std::string::npos);
  // Integers are never converted by a floating target.
  LoadOptions o;
  o.dtype = TargetDtype::kF16;
  EXPECT_EQ(LoadTensor(file, *file.header().Find("u16"), o)->scalar_type(), at::kInt);
}

// --- real files: sums and sha256 computed here from the raw bytes -----------

double HalfToDouble(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}

struct Expected {
  std::string dtype;  // as loaded
  std::vector<int64_t> shape;
  double sum = 0;
  std::string sha256;
};

std::map<std::string, Expected> DecodeRaw(const fs::path& p) {
  auto bytes = testing::ReadFileBytes(p);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  auto header = nlohmann::json::parse(std::string(bytes.begin() + 8, bytes.begin() + 8 + n));
  const uint8_t* data = bytes.data() + 8 + n;
  std::map<std::string, Expected> out;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    Expected e;
    std::string dt = v["dtype"];
    for (auto& d : v["shape"]) e.shape.push_back(d.get<int64_t>());
    uint64_t b = v["data_offsets"][0], en = v["data_offsets"][1];
    const uint8_t* q = data + b;
    size_t len = en - b;
    std::vector<uint8_t> loaded(q, q + len);  // bytes as loaded (widened for unsigned)
    auto le = [&](size_t off, int w) {
      uint64_t x = 0;
      for (int k = w - 1; k >= 0; --k) x = (x << 8) | q[off + k];
      return x;
    };
    double sum = 0;
    e.dtype = dt;
    if (dt == "BOOL" || dt == "U8") for (size_t i = 0; i < len; ++i) sum += q[i];
    else if (dt == "I8") for (size_t i = 0; i < len; ++i) sum += static_cast<int8_t>(q[i]);
    else if (dt == "I16") for (size_t i = 0; i < len; i += 2) sum += static_cast<int16_t>(le(i, 2));
    else if (dt == "I32") for (size_t i = 0; i < len; i += 4) sum += static_cast<int32_t>(le(i, 4));
    else if (dt == "I64") for (size_t i = 0; i < len; i += 8) sum += static_cast<double>(static_cast<int64_t>(le(i, 8)));
    else if (dt == "F16") for (size_t i = 0; i < len; i += 2) sum += HalfToDouble(static_cast<uint16_t>(le(i, 2)));
    else if (dt == "BF16") for (size_t i = 0; i < len; i += 2) {
      uint32_t bits = static_cast<uint32_t>(le(i, 2)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      sum += f;
    }
    else if (dt == "F32") for (size_t i = 0; i < len; i += 4) {
      uint32_t bits = static_cast<uint32_t>(le(i, 4));
      float f;
      std::memcpy(&f, &bits, 4);
      sum += f;
    }
    else if (dt == "F64") for (size_t i = 0; i < len; i += 8) {
      uint64_t bits = le(i, 8);
      double d;
      std::memcpy(&d, &bits, 8);
      sum += d;
    }
    else if (dt == "U16") {
      e.dtype = "I32";
      loaded.clear();
      for (size_t i = 0; i < len; i += 2) {
        uint64_t x = le(i, 2);
        sum += static_cast<double>(x);
        for (int k = 0; k < 4; ++k) loaded.push_back(static_cast<uint8_t>(x >> (8 * k)));
      }
    } else if (dt == "U32") {
      e.dtype = "I64";
      loaded.clear();
      for (size_t i = 0; i < len; i += 4) {
        uint64_t x = le(i, 4);
        sum += static_cast<double>(x);
        for (int k = 0; k < 8; ++k) loaded.push_back(static_cast<uint8_t>(x >> (8 * k)));
      }
    } else {
      ADD_FAILURE() << "test does not decode " << dt;
    }
    e.sum = sum;
    e.sha256 = testing::Sha256Hex(loaded.data(), loaded.size());
    out[name] = e;
  }
  return out;
}

TEST(RealFiles, EveryDtypeLoadsWithIndependentSumsAndHashes) {
  auto root = testing::SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data not present";
  std::set<std::string> dtypes_seen;
  int files = 0;
  for (auto& ent : fs::directory_iterator(root / "safetensors")) {
    if (ent.path().extension() != ".safetensors") continue;
    SCOPED_TRACE(ent.path().filename().string());
    ++files;
    auto expected = DecodeRaw(ent.path());
    StateDict sd;
    std::uintptr_t map_lo = 0, map_hi = 0;
    {
      auto file = MustOpen(ent.path().string());
      map_lo = reinterpret_cast<std::uintptr_t>(file.mapping()->data());
      map_hi = map_lo + file.mapping()->size();
      auto r = LoadTensors(file, LoadOptions{});
      ASSERT_OK(r);
      sd = std::move(r).value();
    }  // the file object is gone: tensors must keep the mapping alive
    ASSERT_EQ(sd.size(), expected.size());
    for (auto& [name, t] : sd) {
      SCOPED_TRACE(name);
      ASSERT_TRUE(expected.count(name));
      const Expected& e = expected[name];
      auto s = SummarizeTensor(t);
      ASSERT_OK(s);
      EXPECT_EQ(s->dtype, e.dtype);
      EXPECT_EQ(s->shape, e.shape);
      EXPECT_DOUBLE_EQ(s->sum, e.sum);
      EXPECT_EQ(s->sha256, e.sha256);
      dtypes_seen.insert(e.dtype);
      // Zero-copy exactly when aligned and no conversion is needed.
      auto p = reinterpret_cast<std::uintptr_t>(t.data_ptr());
      bool inside = p >= map_lo && p < map_hi;
      bool aligned = p % t.element_size() == 0;
      if (inside) {
        EXPECT_TRUE(aligned);
      }
      EXPECT_TRUE(aligned || t.numel() == 0);
    }
    // Conversion path: floating tensors to fp32 keep their values exactly.
    auto file = MustOpen(ent.path().string());
    LoadOptions f32;
    f32.dtype = TargetDtype::kF32;
    auto c = LoadTensors(file, f32);
    ASSERT_OK(c);
    for (auto& [name, t] : *c) {
      const Expected& e = expected[name];
      bool floating = e.dtype == "F16" || e.dtype == "BF16" || e.dtype == "F32" || e.dtype == "F64";
      if (!floating) continue;
      EXPECT_EQ(t.scalar_type(), at::kFloat) << name;
      if (e.dtype != "F64") {
        EXPECT_DOUBLE_EQ(SummarizeTensor(t)->sum, e.sum) << name;
      }
    }
  }
  EXPECT_GE(files, 16);
  for (const char* d : {"BF16", "BOOL", "F16", "F32", "F64", "I16", "I32", "I64", "I8", "U8"})
    EXPECT_TRUE(dtypes_seen.count(d)) << d;
}

// Misaligned data (unpadded 2022 header) is copied, not misread.
TEST(RealFiles, MisalignedTensorsAreCopies) {
  auto root = testing::SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data not present";
  auto path = root / "safetensors" / "huggingface__safetensors__overall.safetensors";
  auto file = MustOpen(path.string());
  int copies = 0;
  for (const auto& info : file.header().tensors) {
    auto t = LoadTensor(file, info, LoadOptions{});
    ASSERT_OK(t);
    auto raw = file.data(info);
    bool misaligned = reinterpret_cast<std::uintptr_t>(raw.data()) % t->element_size() != 0;
    if (misaligned) {
      ++copies;
      EXPECT_NE(t->data_ptr(), static_cast<const void*>(raw.data()));
      EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t->data_ptr()) % t->element_size(), 0u);
    }
  }
  EXPECT_GT(copies, 0);  // (8+N) % 8 == 6 in this file
}

// --- B30: bf16 stays bf16 by default -----------------------------------------

TEST(FieldFailures, B30_Bf16StaysBf16ByDefault) {
  TempDir dir;
  std::vector<uint16_t> w(64 * 64);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint16_t>(0x3F80 + (i % 128));  // 1.0 .. ~2.0
  std::string path = dir.str() + "/model.safetensors";
  WriteOne(path, {{"w", Dtype::BF16, {64, 64}, w.data(), w.size() * 2}});
  auto ck = LoadCheckpoint(path, {}, {});
  ASSERT_OK(ck);
  ASSERT_EQ(ck->tensors.size(), 1u);
  at::Tensor t = ck->tensors[0].second;
  EXPECT_EQ(t.scalar_type(), at::kBFloat16);
  EXPECT_EQ(std::memcmp(t.data_ptr(), w.data(), w.size() * 2), 0);
  LoadOptions f32;
  f32.dtype = TargetDtype::kF32;
  auto up = LoadCheckpoint(path, {}, f32);
  ASSERT_OK(up);
  at::Tensor u = up->tensors[0].second;
  EXPECT_EQ(u.scalar_type(), at::kFloat);
  for (size_t i = 0; i < w.size(); ++i)
    ASSERT_EQ(FloatBits(u.data_ptr<float>()[i]), static_cast<uint32_t>(w[i]) << 16) << i;
}

// --- B32: keep-in-fp32 on single-file and sharded paths alike --------------

TEST(FieldFailures, B32_KeepInFp32SameOnBothLayouts) {
  TempDir dir;
  StateDict sd = {{"layers.0.norm.weight", at::arange(8, at::kFloat) / 3},
                  {"layers.0.proj.weight", at::arange(16, at::kFloat).reshape({4, 4}) / 7},
                  {"final_norm.weight", at::arange(8, at::kFloat) / 11}};
  SaveOptions single;
  single.max_shard_size = uint64_t{1} << 30;
  auto s1 = SaveSharded(sd, dir.str() + "/single", single);
  ASSERT_OK(s1);
  EXPECT_TRUE(s1->index_file.empty());
  SaveOptions sharded;
  sharded.max_shard_size = uint64_t{64};  // every tensor alone: 3 shards
  auto s2 = SaveSharded(sd, dir.str() + "/sharded", sharded);
  ASSERT_OK(s2);
  EXPECT_EQ(s2->files.size(), 3u);
  LoadOptions o;
  o.dtype = TargetDtype::kF16;
  o.keep_in_fp32 = {"norm"};
  for (const char* layout : {"single", "sharded"}) {
    SCOPED_TRACE(layout);
    auto ck = LoadCheckpoint(dir.str() + "/" + layout, {}, o);
    ASSERT_OK(ck);
    std::map<std::string, at::ScalarType> types;
    for (auto& [n, t] : ck->tensors) types[n] = t.scalar_type();
    EXPECT_EQ(types.at("layers.0.norm.weight"), at::kFloat);
    EXPECT_EQ(types.at("layers.0.proj.weight"), at::kHalf);
    EXPECT_EQ(types.at("final_norm.weight"), at::kHalf);  // whole dot-component rule
  }
}

// --- sharded save ------------------------------------------------------------

nlohmann::json ReadJson(const std::string& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(SaveSharded, SplitFilesIndexAndMetadataMatchHandValues) {
  TempDir dir;
  // F32 sizes 24, 24, 8, 24, 8, 8 bytes with limit 40: [a] [b c] [d e f]
  StateDict sd = {{"a", at::ones({6})}, {"b", at::ones({6}) * 2}, {"c", at::ones({2}) * 3},
                  {"d", at::ones({6}) * 4}, {"e", at::ones({2}) * 5}, {"f", at::ones({2}) * 6}};
  SaveOptions o;
  o.max_shard_size = std::string("0.04KB");
  o.weights_name = "diffusion_pytorch_model";
  auto r = SaveSharded(sd, dir.str(), o);
  ASSERT_OK(r);
  std::vector<std::string> want = {"diffusion_pytorch_model-00001-of-00003.safetensors",
                                   "diffusion_pytorch_model-00002-of-00003.safetensors",
                                   "diffusion_pytorch_model-00003-of-00003.safetensors"};
  EXPECT_EQ(r->files, want);
  EXPECT_EQ(r->index_file, "diffusion_pytorch_model.safetensors.index.json");
  auto idx = ReadJson(dir.str() + "/" + r->index_file);
  EXPECT_EQ(idx["metadata"]["total_size"], 96);
  nlohmann::json wm = {{"a", want[0]}, {"b", want[1]}, {"c", want[1]}, {"d", want[2]}, {"e", want[2]}, {"f", want[2]}};
  EXPECT_EQ(idx["weight_map"], wm);
  for (const auto& f : want) {
    auto h = safetensors::ReadMetadata(dir.str() + "/" + f);
    ASSERT_OK(h);
    EXPECT_EQ(h->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  }
  auto ck = LoadCheckpoint(dir.str(), {}, {});
  ASSERT_OK(ck);
  ASSERT_EQ(ck->tensors.size(), 6u);
  for (auto& [n, t] : ck->tensors) {
    for (auto& [n2, t2] : sd)
      if (n == n2) {
        EXPECT_TRUE(at::equal(t, t2)) << n;
      }
  }
}

TEST(SaveSharded, TiedTensorsStoredOnceAndRestored) {
  TempDir dir;
  at::Tensor shared = at::arange(12, at::kFloat);
  StateDict sd = {{"embed.weight", shared}, {"lm_head.weight", shared}, {"bias", at::zeros({3})}};
  SaveOptions o;
  o.variant = "fp16";
  auto r = SaveSharded(sd, dir.str(), o);
  ASSERT_OK(r);
  EXPECT_EQ(r->files, std::vector<std::string>{"model.fp16.safetensors"});
  EXPECT_EQ(r->total_size, 48u + 12u);
  EXPECT_EQ(r->aliases, (std::map<std::string, std::string>{{"lm_head.weight", "embed.weight"}}));
  auto h = safetensors::ReadMetadata(dir.str() + "/model.fp16.safetensors");
  ASSERT_OK(h);
  EXPECT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->metadata.at("lm_head.weight"), "embed.weight");
  ResolveOptions ro;
  ro.variant = "fp16";
  auto ck = LoadCheckpoint(dir.str(), ro, {});
  ASSERT_OK(ck);
  std::map<std::string, at::Tensor> m(ck->tensors.begin(), ck->tensors.end());
  ASSERT_TRUE(m.count("lm_head.weight"));
  EXPECT_EQ(m["lm_head.weight"].data_ptr(), m["embed.weight"].data_ptr());
  // Overlapping but different views are refused.
  StateDict bad = {{"x", shared}, {"y", shared.narrow(0, 2, 4)}};
  auto b = SaveSharded(bad, dir.str() + "/bad", {});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().reason(), "SharedTensorOverlap");
}

// B27: saving over a folder with another variant and an old sharded save.
TEST(FieldFailures, B27_SaveRemovesOnlyStaleFilesOfSameVariant) {
  TempDir dir;
  const std::string d = dir.str();
  StateDict big = {{"a", at::ones({100})}, {"b", at::ones({100})}, {"c", at::ones({100})}};
  SaveOptions three;
  three.max_shard_size = uint64_t{400};
  ASSERT_OK(SaveSharded(big, d, three));
  SaveOptions ema;
  ema.variant = "ema";
  ema.max_shard_size = uint64_t{400};
  StateDict two = {{"a", at::ones({100}) * 7}, {"b", at::ones({100}) * 8}};
  auto er = SaveSharded(two, d, ema);
  ASSERT_OK(er);
  EXPECT_EQ(er->index_file, "model.safetensors.index.ema.json");
  std::vector<std::string> ema_files = {"model.safetensors.index.ema.json", "model.ema-00001-of-00002.safetensors",
                                        "model.ema-00002-of-00002.safetensors"};
  std::map<std::string, std::string> before;
  for (const auto& f : ema_files) {
    auto bytes = testing::ReadFileBytes(d + "/" + f);
    before[f] = testing::Sha256Hex(bytes.data(), bytes.size());
  }
  testing::WriteFileBytes(d + "/notes.txt", std::string("keep me"));
  testing::WriteFileBytes(d + "/model.safetensors.bak", std::string("keep me too"));
  ASSERT_TRUE(fs::exists(d + "/model.safetensors.index.json"));
  ASSERT_TRUE(fs::exists(d + "/model-00003-of-00003.safetensors"));
  // Now one file.
  auto r = SaveSharded(big, d, SaveOptions{});
  ASSERT_OK(r);
  EXPECT_EQ(r->files, std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(fs::exists(d + "/model.safetensors"));
  for (const char* gone : {"model.safetensors.index.json", "model-00001-of-00003.safetensors",
                           "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"})
    EXPECT_FALSE(fs::exists(d + "/" + gone)) << gone;
  EXPECT_EQ(r->removed_stale.size(), 4u);
  for (const auto& f : ema_files) {
    auto bytes = testing::ReadFileBytes(d + "/" + f);
    EXPECT_EQ(testing::Sha256Hex(bytes.data(), bytes.size()), before[f]) << f;
  }
  EXPECT_TRUE(fs::exists(d + "/notes.txt"));
  EXPECT_TRUE(fs::exists(d + "/model.safetensors.bak"));
  for (const auto& e : fs::directory_iterator(d))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  auto plain = LoadCheckpoint(d, {}, {});
  ASSERT_OK(plain);
  EXPECT_EQ(plain->files.size(), 1u);
  EXPECT_EQ(fs::path(plain->files[0]).filename(), "model.safetensors");
  ResolveOptions ro;
  ro.variant = "ema";
  auto ve = LoadCheckpoint(d, ro, {});
  ASSERT_OK(ve);
  ASSERT_EQ(ve->tensors.size(), 2u);
  EXPECT_EQ(ve->tensors[0].second[0].item<float>(), 7.0f);
}

// B27 second part: 1 MB limit with a 3 MB tensor: it gets its own shard, no other exceeds the limit.
TEST(FieldFailures, B27_OversizedTensorOwnShard) {
  TempDir dir;
  StateDict sd = {{"small1", at::zeros({100000})},          // 400 kB
                  {"huge", at::zeros({750000})},            // 3 MB
                  {"small2", at::zeros({100000})},          // 400 kB
                  {"small3", at::zeros({100000})}};         // 400 kB
  SaveOptions o;
  o.max_shard_size = std::string("1MB");
  auto r = SaveSharded(sd, dir.str(), o);
  ASSERT_OK(r);
  // By hand: small1 opens; huge > 1MB -> shard 1 = [huge]; small2 fits (800k); small3 would be
  // 1.2MB -> close [small1, small2] as shard 2; shard 3 = [small3].
  ASSERT_EQ(r->files.size(), 3u);
  auto idx = ReadJson(dir.str() + "/model.safetensors.index.json");
  EXPECT_EQ(idx["weight_map"]["huge"], "model-00001-of-00003.safetensors");
  EXPECT_EQ(idx["weight_map"]["small1"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(idx["weight_map"]["small2"], "model-00002-of-00003.safetensors");
  EXPECT_EQ(idx["weight_map"]["small3"], "model-00003-of-00003.safetensors");
  for (const auto& f : r->files) {
    auto h = safetensors::ReadMetadata(dir.str() + "/" + f);
    ASSERT_OK(h);
    if (f != "model-00001-of-00003.safetensors") {
      EXPECT_LE(h->data_size(), 1000000u) << f;
    }
  }
}

// B23 on a real local folder: nothing is loaded when a shard is missing.
TEST(FieldFailures, B23_LoadCheckpointMissingShard) {
  TempDir dir;
  StateDict sd = {{"a.weight", at::ones({4})}, {"b.weight", at::ones({4})}};
  SaveOptions o;
  o.max_shard_size = uint64_t{16};
  ASSERT_OK(SaveSharded(sd, dir.str(), o));
  fs::remove(dir.path() / "model-00002-of-00002.safetensors");
  auto ck = LoadCheckpoint(dir.str(), {}, {});
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().reason(), "MissingShards");
  EXPECT_NE(ck.status().message().find("model-00002-of-00002.safetensors"), std::string::npos);
}

// A `.bin` that is not a torch checkpoint (4 bytes of a zip signature, no central
// directory) is a format error naming the file; nothing is unpickled.
TEST(LoadCheckpoint, TruncatedPickleZipIsInvalidFormatNamingTheFile) {
  TempDir dir;
  testing::WriteFileBytes(dir.path() / "pytorch_model.bin", std::string("PK\x03\x04"));
  auto ck = LoadCheckpoint(dir.str(), {}, {});
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), Code::kInvalidFormat) << ck.status().ToString();
  EXPECT_NE(ck.status().message().find("pytorch_model.bin"), std::string::npos) << ck.status().ToString();
}

}  // namespace
}  // namespace hubload

namespace hubload {
namespace {

// $HUBLOAD_BIN, else the CLI next to this build's tests (build/tools/hubload/hubload):
// ctest's ENVIRONMENT list from hubload_add_test currently keeps only its first entry.
std::string Cli() {
  const char* env = std::getenv("HUBLOAD_BIN");
  if (env && *env) return env;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  fs::path guess = self.parent_path().parent_path().parent_path() / "tools" / "hubload" / "hubload";
  if (!ec && fs::exists(guess, ec)) return guess.string();
  return testing::HubloadBin();
}

// CLI: reshard a real 10-dtype file into small shards, then `load --json` it back; every
// value is checked against the source file's raw bytes.
TEST(Cli, ReshardThenLoadJsonMatchesRawBytes) {
  auto root = testing::SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data not present";
  auto src = root / "safetensors" / "run-ai__runai-model-streamer__test.safetensors";
  auto expected = DecodeRaw(src);
  TempDir dir;
  std::string out, err;
  int rc = testing::RunCommand(Cli() + " reshard '" + src.string() + "' '" + dir.str() +
                                   "/out' --max-shard-size 100 --weights-name model",
                               &out, &err);
  ASSERT_EQ(rc, 0) << out << err;
  EXPECT_TRUE(fs::exists(dir.path() / "out" / "model.safetensors.index.json")) << out;
  rc = testing::RunCommand(Cli() + " load '" + dir.str() + "/out' --json", &out, &err);
  ASSERT_EQ(rc, 0) << out << err;
  auto j = nlohmann::json::parse(out);
  EXPECT_GT(j["files"].size(), 1u);
  ASSERT_EQ(j["tensors"].size(), expected.size());
  auto by_name = testing::TensorsByName(j);
  for (auto& [name, e] : expected) {
    SCOPED_TRACE(name);
    auto& t = by_name[name];
    EXPECT_EQ(t["dtype"], e.dtype);
    EXPECT_EQ(t["shape"].get<std::vector<int64_t>>(), e.shape);
    EXPECT_DOUBLE_EQ(t["sum"].get<double>(), e.sum);
    EXPECT_EQ(t["sha256"], e.sha256);
  }
  EXPECT_TRUE(j["timings"].contains("load_s"));
  // Bad input: a clear one-line error, exit 1.
  rc = testing::RunCommand(Cli() + " load '" + dir.str() + "/nothing-here'", &out, &err);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(err.find("nothing-here"), std::string::npos) << err;
  // The one size grammar: a lowercase 'b' reads as bits and is refused, quoting the text.
  rc = testing::RunCommand(Cli() + " reshard '" + src.string() + "' '" + dir.str() +
                               "/x' --max-shard-size 5Gb",
                           &out, &err);
  EXPECT_EQ(rc, 2);  // a usage error (the option's value is refused before anything runs)
  EXPECT_NE(err.find("'5Gb'"), std::string::npos) << err;
  EXPECT_NE(err.find("bits"), std::string::npos) << err;
}

TEST(Cli, LoadDtypeAndKeepInFp32) {
  TempDir dir;
  StateDict sd = {{"a.norm.weight", at::full({4}, 1.5)}, {"a.proj.weight", at::full({4}, 2.5)}};
  ASSERT_OK(SaveSharded(sd, dir.str(), {}));
  std::string out, err;
  int rc = testing::RunCommand(
      Cli() + " load '" + dir.str() + "' --dtype bf16 --keep-in-fp32 norm --json", &out, &err);
  ASSERT_EQ(rc, 0) << out << err;
  auto j = testing::TensorsByName(nlohmann::json::parse(out));
  EXPECT_EQ(j["a.norm.weight"]["dtype"], "F32");
  EXPECT_EQ(j["a.norm.weight"]["source_dtype"], "F32");
  EXPECT_EQ(j["a.proj.weight"]["dtype"], "BF16");
  EXPECT_EQ(j["a.proj.weight"]["bytes"], 8);
  EXPECT_EQ(j["a.proj.weight"]["sum"], 10.0);
  uint16_t bf[4] = {0x4020, 0x4020, 0x4020, 0x4020};  // 2.5 in bfloat16
  EXPECT_EQ(j["a.proj.weight"]["sha256"], testing::Sha256Hex(bf, 8));
}

}  // namespace
}  // namespace hubload
