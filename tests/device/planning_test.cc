// Device-map planning cases (PlanDeviceMap): tiny models whose sizes make the
// expected map obvious; every expectation below is worked out by hand in the
// comment next to it (accelerate's infer_auto_device_map / get_balanced_memory
// rules as documented in device.h).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hubload/device.h"
#include "hubload/reasons.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

using Kind = Device::Kind;
using Strategy = DeviceMapOptions::Strategy;
using Map = std::vector<std::pair<std::string, Device>>;

const Device kCpu{Kind::kCpu, 0};
const Device kDisk{Kind::kDisk, 0};
const Device kGpu0{Kind::kCuda, 0};
const Device kGpu1{Kind::kCuda, 1};
const Device kGpu2{Kind::kCuda, 2};

DeviceMapOptions Opts(Strategy s, std::map<std::string, uint64_t> max_memory = {},
                      std::vector<std::string> no_split = {}) {
  DeviceMapOptions o;
  o.strategy = s;
  o.max_memory = std::move(max_memory);
  o.no_split_modules = std::move(no_split);
  return o;
}

std::string Show(const Map& m) {
  std::string s = "{";
  for (const auto& [k, d] : m) s += "\"" + k + "\": " + d.ToString() + ", ";
  return s + "}";
}

void ExpectMap(const DeviceMapPlan& plan, const Map& expected) {
  EXPECT_EQ(Show(plan.device_map), Show(expected));
}

// embed 40 | layers.0 30 | layers.1 30 | layers.2 30 | head 20  (total 150)
std::vector<TensorFootprint> FiveTensors() {
  return {{"embed.weight", 40}, {"layers.0.w", 30}, {"layers.1.w", 30}, {"layers.2.w", 30}, {"head.weight", 20}};
}

TEST(PlanDeviceMap, WholeModelOnOneGpuIsTheEmptyPrefix) {
  // 10 + 10 + 30 = 50 <= 100: everything on cuda:0, one entry "" (accelerate returns {"": 0}).
  std::vector<TensorFootprint> t = {{"a.w", 10}, {"a.b", 10}, {"b.w", 30}};
  for (Strategy s : {Strategy::kSequential, Strategy::kAuto, Strategy::kBalanced, Strategy::kBalancedLow0}) {
    auto plan = PlanDeviceMap(t, Opts(s), {100});
    ASSERT_OK(plan) << StrategyName(s) << ": " << plan.status().ToString();
    ExpectMap(*plan, {{"", kGpu0}});
    EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:0", 50}}));
    EXPECT_EQ(plan->DeviceOf("b.w"), kGpu0);
  }
}

TEST(PlanDeviceMap, SequentialFillsEachGpuThenCpu) {
  // GPUs of 60 bytes. embed (40) -> cuda:0, 20 left. layers (90) splits; layers.0 (30) splits into its
  // tensor, which does not fit the 20 left -> cuda:1 (30); layers.1 -> cuda:1 (60, full);
  // layers.2 -> cpu; head -> cpu (cuda:0 is never revisited).
  auto plan = PlanDeviceMap(FiveTensors(), Opts(Strategy::kSequential), {60, 60});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"embed", kGpu0}, {"layers.0", kGpu1}, {"layers.1", kGpu1}, {"layers.2", kCpu}, {"head", kCpu}});
  EXPECT_EQ(plan->bytes_per_device,
            (std::map<std::string, uint64_t>{{"cuda:0", 40}, {"cuda:1", 60}, {"cpu", 50}}));
  EXPECT_EQ(plan->DeviceOf("layers.2.w"), kCpu);
  EXPECT_EQ(plan->DeviceOf("layers.1.w"), kGpu1);
  EXPECT_EQ(plan->DeviceOf("embed.weight"), kGpu0);
}

// embed 40 | layers.0.{a,b} 15+15 | layers.1.{a,b} 15+15 | head 20  (total 120)
std::vector<TensorFootprint> TwoBlockModel() {
  return {{"embed.weight", 40}, {"layers.0.a.weight", 15}, {"layers.0.b.weight", 15},
          {"layers.1.a.weight", 15},   {"layers.1.b.weight", 15}, {"head.weight", 20}};
}

