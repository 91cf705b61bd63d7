// ReshardCheckpoint (hubload/split.h): sources are hand-built byte strings
// (JSON typed here) or real files from ../shared/data/real; the output is read
// back with the independent reader (safetensors/independent.h): every
// tensor's bytes identical, dtypes and shapes as stored, metadata kept, shards
// within the limit, the split as worked out by hand from huggingface_hub's
// split_torch_state_dict_into_shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "hubload/split.h"
#include "safetensors/independent.h"
#include "testing/json_mutate.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload {
namespace {
namespace fs = std::filesystem;
using testing::TempDir;

struct HandTensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  const std::string s = hubload::testing::PatternBytes(n, seed);
  return {s.begin(), s.end()};
}

// A safetensors file assembled here: tensors in the given order, `meta` as __metadata__ (null: none).
void WriteHand(const fs::path& p, const std::vector<HandTensor>& tensors, const nlohmann::json& meta = nullptr) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!meta.is_null()) h["__metadata__"] = meta;
  std::vector<uint8_t> data;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  auto bytes = testing::BuildFile(h.dump(), data);
  testing::WriteFileBytes(p, bytes.data(), bytes.size());
}

struct Read {
  testing::RawHeader header;
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> Data(const std::string& name) const {
    const auto& t = header.tensors.at(name);
    const uint8_t* d = bytes.data() + 8 + header.n;
    return std::vector<uint8_t>(d + t.begin, d + t.end);
  }
};
Read ReadBack(const fs::path& p) {
  Read r;
  r.bytes = testing::ReadFileBytes(p);
  r.header = testing::DecodeRaw(r.bytes);
  EXPECT_TRUE(r.header.ok) << p;
  return r;
}

// Every tensor of the output folder: name -> (file, reader). Fails on a tensor in two files.
std::map<std::string, std::pair<std::string, const Read*>> Collect(const std::map<std::string, Read>& files) {
  std::map<std::string, std::pair<std::string, const Read*>> out;
  for (const auto& [f, r] : files)
    for (const auto& [name, t] : r.header.tensors) EXPECT_TRUE(out.emplace(name, std::pair{f, &r}).second) << name;
  return out;
}

ReshardSource OneFile(const fs::path& p) { return {{p.string()}, "", "model"}; }

// The two-shard source of WriteShardedSource, as the fetch plan lists it (index order).
ReshardSource Sharded(const fs::path& d) {
  return {{(d / "model-00001-of-00002.safetensors").string(), (d / "model-00002-of-00002.safetensors").string()},
          (d / "model.safetensors.index.json").string(),
          "model"};
}

ReshardResult MustReshard(const ReshardSource& src, const fs::path& out, uint64_t max, ReshardOptions o = {}) {
  o.max_shard_size = max;
  auto r = ReshardCheckpoint(src, out.string(), o);
  EXPECT_OK(r);
  return r.ok() ? *r : ReshardResult{};
}

std::vector<HandTensor> EveryOddDtype() {
  // Sizes 8, 16, 24, 48, 8, ... in this (file) order; see the split worked out below.
  return {
      {"a.u16", "U16", {4}, Pattern(8, 1)},
      {"b.u32", "U32", {2, 2}, Pattern(16, 2)},
      {"c.u64", "U64", {3}, {0, 0, 0, 0, 0, 0, 0, 0x80, 1, 0, 0, 0, 0, 0, 0, 0xFF, 7, 0, 0, 0, 0, 0, 0, 0}},
      {"d.f8e4m3", "F8_E4M3", {6, 8}, Pattern(48, 4)},
      {"e.f8e5m2", "F8_E5M2", {8}, Pattern(8, 5)},
      {"f.f8e8m0", "F8_E8M0", {8}, Pattern(8, 6)},
      {"g.f4", "F4", {2, 8}, Pattern(8, 7)},
      {"h.bool", "BOOL", {3}, {1, 0, 1}},
      {"i.bf16", "BF16", {2}, Pattern(4, 9)},
      {"j.scalar", "I64", {}, Pattern(8, 10)},
      {"k.empty", "F32", {0, 4}, {}},
  };
}

