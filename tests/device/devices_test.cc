// Device names, memory sizes, max_memory and device_map specs (device.h part 1
// and the parsers of part 2). Expected values are computed by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>

#include "hubload/device.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {

using Kind = Device::Kind;
using Strategy = DeviceMapOptions::Strategy;

TEST(DeviceParse, AcceptsAccelerateSpellings) {
  struct Case {
    const char* text;
    Kind kind;
    int index;
    const char* canonical;
  } cases[] = {
      {"cpu", Kind::kCpu, 0, "cpu"},      {"cuda", Kind::kCuda, 0, "cuda:0"}, {"cuda:0", Kind::kCuda, 0, "cuda:0"},
      {"cuda:3", Kind::kCuda, 3, "cuda:3"}, {"7", Kind::kCuda, 7, "cuda:7"},    {"disk", Kind::kDisk, 0, "disk"},
      {" cuda:1 ", Kind::kCuda, 1, "cuda:1"},
  };
  for (const auto& c : cases) {
    auto d = Device::Parse(c.text);
    ASSERT_OK(d) << c.text << ": " << d.status().ToString();
    EXPECT_EQ(d->kind, c.kind) << c.text;
    EXPECT_EQ(d->index, c.index) << c.text;
    EXPECT_EQ(d->ToString(), c.canonical) << c.text;
  }
}

TEST(DeviceParse, RejectsOtherNamesNamingTheText) {
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "mps", "-1", "cuda:1:2", "CPU0", "1.5"}) {
    auto d = Device::Parse(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(d.status().reason(), "InvalidDevice") << bad;
    EXPECT_NE(d.status().message().find(std::string("'") + bad + "'"), std::string::npos) << d.status().message();
  }
}

TEST(DeviceParse, EqualityComparesKindAndIndex) {
  EXPECT_EQ((Device{Kind::kCuda, 1}), (Device{Kind::kCuda, 1}));
  EXPECT_NE((Device{Kind::kCuda, 1}), (Device{Kind::kCuda, 0}));
  EXPECT_NE((Device{Kind::kCpu, 0}), (Device{Kind::kDisk, 0}));
}