TEST(PlanDeviceMap, ModulesAreSplitWhenAllowed) {
  // GPUs of 60. embed 40 -> cuda:0 (20 left). layers (60) and layers.0 (30) split;
  // layers.0.a (15) -> cuda:0 (55); layers.0.b (15 > 5) -> cuda:1 (15); layers.1 (30) -> cuda:1 (45);
  // head (20 > 15) -> cpu.
  auto plan = PlanDeviceMap(TwoBlockModel(), Opts(Strategy::kSequential), {60, 60});
  ASSERT_OK(plan);
  ExpectMap(*plan,
            {{"embed", kGpu0}, {"layers.0.a", kGpu0}, {"layers.0.b", kGpu1}, {"layers.1", kGpu1}, {"head", kCpu}});
  EXPECT_EQ(plan->bytes_per_device,
            (std::map<std::string, uint64_t>{{"cuda:0", 55}, {"cuda:1", 45}, {"cpu", 20}}));
}

TEST(PlanDeviceMap, NoSplitModulesMoveWhole) {
  // Same model, "layers.*" must not be split: layers.0 (30 > 20 left) moves whole to cuda:1,
  // layers.1 joins it (60); head -> cpu. All of "layers" is on cuda:1: one entry.
  auto plan = PlanDeviceMap(TwoBlockModel(), Opts(Strategy::kSequential, {}, {"layers.*"}), {60, 60});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"embed", kGpu0}, {"layers", kGpu1}, {"head", kCpu}});
  EXPECT_EQ(plan->bytes_per_device,
            (std::map<std::string, uint64_t>{{"cuda:0", 40}, {"cuda:1", 60}, {"cpu", 20}}));
  EXPECT_EQ(plan->DeviceOf("layers.0.a"), kGpu1);
}

TEST(PlanDeviceMap, MaxMemoryLimitsAGpuAndIsCappedByFreeMemory) {
  // max_memory cuda:0 = 50 of 1000 free: a (30) -> cuda:0, b (30 > 20) -> cpu.
  std::vector<TensorFootprint> t = {{"a.w", 30}, {"b.w", 30}};
  auto plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cuda:0", 50}}), {1000});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"a", kGpu0}, {"b", kCpu}});
  // max_memory 100 but only 40 free: the limit is 40, a -> cuda:0, b -> cpu again.
  plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cuda:0", 100}}), {40});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"a", kGpu0}, {"b", kCpu}});
}

TEST(PlanDeviceMap, MaxMemoryListingGpusRestrictsThePlanToThem) {
  // Only cuda:1 is listed: cuda:0 is not used although it is free.
  std::vector<TensorFootprint> t = {{"a.w", 30}, {"b.w", 30}};
  auto plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cuda:1", 100}}), {100, 100});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"", kGpu1}});
  // Listing only cpu keeps every GPU (with its free memory) in the plan.
  plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cpu", 100}}), {45});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"a", kGpu0}, {"b", kCpu}});
}

TEST(PlanDeviceMap, NoGpuMeansCpu) {
  auto plan = PlanDeviceMap(FiveTensors(), Opts(Strategy::kAuto), {});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"", kCpu}});
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cpu", 150}}));
}

std::vector<TensorFootprint> Layers(int n, uint64_t bytes) {
  std::vector<TensorFootprint> t;
  for (int i = 0; i < n; ++i) t.push_back({"layers." + std::to_string(i) + ".w", bytes});
  return t;
}

TEST(PlanDeviceMap, BalancedSpreadsOverGpus) {
  // 8 layers x 10 = 80 on two GPUs of 1000. Innermost modules layers.0..7 have mean size 10,
  // buffer = floor(1.25 * 10) = 12, per-GPU cap = 80 / 2 + 12 = 52 on cuda:0 (the last GPU is not
  // capped). cuda:0 takes layers 0-4 (50), layer 5 would make 60 > 52 -> cuda:1 takes 5-7 (30).
  auto t = Layers(8, 10);
  for (Strategy s : {Strategy::kBalanced, Strategy::kAuto}) {
    auto plan = PlanDeviceMap(t, Opts(s), {1000, 1000});
    ASSERT_OK(plan);
    ExpectMap(*plan, {{"layers.0", kGpu0},
                      {"layers.1", kGpu0},
                      {"layers.2", kGpu0},
                      {"layers.3", kGpu0},
                      {"layers.4", kGpu0},
                      {"layers.5", kGpu1},
                      {"layers.6", kGpu1},
                      {"layers.7", kGpu1}});
    EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:0", 50}, {"cuda:1", 30}}));
  }
  // Sequential puts everything on cuda:0.
  auto seq = PlanDeviceMap(t, Opts(Strategy::kSequential), {1000, 1000});
  ASSERT_OK(seq);
  ExpectMap(*seq, {{"", kGpu0}});
}