TEST(Reshard, EveryDtypeByteForByteWithMetadataAndTheHubSplit) {
  TempDir dir;
  const auto tensors = EveryOddDtype();
  WriteHand(dir.path() / "model.safetensors", tensors, {{"version", "1.0"}, {"git_tag", "v1.45"}});
  const uint64_t limit = 40;
  auto r = MustReshard(OneFile(dir.path() / "model.safetensors"), dir.path() / "out", limit);
  // huggingface_hub's greedy split at 40 bytes, by hand, in file order:
  //  a8 b16 -> [a,b] (24); c24 would make 48 > 40: close; [c] 24; d48 > 40: own shard (before the open one);
  //  e8 -> [c,e] 32; f8 -> 40 (not > 40) [c,e,f]; g8 -> 48: close; [g] 8; h3 -> 11; i4 -> 15; j8 -> 23; k0 -> 23.
  const std::vector<std::vector<std::string>> want = {{"a.u16", "b.u32"},
                                                      {"d.f8e4m3"},
                                                      {"c.u64", "e.f8e5m2", "f.f8e8m0"},
                                                      {"g.f4", "h.bool", "i.bf16", "j.scalar", "k.empty"}};
  ASSERT_EQ(r.files.size(), want.size());
  EXPECT_EQ(r.index_file, "model.safetensors.index.json");
  EXPECT_EQ(r.total_size, 8u + 16 + 24 + 48 + 8 + 8 + 8 + 3 + 4 + 8 + 0);
  std::map<std::string, Read> out;
  for (size_t i = 0; i < want.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, want.size());
    EXPECT_EQ(r.files[i], name);
    out[name] = ReadBack(dir.path() / "out" / name);
    std::vector<std::string> got;
    uint64_t data = 0;
    for (const auto& [n, t] : out[name].header.tensors) {
      got.push_back(n);
      data += t.end - t.begin;
    }
    auto expect = want[i];
    std::sort(expect.begin(), expect.end());
    EXPECT_EQ(got, expect) << name;
    EXPECT_TRUE(data <= limit || got.size() == 1) << name << " holds " << data << " bytes";
    // The source __metadata__, plus format=pt.
    EXPECT_EQ(out[name].header.metadata,
              (std::map<std::string, std::string>{{"version", "1.0"}, {"git_tag", "v1.45"}, {"format", "pt"}}));
  }
  auto all = Collect(out);
  ASSERT_EQ(all.size(), tensors.size());
  for (const auto& t : tensors) {
    SCOPED_TRACE(t.name);
    const auto& [file, read] = all.at(t.name);
    EXPECT_EQ(read->header.tensors.at(t.name).dtype, t.dtype);
    EXPECT_EQ(read->header.tensors.at(t.name).shape, t.shape);
    EXPECT_EQ(read->Data(t.name), t.bytes);
  }
  // The index: total_size, the single-file source's metadata (so aliases still restore), weight_map.
  auto index = nlohmann::json::parse(testing::ReadFileBytes(dir.path() / "out" / r.index_file));
  EXPECT_EQ(index["metadata"]["total_size"], r.total_size);
  EXPECT_EQ(index["metadata"]["version"], "1.0");
  EXPECT_EQ(index["metadata"]["git_tag"], "v1.45");
  EXPECT_FALSE(index["metadata"].contains("format"));
  ASSERT_EQ(index["weight_map"].size(), tensors.size());
  for (const auto& t : tensors) EXPECT_EQ(index["weight_map"][t.name], all.at(t.name).first);
}

// Two shards and an index whose metadata holds a non-string value.
void WriteShardedSource(const fs::path& d, const nlohmann::json& meta0, const nlohmann::json& meta1) {
  WriteHand(d / "model-00001-of-00002.safetensors",
            {{"x.w", "BF16", {2, 2}, Pattern(8, 11)}, {"x.ids", "U32", {1}, Pattern(4, 12)}}, meta0);
  WriteHand(d / "model-00002-of-00002.safetensors", {{"y.w", "F8_E4M3", {5}, Pattern(5, 13)}}, meta1);
  nlohmann::json idx = {{"metadata", {{"total_size", 17}, {"quant", {{"bits", 4}}}, {"note", "kept"}}},
                        {"weight_map",
                         {{"x.w", "model-00001-of-00002.safetensors"},
                          {"x.ids", "model-00001-of-00002.safetensors"},
                          {"y.w", "model-00002-of-00002.safetensors"}}}};
  testing::WriteFileBytes(d / "model.safetensors.index.json", idx.dump());
}