TEST(MemorySize, DecimalAndBinaryUnits) {
  struct Case {
    const char* text;
    uint64_t bytes;
  } cases[] = {
      {"10GB", 10'000'000'000ull},
      {"10GiB", 10ull * 1024 * 1024 * 1024},          // 10737418240
      {"1.5GB", 1'500'000'000ull},
      {"1.5GiB", 1'610'612'736ull},                   // 1.5 * 2^30
      {"0.1GB", 100'000'000ull},                      // exact, no float rounding
      {"512", 512},
      {"100B", 100},
      {"2KiB", 2048},
      {"3KB", 3000},
      {"3kB", 3000},
      {"7MB", 7'000'000},
      {"7MiB", 7ull * 1024 * 1024},
      {"1TB", 1'000'000'000'000ull},
      {"1TiB", 1'099'511'627'776ull},
      {"10gib", 10ull * 1024 * 1024 * 1024},          // binary units: any case (accelerate upper()s them)
      {" 10 GB ", 10'000'000'000ull},
      {"1.0000000001KB", 1000},                       // rounded down, as int(float * unit)
      {".5KB", 500},
      {"18446744073709551615", 18446744073709551615ull},
  };
  for (const auto& c : cases) {
    auto b = ParseMemorySize(c.text);
    ASSERT_OK(b) << c.text << ": " << b.status().ToString();
    EXPECT_EQ(*b, c.bytes) << c.text;
  }
}

TEST(MemorySize, BadTextIsAnErrorNamingIt) {
  for (const char* bad : {"", "GB", "10XB", "-1GB", "1e9", "1.2.3GB", "10Gb", "10gb", "100b", "1.5", "ten GB",
                          "18446744073709551616", "20000000000GB", "10 G B", "."}) {
    auto b = ParseMemorySize(bad);
    ASSERT_FALSE(b.ok()) << bad << " parsed as " << *b;
    EXPECT_EQ(b.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(b.status().reason(), "InvalidMemorySize") << bad;
    EXPECT_NE(b.status().message().find(std::string("'") + bad + "'"), std::string::npos) << b.status().message();
  }
  // The lowercase-b refusal says why (accelerate reads it as bits).
  auto gb = ParseMemorySize("10Gb");
  EXPECT_NE(gb.status().message().find("bits"), std::string::npos) << gb.status().message();
}

TEST(MaxMemory, OrdinalsAndNamesBecomeCanonicalKeys) {
  auto m = ParseMaxMemory("0=10GB,cpu=30GB");
  ASSERT_OK(m);
  EXPECT_EQ(*m, (std::map<std::string, uint64_t>{{"cuda:0", 10'000'000'000ull}, {"cpu", 30'000'000'000ull}}));

  m = ParseMaxMemory("cuda:1=1GiB, 2 = 512MiB ,disk=2TB");
  ASSERT_OK(m);
  EXPECT_EQ(*m, (std::map<std::string, uint64_t>{{"cuda:1", 1ull << 30},
                                                 {"cuda:2", 512ull << 20},
                                                 {"disk", 2'000'000'000'000ull}}));
}

TEST(MaxMemory, ErrorsNameTheEntry) {
  struct Case {
    const char* spec;
    const char* reason;
    const char* mentions;
  } cases[] = {
      {"", "InvalidMaxMemory", "empty"},
      {"0:10GB", "InvalidMaxMemory", "'0:10GB'"},
      {"0=10GB,cuda:0=1GB", "InvalidMaxMemory", "cuda:0 twice"},
      {"gpu=1GB", "InvalidDevice", "'gpu'"},
      {"0=lots", "InvalidMemorySize", "'lots'"},
      {"0=10GB,", "InvalidMaxMemory", "is not DEVICE=SIZE"},
  };
  for (const auto& c : cases) {
    auto m = ParseMaxMemory(c.spec);
    ASSERT_FALSE(m.ok()) << c.spec;
    EXPECT_EQ(m.status().code(), Code::kInvalidArgument) << c.spec;
    EXPECT_EQ(m.status().reason(), c.reason) << c.spec << ": " << m.status().ToString();
    EXPECT_NE(m.status().message().find(c.mentions), std::string::npos) << m.status().message();
  }
}

TEST(DeviceMapSpec, StrategiesAndExplicitMaps) {
  struct Case {
    const char* spec;
    Strategy strategy;
  } cases[] = {{"auto", Strategy::kAuto},
               {"balanced", Strategy::kBalanced},
               {"balanced_low_0", Strategy::kBalancedLow0},
               {"sequential", Strategy::kSequential}};
  for (const auto& c : cases) {
    auto o = ParseDeviceMap(c.spec);
    ASSERT_OK(o) << c.spec << ": " << o.status().ToString();
    EXPECT_EQ(o->strategy, c.strategy) << c.spec;
    EXPECT_TRUE(o->explicit_map.empty());
    EXPECT_STREQ(StrategyName(o->strategy), c.spec);
  }

  auto o = ParseDeviceMap("text_model=0, vae = cpu,unet.down=cuda:1,lm_head=disk");
  ASSERT_OK(o);
  EXPECT_EQ(o->strategy, Strategy::kExplicit);
  ASSERT_EQ(o->explicit_map.size(), 4u);
  EXPECT_EQ(o->explicit_map[0].first, "text_model");
  EXPECT_EQ(o->explicit_map[0].second, (Device{Kind::kCuda, 0}));
  EXPECT_EQ(o->explicit_map[1].first, "vae");
  EXPECT_EQ(o->explicit_map[1].second, (Device{Kind::kCpu, 0}));
  EXPECT_EQ(o->explicit_map[2].first, "unet.down");
  EXPECT_EQ(o->explicit_map[2].second, (Device{Kind::kCuda, 1}));
  EXPECT_EQ(o->explicit_map[3].second, (Device{Kind::kDisk, 0}));

  o = ParseDeviceMap("=cuda:0");  // the whole model
  ASSERT_OK(o);
  ASSERT_EQ(o->explicit_map.size(), 1u);
  EXPECT_EQ(o->explicit_map[0].first, "");
  EXPECT_EQ(o->explicit_map[0].second, (Device{Kind::kCuda, 0}));
}

TEST(DeviceMapSpec, BadSpecsAreErrors) {
  auto o = ParseDeviceMap("everywhere");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().reason(), "InvalidDeviceMap");
  EXPECT_NE(o.status().message().find("'everywhere'"), std::string::npos);
  o = ParseDeviceMap("a=gpu");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().reason(), "InvalidDevice");
  o = ParseDeviceMap("a=0,b");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().reason(), "InvalidDeviceMap");
  EXPECT_NE(o.status().message().find("'b'"), std::string::npos);
}

}  // namespace
}  // namespace hubload