TEST(PlanDeviceMap, BalancedBufferIsTheLargestNoSplitModule) {
  // embed.weight 10 | layers.0..3 (a 10 + b 30 = 40 each) = 170. Innermost modules: embed (10) and
  // layers.i (40): mean (10 + 4 * 40) / 5 = 34; largest no-split module layers.i = 40;
  // buffer = floor(1.25 * 40) = 50; cap = 170 / 2 + 50 = 135 on cuda:0.
  // cuda:0: embed (10), layers.0 (50), layers.1 (90), layers.2 (130); layers.3 would make 170 -> cuda:1.
  std::vector<TensorFootprint> t = {{"embed.weight", 10}};
  for (int i = 0; i < 4; ++i) {
    t.push_back({"layers." + std::to_string(i) + ".a.weight", 10});
    t.push_back({"layers." + std::to_string(i) + ".b.weight", 30});
  }
  auto plan = PlanDeviceMap(t, Opts(Strategy::kBalanced, {}, {"layers.*"}), {1000, 1000});
  ASSERT_OK(plan);
  ExpectMap(*plan,
            {{"embed", kGpu0}, {"layers.0", kGpu0}, {"layers.1", kGpu0}, {"layers.2", kGpu0}, {"layers.3", kGpu1}});
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:0", 130}, {"cuda:1", 40}}));
  // Without the no-split pattern the buffer is floor(1.25 * mean 34) = 42, cap 85 + 42 = 127:
  // cuda:0 takes embed, layers.0, layers.1 (90); layers.2 would make 130 > 127 so it splits:
  // layers.2.a (100) fits, layers.2.b (130) does not -> cuda:1, with layers.3.
  plan = PlanDeviceMap(t, Opts(Strategy::kBalanced), {1000, 1000});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"embed", kGpu0},
                    {"layers.0", kGpu0},
                    {"layers.1", kGpu0},
                    {"layers.2.a", kGpu0},
                    {"layers.2.b", kGpu1},
                    {"layers.3", kGpu1}});
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:0", 100}, {"cuda:1", 70}}));
}

TEST(PlanDeviceMap, BalancedLow0KeepsGpu0ForWhatDoesNotFitElsewhere) {
  // 8 layers x 10 = 80 on three GPUs of 1000: cap = 80 / 2 + 12 = 52 on cuda:1 (cuda:2, the last, keeps
  // 1000); cuda:0 gets max(0, 80 - (52 + 1000)) = 0. cuda:1 takes layers 0-4 (50), cuda:2 the rest (30).
  auto plan = PlanDeviceMap(Layers(8, 10), Opts(Strategy::kBalancedLow0), {1000, 1000, 1000});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"layers.0", kGpu1},
                    {"layers.1", kGpu1},
                    {"layers.2", kGpu1},
                    {"layers.3", kGpu1},
                    {"layers.4", kGpu1},
                    {"layers.5", kGpu2},
                    {"layers.6", kGpu2},
                    {"layers.7", kGpu2}});
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:1", 50}, {"cuda:2", 30}}));
  // When the others are small, cuda:0 takes the rest: cuda:1 = 30, cuda:2 = 30 (max_memory) leave
  // 80 - 60 = 20 for cuda:0. Order is cuda:0 first: layers 0-1 (20), then cuda:1 (2-4), cuda:2 (5-7).
  plan = PlanDeviceMap(Layers(8, 10), Opts(Strategy::kBalancedLow0, {{"cuda:0", 1000}, {"cuda:1", 30}, {"cuda:2", 30}}),
                       {1000, 1000, 1000});
  ASSERT_OK(plan);
  EXPECT_EQ(plan->bytes_per_device,
            (std::map<std::string, uint64_t>{{"cuda:0", 20}, {"cuda:1", 30}, {"cuda:2", 30}}));
  EXPECT_EQ(plan->DeviceOf("layers.1.w"), kGpu0);
  EXPECT_EQ(plan->DeviceOf("layers.2.w"), kGpu1);
  EXPECT_EQ(plan->DeviceOf("layers.7.w"), kGpu2);
}

TEST(PlanDeviceMap, DiskIsUsedOnlyWhenListed) {
  // cuda:0 50, cpu 20: a (40) -> cuda:0; b.w (30) fits neither 10 left nor cpu's 20.
  std::vector<TensorFootprint> t = {{"a.w", 40}, {"b.w", 30}};
  auto plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cpu", 20}, {"disk", 100}}), {50});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"a", kGpu0}, {"b", kDisk}});
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:0", 40}, {"disk", 30}}));
}