TEST(Reshard, ShardedSourceToOneFileCarriesTheIndexMetadata) {
  TempDir dir;
  fs::create_directories(dir.path() / "src");
  WriteShardedSource(dir.path() / "src", {{"format", "pt"}}, {{"format", "pt"}});
  auto r = MustReshard(Sharded(dir.path() / "src"), dir.path() / "out", 1000);
  ASSERT_EQ(r.files, std::vector<std::string>{"model.safetensors"});
  EXPECT_TRUE(r.index_file.empty());
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "model.safetensors.index.json"));
  auto out = ReadBack(dir.path() / "out" / "model.safetensors");
  EXPECT_EQ(out.header.metadata,
            (std::map<std::string, std::string>{{"format", "pt"}, {"quant", R"({"bits":4})"}, {"note", "kept"}}));
  auto src1 = ReadBack(dir.path() / "src" / "model-00001-of-00002.safetensors");
  auto src2 = ReadBack(dir.path() / "src" / "model-00002-of-00002.safetensors");
  EXPECT_EQ(out.Data("x.w"), src1.Data("x.w"));
  EXPECT_EQ(out.Data("x.ids"), src1.Data("x.ids"));
  EXPECT_EQ(out.Data("y.w"), src2.Data("y.w"));
  EXPECT_EQ(out.header.tensors.at("x.ids").dtype, "U32");
  EXPECT_EQ(out.header.tensors.at("y.w").dtype, "F8_E4M3");
}

TEST(Reshard, ShardedToShardedKeepsIndexValuesAsJson) {
  TempDir dir;
  fs::create_directories(dir.path() / "src");
  WriteShardedSource(dir.path() / "src", {{"format", "pt"}, {"v", "2"}}, nullptr);
  auto r =
      MustReshard(Sharded(dir.path() / "src"), dir.path() / "out", 8);  // x.w 8 | x.ids 4 + y.w 5 = 9 > 8 -> 3 files
  ASSERT_EQ(r.files.size(), 3u);
  auto index = nlohmann::json::parse(testing::ReadFileBytes(dir.path() / "out" / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 17);
  EXPECT_EQ(index["metadata"]["quant"], (nlohmann::json{{"bits", 4}}));  // an object, not a string
  EXPECT_EQ(index["metadata"]["note"], "kept");
  for (const auto& f : r.files)  // the union of the shards' __metadata__ in every file
    EXPECT_EQ(ReadBack(dir.path() / "out" / f).header.metadata,
              (std::map<std::string, std::string>{{"format", "pt"}, {"v", "2"}}));
}

TEST(Reshard, MetadataConflictNamesTheKeyAndBothFiles) {
  TempDir dir;
  fs::create_directories(dir.path() / "src");
  WriteShardedSource(dir.path() / "src", {{"version", "1"}}, {{"version", "2"}});
  auto r = ReshardCheckpoint(Sharded(dir.path() / "src"), (dir.path() / "out").string(), {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidFormat);
  EXPECT_EQ(r.status().reason(), "MetadataConflict");
  const std::string m = r.status().message();
  EXPECT_NE(m.find("'version'"), std::string::npos) << m;
  EXPECT_NE(m.find("model-00001-of-00002.safetensors"), std::string::npos) << m;
  EXPECT_NE(m.find("model-00002-of-00002.safetensors"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(dir.path() / "out" / "model.safetensors"));
}

TEST(Reshard, InPlaceReplacesTheShardsAndRemovesStaleOnes) {
  TempDir dir;
  fs::create_directories(dir.path() / "m");
  WriteShardedSource(dir.path() / "m", nullptr, nullptr);
  auto before1 = ReadBack(dir.path() / "m" / "model-00001-of-00002.safetensors");
  auto before2 = ReadBack(dir.path() / "m" / "model-00002-of-00002.safetensors");
  testing::WriteFileBytes(dir.path() / "m" / "model.fp16.safetensors", std::string("other variant, untouched"));
  auto r = MustReshard(Sharded(dir.path() / "m"), dir.path() / "m", 1000);
  EXPECT_EQ(r.files, std::vector<std::string>{"model.safetensors"});
  std::vector<std::string> removed = r.removed_stale;
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                               "model.safetensors.index.json"}));
  EXPECT_TRUE(fs::exists(dir.path() / "m" / "model.fp16.safetensors"));
  auto out = ReadBack(dir.path() / "m" / "model.safetensors");
  EXPECT_EQ(out.Data("x.w"), before1.Data("x.w"));
  EXPECT_EQ(out.Data("y.w"), before2.Data("y.w"));
}

