// The load dtype policy (hubload/dtype_policy.h): the table typed in here from
// the documented rules (B30, B32, LibTorch 1.13's dtypes), and the conversion
// list a load report shows, counted by hand.
#include "hubload/dtype_policy.h"

#include <gtest/gtest.h>

#include "hubload/safetensors.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
using safetensors::Dtype;

Dtype Loaded(Dtype d, TargetDtype t, const std::string& name = "x", std::vector<std::string> keep = {}) {
  LoadOptions o;
  o.dtype = t;
  o.keep_in_fp32 = std::move(keep);
  auto r = LoadedSafetensorsDtype(d, name, o);
  EXPECT_OK(r);
  return r.ok() ? *r : Dtype::BOOL;
}

TEST(DtypePolicy, TableUnderAutoAndTargets) {
  // Stored as is under auto.
  for (Dtype d : {Dtype::BOOL, Dtype::U8, Dtype::I8, Dtype::I16, Dtype::I32, Dtype::I64, Dtype::F16, Dtype::BF16,
                  Dtype::F32, Dtype::F64, Dtype::C64})
    EXPECT_EQ(Loaded(d, TargetDtype::kAuto), d) << safetensors::DtypeName(d);
  // Widened: LibTorch 1.13 has no uint16/32/64.
  EXPECT_EQ(Loaded(Dtype::U16, TargetDtype::kAuto), Dtype::I32);
  EXPECT_EQ(Loaded(Dtype::U32, TargetDtype::kAuto), Dtype::I64);
  EXPECT_EQ(Loaded(Dtype::U64, TargetDtype::kAuto), Dtype::I64);
  // float8 decoded exactly to bf16 under auto, to the target otherwise.
  for (Dtype d : {Dtype::F8_E4M3, Dtype::F8_E5M2, Dtype::F8_E8M0}) {
    EXPECT_EQ(Loaded(d, TargetDtype::kAuto), Dtype::BF16);
    EXPECT_EQ(Loaded(d, TargetDtype::kF16), Dtype::F16);
    EXPECT_EQ(Loaded(d, TargetDtype::kAuto, "a.norm.w", {"norm"}), Dtype::F32);  // keep_in_fp32 decodes to f32
  }
  // Targets apply to floating tensors only.
  EXPECT_EQ(Loaded(Dtype::BF16, TargetDtype::kF32), Dtype::F32);
  EXPECT_EQ(Loaded(Dtype::F64, TargetDtype::kBF16), Dtype::BF16);
  EXPECT_EQ(Loaded(Dtype::I64, TargetDtype::kF16), Dtype::I64);
  EXPECT_EQ(Loaded(Dtype::U16, TargetDtype::kF16), Dtype::I32);
  EXPECT_EQ(Loaded(Dtype::C64, TargetDtype::kF16), Dtype::C64);
  // keep_in_fp32: whole dot-separated components, only when converting.
  EXPECT_EQ(Loaded(Dtype::BF16, TargetDtype::kF16, "layers.0.norm.weight", {"norm"}), Dtype::F32);
  EXPECT_EQ(Loaded(Dtype::BF16, TargetDtype::kF16, "final_norm.weight", {"norm"}), Dtype::F16);
  EXPECT_EQ(Loaded(Dtype::BF16, TargetDtype::kAuto, "layers.0.norm.weight", {"norm"}), Dtype::BF16);
  // Not loadable: named.
  for (Dtype d : {Dtype::F4, Dtype::F6_E2M3, Dtype::F6_E3M2, Dtype::F8_E4M3FNUZ, Dtype::F8_E5M2FNUZ}) {
    auto r = LoadedSafetensorsDtype(d, "w.q", {});
    ASSERT_FALSE(r.ok()) << safetensors::DtypeName(d);
    EXPECT_EQ(r.status().code(), Code::kUnsupported);
    EXPECT_EQ(r.status().reason(), "UnsupportedDtype");
    EXPECT_NE(r.status().message().find("'w.q'"), std::string::npos);
    EXPECT_NE(r.status().message().find(safetensors::DtypeName(d)), std::string::npos);
  }
}

safetensors::Header HeaderOf(std::vector<std::pair<std::string, Dtype>> tensors) {
  safetensors::Header h;
  for (auto& [name, d] : tensors) {
    safetensors::TensorInfo t;
    t.name = name;
    t.dtype = d;
    t.shape = {2};
    h.tensors.push_back(t);
  }
  return h;
}

TEST(DtypeConversions, CountedPerConversionAcrossShards) {
  auto a = HeaderOf({{"ids", Dtype::U16}, {"w", Dtype::BF16}, {"scale", Dtype::F8_E8M0}, {"pos", Dtype::U16}});
  auto b = HeaderOf({{"more_ids", Dtype::U16}, {"big", Dtype::U64}, {"f4", Dtype::F4}, {"n", Dtype::I64}});
  std::vector<DtypeConversion> c;
  AddDtypeConversions(a, {}, &c);
  AddDtypeConversions(b, {}, &c);
  ASSERT_EQ(c.size(), 3u);  // U16 -> I32, F8_E8M0 -> BF16, U64 -> I64 (BF16, I64 unchanged; F4 not loadable)
  EXPECT_EQ(c[0].from, Dtype::U16);
  EXPECT_EQ(c[0].to, Dtype::I32);
  EXPECT_EQ(c[0].tensors, (std::vector<std::string>{"ids", "pos", "more_ids"}));
  EXPECT_EQ(DescribeDtypeConversion(c[0]), "3 tensors U16 -> I32 (LibTorch 1.13 has no uint16): ids, pos, more_ids");
  EXPECT_EQ(DescribeDtypeConversion(c[0], 1), "3 tensors U16 -> I32 (LibTorch 1.13 has no uint16): ids ... and 2 more");
  EXPECT_EQ(c[1].from, Dtype::F8_E8M0);
  EXPECT_EQ(c[1].to, Dtype::BF16);
  EXPECT_EQ(DescribeDtypeConversion(c[1]),
            "1 tensor F8_E8M0 -> BF16 (LibTorch 1.13 has no float8; decoded exactly): scale");
  EXPECT_EQ(c[2].from, Dtype::U64);
  EXPECT_EQ(c[2].tensors, (std::vector<std::string>{"big"}));

  // A target dtype: one entry per (from, to, why); keep_in_fp32 has its own.
  std::vector<DtypeConversion> t;
  LoadOptions o;
  o.dtype = TargetDtype::kF16;
  o.keep_in_fp32 = {"norm"};
  AddDtypeConversions(
      HeaderOf(
          {{"a.w", Dtype::BF16}, {"b.w", Dtype::BF16}, {"a.norm", Dtype::BF16}, {"c", Dtype::F32}, {"d", Dtype::F16}}),
      o, &t);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(DescribeDtypeConversion(t[0]), "2 tensors BF16 -> F16 (target dtype F16): a.w, b.w");
  EXPECT_EQ(DescribeDtypeConversion(t[1]), "1 tensor BF16 -> F32 (keep_in_fp32): a.norm");
  EXPECT_EQ(DescribeDtypeConversion(t[2]), "1 tensor F32 -> F16 (target dtype F16): c");
  // Nothing to say when nothing changes.
  std::vector<DtypeConversion> none;
  AddDtypeConversions(HeaderOf({{"x", Dtype::BF16}, {"y", Dtype::I8}}), {}, &none);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace hubload
