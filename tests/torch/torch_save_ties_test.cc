// Field failure B51: saving aliased, tied or non-contiguous tensors. Every
// save also runs with a tiny max_shard_size so the split logic runs. Expected
// bytes are the tensors' own (`t.contiguous()` as LibTorch lays it out),
// read back from the files' data sections, not through the loader.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hubload/safetensors.h"
#include "hubload/pipeline.h"
#include "hubload/torch_loader.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;

// name -> (file, tensor info) over every .safetensors file in `dir`.
struct Stored {
  std::string file;
  safetensors::TensorInfo info;
  uint64_t data_start = 0;
};
std::map<std::string, Stored> StoredTensors(const std::string& dir) {
  std::map<std::string, Stored> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    auto h = safetensors::ReadMetadata(e.path().string());
    EXPECT_OK(h);
    if (!h.ok()) continue;
    for (const auto& t : h->tensors) {
      EXPECT_EQ(out.count(t.name), 0u) << t.name << " is written twice";
      out[t.name] = Stored{e.path().string(), t, h->data_start};
    }
  }
  return out;
}

std::string StoredBytes(const Stored& s) {
  std::ifstream in(s.file, std::ios::binary);
  std::string b(s.info.nbytes(), '\0');
  in.seekg(static_cast<std::streamoff>(s.data_start + s.info.begin));
  in.read(b.data(), static_cast<std::streamsize>(b.size()));
  return b;
}

std::string LogicalBytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

std::map<std::string, at::Tensor> Reload(const std::string& dir) {
  auto ck = LoadCheckpoint(dir, {}, {});
  EXPECT_OK(ck);
  std::map<std::string, at::Tensor> m;
  if (ck.ok())
    for (auto& [n, t] : ck->tensors) m[n] = t;
  return m;
}

// Saves twice: one file, and split with a tiny max_shard_size.
struct Saves {
  TempDir tmp;
  std::string one, split;
  Result<SaveResult> r_one = Status(Code::kInternal, "not run"), r_split = Status(Code::kInternal, "not run");
  Saves(const StateDict& sd, SaveOptions o) {
    one = (tmp.path() / "one").string();
    split = (tmp.path() / "split").string();
    r_one = SaveSharded(sd, one, o);
    o.max_shard_size = uint64_t{16};
    r_split = SaveSharded(sd, split, o);
  }
};

TEST(FieldB51, TieSpecNamesTheKeptTensorOfOneStorage) {  // (a)
  at::Tensor shared = at::arange(12, at::kFloat);
  StateDict sd = {{"embed.weight", shared}, {"lm_head.weight", shared}, {"norm", at::ones({3})}};
  SaveOptions o;
  o.tied = {{"embed.weight", "lm_head.weight"}};  // the target is NOT the alphabetically first name
  Saves s(sd, o);
  for (const auto* r : {&s.r_one, &s.r_split}) {
    ASSERT_TRUE(r->ok()) << r->status().ToString();
    EXPECT_EQ((*r)->aliases, (std::map<std::string, std::string>{{"embed.weight", "lm_head.weight"}}));
    EXPECT_TRUE((*r)->warnings.empty()) << (*r)->warnings[0];
    EXPECT_EQ((*r)->total_size, 48u + 12u);
  }
  for (const auto& dir : {s.one, s.split}) {
    auto st = StoredTensors(dir);
    EXPECT_EQ(st.count("embed.weight"), 0u);
    ASSERT_EQ(st.count("lm_head.weight"), 1u);
    EXPECT_EQ(StoredBytes(st["lm_head.weight"]), LogicalBytes(shared));
    auto m = Reload(dir);
    ASSERT_TRUE(m.count("embed.weight") && m.count("lm_head.weight"));
    EXPECT_EQ(m["embed.weight"].data_ptr(), m["lm_head.weight"].data_ptr());  // re-tied
  }
}