TEST(PlanDeviceMap, AModuleHoldingOnlyTensorsIsNeverSplit) {
  // proj.weight 30 + proj.bias 10: 25 B on cuda:0 cannot take proj (40) and proj holds only tensors,
  // so it moves whole to the cpu instead of leaving its bias on the GPU (accelerate never splits a
  // module without child modules). Top-level tensors of the root are still placed one by one.
  std::vector<TensorFootprint> t = {{"proj.bias", 10}, {"proj.weight", 30}, {"scale", 20}};
  auto plan = PlanDeviceMap(t, Opts(Strategy::kSequential), {25});
  ASSERT_OK(plan);
  EXPECT_EQ(plan->DeviceOf("proj.bias"), kCpu);
  EXPECT_EQ(plan->DeviceOf("proj.weight"), kCpu);
  EXPECT_EQ(plan->DeviceOf("scale"), kCpu);  // cuda:0 is never revisited after proj moved on
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cpu", 60}}));
  plan = PlanDeviceMap({{"scale", 20}, {"proj.bias", 10}, {"proj.weight", 30}}, Opts(Strategy::kSequential), {25});
  ASSERT_OK(plan);
  EXPECT_EQ(plan->DeviceOf("scale"), kGpu0);
  EXPECT_EQ(plan->DeviceOf("proj.weight"), kCpu);
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:0", 20}, {"cpu", 40}}));
}

TEST(PlanDeviceMap, ImpossibleFitNamesTheTensorItsSizeAndTheSpaceLeft) {
  std::vector<TensorFootprint> t = {{"a.w", 40}, {"b.w", 30}};
  auto plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cpu", 20}}), {50});
  ASSERT_FALSE(plan.ok());
  const Status& st = plan.status();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.reason(), "DoesNotFit");
  const std::string& m = st.message();
  EXPECT_NE(m.find("module (not split) 'b' (30 B)"), std::string::npos) << m;
  EXPECT_NE(m.find("cuda:0 10 B left of 50 B"), std::string::npos) << m;
  EXPECT_NE(m.find("cpu 20 B left of 20 B"), std::string::npos) << m;
  EXPECT_NE(m.find("disk"), std::string::npos) << m;
}

TEST(PlanDeviceMap, ImpossibleFitNamesTheNoSplitModule) {
  // "b" (15 + 15) must stay whole: it fits neither the 10 left on cuda:0 nor cpu's 20.
  std::vector<TensorFootprint> t = {{"a.w", 40}, {"b.x.w", 15}, {"b.y.w", 15}};
  auto plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cpu", 20}}, {"b"}), {50});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "DoesNotFit");
  EXPECT_NE(plan.status().message().find("module (not split) 'b' (30 B)"), std::string::npos)
      << plan.status().message();
  // Splittable, it still does not fit: b.x (15 > 10 left on cuda:0) -> cpu (15 of 20), then b.y
  // (15 > 5 left; a module of tensors only, so not split further) fits nowhere and is the one named.
  plan = PlanDeviceMap(t, Opts(Strategy::kSequential, {{"cpu", 20}}), {50});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("module (not split) 'b.y' (15 B)"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("cpu 5 B left of 20 B"), std::string::npos) << plan.status().message();
}

TEST(PlanDeviceMap, ExplicitMapUsesTheLongestPrefix) {
  std::vector<TensorFootprint> t = {{"text.a", 10}, {"text.b", 10}, {"textx.c", 5}, {"vae.w", 20}};
  DeviceMapOptions o = Opts(Strategy::kExplicit);
  o.explicit_map = {{"text", kGpu0}, {"", kCpu}};
  auto plan = PlanDeviceMap(t, o, {100});
  ASSERT_OK(plan);
  // "textx.c" is not under "text" (dotted prefixes): it takes "".
  ExpectMap(*plan, {{"text", kGpu0}, {"textx", kCpu}, {"vae", kCpu}});
  EXPECT_EQ(plan->bytes_per_device, (std::map<std::string, uint64_t>{{"cuda:0", 20}, {"cpu", 25}}));

  o.explicit_map = {{"", kCpu}, {"text.b", kGpu0}};
  plan = PlanDeviceMap(t, o, {100});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"text.a", kCpu}, {"text.b", kGpu0}, {"textx", kCpu}, {"vae", kCpu}});
  EXPECT_EQ(plan->DeviceOf("text.b"), kGpu0);
  EXPECT_EQ(plan->DeviceOf("text.a"), kCpu);
}