TEST(Reshard, FloatDtypeConvertsFloatingTensorsOnlyThroughTheConverter) {
  TempDir dir;
  WriteHand(dir.path() / "model.safetensors",
            {{"f", "BF16", {3}, Pattern(6, 1)}, {"u", "U16", {3}, Pattern(6, 2)}, {"g", "F32", {2}, Pattern(8, 3)}});
  std::vector<std::string> asked;
  ReshardOptions o;
  o.float_dtype = safetensors::Dtype::F32;
  o.convert = [&](const safetensors::SafetensorsFile&, const safetensors::TensorInfo& info,
                  safetensors::Dtype to) -> Result<ConvertedTensorBytes> {
    asked.push_back(info.name + "->" + safetensors::DtypeName(to));
    auto bytes = std::make_shared<std::vector<uint8_t>>(info.num_elements() * 4, 0xAB);
    ConvertedTensorBytes c;
    c.data = bytes->data();
    c.nbytes = bytes->size();
    c.owner = bytes;
    return c;
  };
  auto r = MustReshard(OneFile(dir.path() / "model.safetensors"), dir.path() / "out", 1000, o);
  EXPECT_EQ(asked, std::vector<std::string>{"f->F32"});  // F32 is already F32, U16 is not floating
  auto out = ReadBack(dir.path() / "out" / "model.safetensors");
  EXPECT_EQ(out.header.tensors.at("f").dtype, "F32");
  EXPECT_EQ(out.Data("f"), std::vector<uint8_t>(12, 0xAB));
  EXPECT_EQ(out.header.tensors.at("u").dtype, "U16");
  EXPECT_EQ(out.Data("u"), Pattern(6, 2));
  EXPECT_EQ(out.Data("g"), Pattern(8, 3));

  // A floating dtype no converter reaches is named; a float_dtype without a converter is refused.
  WriteHand(dir.path() / "f4.safetensors", {{"q.f4", "F4", {4}, Pattern(2, 4)}});
  auto bad = ReshardCheckpoint(OneFile(dir.path() / "f4.safetensors"), (dir.path() / "out2").string(), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kUnsupported);
  EXPECT_NE(bad.status().message().find("'q.f4'"), std::string::npos) << bad.status().message();
  o.convert = nullptr;
  EXPECT_EQ(
      ReshardCheckpoint(OneFile(dir.path() / "model.safetensors"), (dir.path() / "out3").string(), o).status().code(),
      Code::kInvalidArgument);
}

TEST(Reshard, RealFilesByteForByte) {
  auto root = testing::SharedDataDir();
  if (root.empty()) GTEST_SKIP() << "shared data (../shared/data/real) not present";
  int done = 0;
  for (const auto& e : fs::directory_iterator(root / "safetensors")) {
    if (e.path().extension() != ".safetensors") continue;
    SCOPED_TRACE(e.path().filename().string());
    const Read src = ReadBack(e.path());
    TempDir dir;
    const uint64_t limit = 64 * 1024;
    auto r = MustReshard(OneFile(e.path()), dir.path(), limit);
    std::map<std::string, Read> out;
    for (const auto& f : r.files) {
      out[f] = ReadBack(dir.path() / f);
      uint64_t data = 0;
      for (const auto& [n, t] : out[f].header.tensors) data += t.end - t.begin;
      EXPECT_TRUE(data <= limit || out[f].header.tensors.size() == 1) << f;
      auto meta = src.header.metadata;
      meta.emplace("format", "pt");
      EXPECT_EQ(out[f].header.metadata, meta) << f;
    }
    auto all = Collect(out);
    ASSERT_EQ(all.size(), src.header.tensors.size());
    for (const auto& [name, t] : src.header.tensors) {
      const Read* o = all.at(name).second;
      EXPECT_EQ(o->header.tensors.at(name).dtype, t.dtype) << name;
      EXPECT_EQ(o->header.tensors.at(name).shape, t.shape) << name;
      EXPECT_EQ(o->Data(name), src.Data(name)) << name;
    }
    ++done;
  }
  EXPECT_GE(done, 10);
}

}  // namespace
}  // namespace hubload