TEST(FieldB51, SharedStorageWithoutTieKeepsTheFirstNameAndWarns) {  // (b)
  at::Tensor shared = at::arange(6, at::kFloat);
  StateDict sd = {{"lm_head.weight", shared}, {"embed.weight", shared}};
  Saves s(sd, {});
  for (const auto* r : {&s.r_one, &s.r_split}) {
    ASSERT_TRUE(r->ok()) << r->status().ToString();
    EXPECT_EQ((*r)->aliases, (std::map<std::string, std::string>{{"lm_head.weight", "embed.weight"}}));
    ASSERT_EQ((*r)->warnings.size(), 1u);
    EXPECT_NE((*r)->warnings[0].find("'embed.weight'"), std::string::npos) << (*r)->warnings[0];
    EXPECT_NE((*r)->warnings[0].find("'lm_head.weight'"), std::string::npos) << (*r)->warnings[0];
    EXPECT_NE((*r)->warnings[0].find("no tie is declared"), std::string::npos) << (*r)->warnings[0];
  }
  for (const auto& dir : {s.one, s.split}) {
    auto st = StoredTensors(dir);
    EXPECT_EQ(st.size(), 1u);  // never both written
    ASSERT_EQ(st.count("embed.weight"), 1u);
    EXPECT_EQ(StoredBytes(st["embed.weight"]), LogicalBytes(shared));
  }
}

TEST(FieldB51, PartialOverlapIsRefusedNamingBothTensors) {  // (c)
  at::Tensor base = at::arange(8, at::kFloat);
  StateDict sd = {{"x", base.narrow(0, 0, 4)}, {"y", base.narrow(0, 2, 4)}};
  Saves s(sd, {});
  for (const auto* r : {&s.r_one, &s.r_split}) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->status().reason(), "SharedTensorOverlap");
    EXPECT_NE(r->status().message().find("'x'"), std::string::npos) << r->status().message();
    EXPECT_NE(r->status().message().find("'y'"), std::string::npos) << r->status().message();
  }
  EXPECT_FALSE(fs::exists(s.one + "/model.safetensors"));
}

TEST(FieldB51, DeclaredTieOfEqualCopiesIsWrittenOnce) {  // (d)
  at::Tensor embed = at::arange(10, at::kFloat) * 0.5;
  at::Tensor head = embed.clone();  // equal values, another storage (FSDP materialisation)
  StateDict sd = {{"embed.weight", embed}, {"lm_head.weight", head}, {"b", at::ones({2})}};
  SaveOptions o;
  o.tied = {{"lm_head.weight", "embed.weight"}};
  Saves s(sd, o);
  for (const auto* r : {&s.r_one, &s.r_split}) {
    ASSERT_TRUE(r->ok()) << r->status().ToString();
    EXPECT_EQ((*r)->aliases, (std::map<std::string, std::string>{{"lm_head.weight", "embed.weight"}}));
    EXPECT_EQ((*r)->total_size, 40u + 8u);  // counted once
  }
  for (const auto& dir : {s.one, s.split}) {
    auto st = StoredTensors(dir);
    EXPECT_EQ(st.count("lm_head.weight"), 0u);
    ASSERT_EQ(st.count("embed.weight"), 1u);
    EXPECT_EQ(StoredBytes(st["embed.weight"]), LogicalBytes(embed));
    auto m = Reload(dir);
    ASSERT_TRUE(m.count("lm_head.weight"));
    EXPECT_EQ(LogicalBytes(m["lm_head.weight"]), LogicalBytes(head));
  }
}

TEST(FieldB51, DeclaredTieWhoseValuesDivergedSavesBoth) {  // (e)
  at::Tensor embed = at::arange(4, at::kFloat);
  at::Tensor head = embed.clone();
  head[3] = 99.0f;  // trained apart: no longer tied
  StateDict sd = {{"embed.weight", embed}, {"lm_head.weight", head}};
  SaveOptions o;
  o.tied = {{"lm_head.weight", "embed.weight"}};
  Saves s(sd, o);
  for (const auto* r : {&s.r_one, &s.r_split}) {
    ASSERT_TRUE(r->ok()) << r->status().ToString();
    EXPECT_TRUE((*r)->aliases.empty());
    ASSERT_EQ((*r)->warnings.size(), 1u);
    EXPECT_NE((*r)->warnings[0].find("values differ"), std::string::npos) << (*r)->warnings[0];
    EXPECT_EQ((*r)->total_size, 32u);
  }
  for (const auto& dir : {s.one, s.split}) {
    auto m = Reload(dir);
    ASSERT_TRUE(m.count("embed.weight") && m.count("lm_head.weight"));
    EXPECT_EQ(LogicalBytes(m["embed.weight"]), LogicalBytes(embed));
    EXPECT_EQ(LogicalBytes(m["lm_head.weight"]), LogicalBytes(head));  // never dropped
    EXPECT_NE(m["embed.weight"].data_ptr(), m["lm_head.weight"].data_ptr());
  }
}