TEST(PlanDeviceMap, ExplicitMapErrors) {
  std::vector<TensorFootprint> t = {{"text.a", 10}, {"vae.w", 20}};
  DeviceMapOptions o = Opts(Strategy::kExplicit);
  o.explicit_map = {{"text", kGpu0}};
  auto plan = PlanDeviceMap(t, o, {100});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "UncoveredTensor");
  EXPECT_NE(plan.status().message().find("'vae.w'"), std::string::npos) << plan.status().message();

  o.explicit_map = {{"", kGpu1}};  // only one GPU
  plan = PlanDeviceMap(t, o, {100});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "UnknownDevice");
  EXPECT_NE(plan.status().message().find("cuda:1"), std::string::npos) << plan.status().message();

  o.explicit_map = {{"", kGpu0}};  // 30 bytes on a GPU with 25 free
  plan = PlanDeviceMap(t, o, {25});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "DoesNotFit");
  EXPECT_NE(plan.status().message().find("'vae.w' (20 B)"), std::string::npos) << plan.status().message();

  o.explicit_map = {};
  plan = PlanDeviceMap(t, o, {100});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "InvalidDeviceMap");
}

TEST(PlanDeviceMap, ExplicitEntryMatchingNoTensorIsAnError) {
  std::vector<TensorFootprint> t = {{"model.layers.0.w", 10}, {"model.layers.1.w", 10}, {"lm_head.w", 5}};
  DeviceMapOptions o = Opts(Strategy::kExplicit);
  // "model.layer.1" (typo) and "model.layers.1.w.x" (deeper than any tensor) match nothing,
  // even though "" covers every tensor: a typo is never a silent no-op.
  o.explicit_map = {{"model.layer.1", kGpu0}, {"", kCpu}, {"model.layers.1.w.x", kGpu0}};
  auto plan = PlanDeviceMap(t, o, {100});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), hubload::Code::kInvalidArgument);
  EXPECT_TRUE(plan.status().Is(hubload::reason::kDeviceMapEntryUnmatched)) << plan.status().ToString();
  const std::string m = plan.status().message();
  EXPECT_NE(m.find("'model.layer.1' -> cuda:0 (closest module: 'model.layers.1')"), std::string::npos) << m;
  EXPECT_NE(m.find("'model.layers.1.w.x' -> cuda:0"), std::string::npos) << m;
  EXPECT_EQ(m.find("''"), std::string::npos) << m;  // "" matched
  // A prefix equal to a whole tensor name, or a module, matches.
  o.explicit_map = {{"model.layers.1.w", kGpu0}, {"model", kCpu}, {"lm_head", kCpu}};
  plan = PlanDeviceMap(t, o, {100});
  ASSERT_OK(plan);
  EXPECT_EQ(plan->DeviceOf("model.layers.1.w"), kGpu0);
  EXPECT_EQ(plan->DeviceOf("model.layers.0.w"), kCpu);
  // "lm" is not a dotted prefix of "lm_head.w".
  o.explicit_map = {{"lm", kGpu0}, {"", kCpu}};
  plan = PlanDeviceMap(t, o, {100});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("'lm' -> cuda:0 (closest module: 'lm_head')"), std::string::npos)
      << plan.status().message();
}

TEST(PlanDeviceMap, BadInputs) {
  auto plan = PlanDeviceMap({{"a", 1}, {"a", 2}}, Opts(Strategy::kAuto), {10});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "DuplicateTensor");
  EXPECT_NE(plan.status().message().find("'a'"), std::string::npos);

  plan = PlanDeviceMap({{"a", 1}}, Opts(Strategy::kAuto, {{"cuda:2", 10}}), {10});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "UnknownDevice");
  EXPECT_NE(plan.status().message().find("cuda:2"), std::string::npos);

  plan = PlanDeviceMap({{"a", 1}}, Opts(Strategy::kAuto, {}, {""}), {10});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "InvalidNoSplit");

  plan = PlanDeviceMap({{".a", 1}}, Opts(Strategy::kAuto), {10});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().reason(), "InvalidTensorName");
}

TEST(PlanDeviceMap, ATensorThatIsAlsoAModuleStaysWithItsChildren) {
  // "a" is a tensor and the module of "a.b": they move together (an entry "a" covers both).
  // cuda:0 has 15: "a" (10 + 10) does not fit and cannot be split -> cpu; "c" (5) -> cpu too.
  auto plan = PlanDeviceMap({{"a", 10}, {"a.b", 10}, {"c", 5}}, Opts(Strategy::kSequential), {15});
  ASSERT_OK(plan);
  ExpectMap(*plan, {{"", kCpu}});
}

TEST(PlanDeviceMap, EmptyCheckpointGivesAnEmptyPlan) {
  auto plan = PlanDeviceMap({}, Opts(Strategy::kAuto), {10});
  ASSERT_OK(plan);
  EXPECT_TRUE(plan->device_map.empty());
  EXPECT_TRUE(plan->bytes_per_device.empty());
}

}  // namespace
}  // namespace hubload