namespace hubload {
namespace {

// ReshardOptions::on_progress: per output shard a first call at 0 and a last one with the
// shard in place; bytes are the tensor bytes (3 x 1000 bytes here, split 2 + 1 at 2000).
TEST(Reshard, ProgressCountsTensorBytesPerShard) {
  TempDir dir;
  WriteHand(dir.path() / "model.safetensors", {{"a", "U8", {1000}, Pattern(1000, 1)},
                                               {"b", "U8", {1000}, Pattern(1000, 2)},
                                               {"c", "U8", {1000}, Pattern(1000, 3)}});
  std::vector<ReshardProgress> calls;
  ReshardOptions o;
  o.on_progress = [&](const ReshardProgress& p) { calls.push_back(p); };
  auto r = MustReshard(OneFile(dir.path() / "model.safetensors"), dir.path() / "out", 2000, o);
  ASSERT_EQ(r.files.size(), 2u);
  ASSERT_FALSE(calls.empty());
  for (const auto& p : calls) {
    EXPECT_EQ(p.bytes_total, 3000u);
    EXPECT_EQ(p.files_total, 2u);
    EXPECT_LE(p.file_bytes_done, p.file_bytes_total);
  }
  for (size_t i = 1; i < calls.size(); ++i) EXPECT_GE(calls[i].bytes_done, calls[i - 1].bytes_done);
  EXPECT_EQ(calls.front().file, "model-00001-of-00002.safetensors");
  EXPECT_EQ(calls.front().bytes_done, 0u);
  EXPECT_EQ(calls.front().file_bytes_total, 2000u);  // a + b
  // The first shard's end: 2000 bytes, one file done; the run's end: all 3000, two files.
  auto first_end = std::find_if(calls.begin(), calls.end(), [](const ReshardProgress& p) { return p.files_done == 1; });
  ASSERT_NE(first_end, calls.end());
  EXPECT_EQ(first_end->bytes_done, 2000u);
  EXPECT_EQ(calls.back().file, "model-00002-of-00002.safetensors");
  EXPECT_EQ(calls.back().file_bytes_total, 1000u);  // c
  EXPECT_EQ(calls.back().bytes_done, 3000u);
  EXPECT_EQ(calls.back().files_done, 2u);
}

}  // namespace
}  // namespace hubload

namespace hubload {
namespace {

// Issue 14: the source index's metadata (which reshard reads itself) with
// every field set to every JSON type: a Status naming the index file, or an
// output whose __metadata__ carries each index value (strings as they are,
// anything else as compact JSON, total_size left out); never a throw. (The
// weight_map is ParseIndex's: SafetensorsIndex.EveryFieldOfEveryType.)
TEST(Reshard, IndexOfEveryTypeIsCarriedOrRefusedNamingTheIndex) {
  TempDir dir;
  const fs::path src = dir.path() / "src";
  fs::create_directories(src);
  WriteShardedSource(src, {{"format", "pt"}}, {{"format", "pt"}});
  const fs::path index_path = src / "model.safetensors.index.json";
  auto bytes = testing::ReadFileBytes(index_path);
  const nlohmann::json doc = nlohmann::json::parse(std::string(bytes.begin(), bytes.end()));
  int n = 0;
  // The mutated document is the index without its weight_map, put back before writing.
  nlohmann::json meta_doc = doc;
  meta_doc.erase("weight_map");
  auto reshard = [&](const nlohmann::json& m) -> Status {
    nlohmann::json j = m;
    if (j.is_object()) j["weight_map"] = doc["weight_map"];
    testing::WriteFileBytes(index_path, j.dump());
    const fs::path out = dir.path() / ("out" + std::to_string(n++));
    ReshardOptions o;
    o.max_shard_size = 1000;
    auto r = ReshardCheckpoint(Sharded(src), out.string(), o);
    if (!r.ok()) return r.status();
    // The expected __metadata__, worked out from `j` and the shards' {"format": "pt"}.
    std::map<std::string, std::string> want = {{"format", "pt"}};
    if (j.is_object() && j.contains("metadata") && j["metadata"].is_object())
      for (auto it = j["metadata"].begin(); it != j["metadata"].end(); ++it)
        if (it.key() != "total_size") want[it.key()] = it->is_string() ? it->get<std::string>() : it->dump();
    EXPECT_EQ(ReadBack(out / "model.safetensors").header.metadata, want) << j.dump();
    fs::remove_all(out);
    return r.status();
  };
  ASSERT_OK(reshard(meta_doc));
  int runs = testing::MutateEveryField(
      meta_doc, reshard,
      {{"/metadata", nlohmann::json::value_t::object, false},
       {"/metadata/total_size", nlohmann::json::value_t::number_unsigned, false}},
      index_path.string(), /*jsonin_paths=*/false);
  EXPECT_GT(runs, 50);
}

}  // namespace
}  // namespace hubload