TEST(FieldB51, TransposedAndChannelsLastAreWrittenRowMajor) {  // (f)
  at::Tensor base = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor t = base.t();  // [4,3], strides (1,4)
  at::Tensor conv = at::arange(2 * 3 * 2 * 2, at::kFloat).reshape({2, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast);
  ASSERT_FALSE(t.is_contiguous());
  ASSERT_FALSE(conv.is_contiguous());
  StateDict sd = {{"t", t}, {"conv", conv}};
  Saves s(sd, {});
  for (const auto* r : {&s.r_one, &s.r_split}) ASSERT_TRUE(r->ok()) << r->status().ToString();
  // Row-major bytes of t computed by hand: t[i][j] = base[j][i] = 4*j + i.
  std::vector<float> want_t;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want_t.push_back(static_cast<float>(4 * j + i));
  const std::string want_t_bytes(reinterpret_cast<const char*>(want_t.data()), want_t.size() * 4);
  for (const auto& dir : {s.one, s.split}) {
    auto st = StoredTensors(dir);
    ASSERT_EQ(st.count("t"), 1u);
    EXPECT_EQ(st["t"].info.shape, (std::vector<uint64_t>{4, 3}));
    EXPECT_EQ(StoredBytes(st["t"]), want_t_bytes);
    ASSERT_EQ(st.count("conv"), 1u);
    EXPECT_EQ(st["conv"].info.shape, (std::vector<uint64_t>{2, 3, 2, 2}));
    std::vector<float> want_conv(24);
    for (int k = 0; k < 24; ++k) want_conv[k] = static_cast<float>(k);  // logical NCHW order of arange
    EXPECT_EQ(StoredBytes(st["conv"]), std::string(reinterpret_cast<const char*>(want_conv.data()), 96));
  }
}

TEST(FieldB51, ARowOfALargeStorageCountsAsTheRow) {  // (g)
  at::Tensor big = at::zeros({1024, 16384}, at::kFloat);  // 64 MiB
  big[7].fill_(3.0f);
  at::Tensor row = big[7];  // 64 KiB view
  StateDict sd = {{"row", row}, {"other", at::ones({16384})}};
  SaveOptions o;
  o.max_shard_size = uint64_t{100000};  // fits one row, not two
  TempDir tmp;
  auto r = SaveSharded(sd, tmp.str(), o);
  ASSERT_OK(r);
  EXPECT_EQ(r->total_size, 2u * 65536u);
  ASSERT_EQ(r->files.size(), 2u);
  auto st = StoredTensors(tmp.str());
  ASSERT_EQ(st.count("row"), 1u);
  EXPECT_EQ(st["row"].info.nbytes(), 65536u);
  EXPECT_EQ(StoredBytes(st["row"]), std::string(reinterpret_cast<const char*>(std::vector<float>(16384, 3.0f).data()),
                                                65536));
  for (const auto& f : r->files) EXPECT_LT(fs::file_size(tmp.path() / f), 70000u) << f;
  auto index = nlohmann::json::parse(std::ifstream(tmp.path() / r->index_file));
  EXPECT_EQ(index["metadata"]["total_size"], 131072);
}

TEST(FieldB51, DisjointViewsOfOneStorageShareAShardAndCountOnce) {
  at::Tensor base = at::arange(8, at::kFloat);
  StateDict sd = {{"x", base.narrow(0, 0, 4)}, {"y", base.narrow(0, 4, 4)}, {"z", at::ones({4})}};
  SaveOptions o;
  o.max_shard_size = uint64_t{16};
  TempDir tmp;
  auto r = SaveSharded(sd, tmp.str(), o);
  ASSERT_OK(r);
  EXPECT_EQ(r->total_size, 48u);
  auto st = StoredTensors(tmp.str());
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st["x"].file, st["y"].file);  // one storage, one shard
  EXPECT_NE(st["x"].file, st["z"].file);
  EXPECT_EQ(StoredBytes(st["y"]), LogicalBytes(base.narrow(0, 4, 4)));
}

}  // namespace
}  // namespace hubload
