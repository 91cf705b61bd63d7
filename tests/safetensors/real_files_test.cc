// Every real safetensors file and index in the shared corpus parses, and what
// the parser reports equals (a) the facts in ../shared/data/real/MANIFEST.md and
// (b) an independent decode of the raw bytes (u64 + nlohmann JSON).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "hubload/safetensors.h"
#include "safetensors/independent.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace fs = std::filesystem;
namespace st = hubload::safetensors;
using namespace hubload::testing;

namespace {

struct ManifestFile {
  uint64_t size = 0;
  std::string sha256;
  size_t num_tensors = 0;
  std::map<std::string, int> dtype_counts;
  bool has_metadata = false;
  nlohmann::json metadata;
  int pad_spaces = -1, zero_d = -1, zero_size = -1;
};

struct ManifestIndex {
  size_t num_tensors = 0, num_shards = 0;
  uint64_t total_size = 0;
};

struct Manifest {
  std::map<std::string, ManifestFile> files;    // "safetensors/NAME" or "layouts/..." path
  std::map<std::string, ManifestIndex> indexes;  // path relative to the corpus root
};

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Text between the first `open` after `from` and the next `close`; "" if absent.
std::string Between(const std::string& s, const std::string& open, const std::string& close, size_t from = 0) {
  size_t a = s.find(open, from);
  if (a == std::string::npos) return {};
  a += open.size();
  size_t b = s.find(close, a);
  return b == std::string::npos ? std::string() : s.substr(a, b - a);
}

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Parses the per-file facts out of MANIFEST.md (format written by whoever
// gathered the corpus; independent of hubload). Plain string matching: GCC 12
// warns spuriously inside <regex> under the sanitizers.
Manifest ReadManifest(const fs::path& root) {
  Manifest m;
  std::istringstream in(Slurp(root / "MANIFEST.md"));
  std::string line, cur_file, cur_dir;
  const std::string kTimes = "\xC3\x97";  // '×' in "F32×4"
  while (std::getline(in, line)) {
    if (StartsWith(line, "### `safetensors/")) {
      cur_file = Between(line, "`", "`");
      cur_dir.clear();
      m.files[cur_file];
    } else if (StartsWith(line, "### ") && line.find("(`") != std::string::npos) {
      cur_dir = Between(line, "(`", "`)");
      cur_file.clear();
    } else if (!cur_file.empty() && StartsWith(line, "- size ")) {
      m.files[cur_file].size = std::stoull(Between(line, "- size ", " B"));
      m.files[cur_file].sha256 = Between(line, "sha256 `", "`");
    } else if (!cur_file.empty() && StartsWith(line, "- tensors: ")) {
      auto& f = m.files[cur_file];
      f.num_tensors = std::stoul(Between(line, "- tensors: ", ";"));
      std::string rest = line.substr(line.find("dtypes: ") + 8);
      std::istringstream items(rest);
      std::string item;
      while (std::getline(items, item, ',')) {
        while (!item.empty() && item.front() == ' ') item.erase(0, 1);
        size_t x = item.find(kTimes);
        if (x == std::string::npos) continue;  // "(none)"
        f.dtype_counts[item.substr(0, x)] += std::stoi(item.substr(x + kTimes.size()));
      }
    } else if (!cur_file.empty() && StartsWith(line, "- __metadata__: ")) {
      auto& f = m.files[cur_file];
      std::string v = line.substr(16);
      f.has_metadata = v != "absent";
      if (f.has_metadata) f.metadata = nlohmann::json::parse(v, nullptr, false);
    } else if (!cur_file.empty() && StartsWith(line, "- header: ")) {
      auto& f = m.files[cur_file];
      f.pad_spaces = std::stoi(Between(line, "pad spaces=", ","));
      f.zero_d = std::stoi(Between(line, "0-d tensors=", ","));
      f.zero_size = std::stoi(line.substr(line.find("zero-size=") + 10));
    } else if (!cur_dir.empty() && StartsWith(line, "- check `")) {
      // "- check `PATH`: parses; 1739 tensors → 59 shards; metadata={...}"
      std::string path = Between(line, "`", "`");
      ManifestIndex ix;
      ix.num_tensors = std::stoul(Between(line, "parses; ", " tensors"));
      size_t shards_at = line.find(" shards;");
      size_t sp = line.rfind(' ', shards_at - 1);
      ix.num_shards = std::stoul(line.substr(sp + 1, shards_at - sp - 1));
      auto md = nlohmann::json::parse(Between(line, "metadata=", "}") + "}", nullptr, false);
      ix.total_size = md.is_object() ? md.value("total_size", uint64_t{0}) : 0;
      // Check paths are repo paths; the corpus keeps them except where a model
      // folder was flattened (then only the basename is kept).
      std::string key = cur_dir + path;
      if (!fs::exists(root / key)) key = cur_dir + fs::path(path).filename().string();
      m.indexes[key] = ix;
    } else if (!cur_dir.empty() && StartsWith(line, "- `") &&
               fs::path(Between(line, "`", "`")).extension() == ".safetensors" &&
               line.find(" B, sha256 `") != std::string::npos) {
      // "- `model.safetensors` — 108 B, sha256 `...`"
      auto& f = m.files[cur_dir + Between(line, "`", "`")];
      size_t b = line.find(" B, sha256 `");
      size_t sp = line.rfind(' ', b - 1);
      f.size = std::stoull(line.substr(sp + 1, b - sp - 1));
      f.sha256 = Between(line, "sha256 `", "`");
    }
  }
  return m;
}

// Regular files under `dir` whose name ends with ".safetensors" (index=false)
// or matches "*.index*.json" (index=true), sorted.
std::vector<fs::path> Find(const fs::path& dir, bool index) {
  std::vector<fs::path> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string n = e.path().filename().string();
    bool ends_json = n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0;
    bool ends_st = n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0;
    if (index ? (ends_json && n.find(".index") != std::string::npos) : ends_st) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class RealFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = SharedDataDir();
    if (root_.empty()) GTEST_SKIP() << "shared data (../shared/data/real) absent";
    manifest_ = ReadManifest(root_);
  }
  fs::path root_;
  Manifest manifest_;
};

TEST_F(RealFiles, ManifestWasRead) {
  // Sanity of the manifest reader itself: 16 single files + 1 layout file, 9 index checks.
  EXPECT_EQ(manifest_.files.size(), 17u);
  EXPECT_EQ(manifest_.indexes.size(), 9u);
  EXPECT_EQ(manifest_.files["safetensors/run-ai__runai-model-streamer__test.safetensors"].num_tensors, 10u);
}

TEST_F(RealFiles, EverySafetensorsFileMatchesManifestAndRawBytes) {
  auto files = Find(root_, false);
  ASSERT_GE(files.size(), 17u);
  for (const auto& p : files) {
    std::string rel = fs::relative(p, root_).string();
    SCOPED_TRACE(rel);
    auto bytes = ReadFileBytes(p);
    ASSERT_TRUE(manifest_.files.count(rel)) << "file not described by MANIFEST.md";
    const ManifestFile& mf = manifest_.files.at(rel);
    ASSERT_EQ(bytes.size(), mf.size);
    ASSERT_EQ(Sha256Hex(bytes.data(), bytes.size()), mf.sha256);

    auto h = st::ReadMetadata(p.string());
    ASSERT_OK(h);
    RawHeader raw = DecodeRaw(bytes);
    ASSERT_TRUE(raw.ok);

    // Layout numbers.
    EXPECT_EQ(h->header_len, raw.n);
    EXPECT_EQ(h->data_start, 8 + raw.n);
    EXPECT_EQ(h->file_size, bytes.size());

    // Names, dtypes, shapes, offsets and byte sizes against the independent decode.
    ASSERT_EQ(h->tensors.size(), raw.tensors.size());
    uint64_t prev_end = 0;
    std::map<std::string, int> dtype_counts;
    int zero_d = 0, zero_size = 0;
    for (const auto& t : h->tensors) {
      SCOPED_TRACE(t.name);
      ASSERT_TRUE(raw.tensors.count(t.name));
      const RawTensor& r = raw.tensors.at(t.name);
      EXPECT_EQ(st::DtypeName(t.dtype), r.dtype);
      EXPECT_EQ(t.shape, r.shape);
      EXPECT_EQ(t.begin, r.begin);
      EXPECT_EQ(t.end, r.end);
      uint64_t numel = 1;
      for (auto d : r.shape) numel *= d;
      EXPECT_EQ(t.num_elements(), numel);
      EXPECT_EQ(t.nbytes(), numel * SpecBits(r.dtype) / 8);
      EXPECT_EQ(t.begin, prev_end) << "tensors not in file order";
      prev_end = t.end;
      EXPECT_EQ(h->Find(t.name), &t);
      dtype_counts[r.dtype]++;
      zero_d += r.shape.empty();
      zero_size += numel == 0;
    }
    EXPECT_EQ(8 + raw.n + prev_end, bytes.size());
    EXPECT_EQ(h->data_size(), prev_end);
    EXPECT_EQ(h->Find("no such tensor"), nullptr);

    // Manifest facts (the layout section lists only size and sha256).
    if (rel.rfind("safetensors/", 0) == 0) {
      EXPECT_EQ(h->tensors.size(), mf.num_tensors);
      EXPECT_EQ(dtype_counts, mf.dtype_counts);
      EXPECT_EQ(zero_d, mf.zero_d);
      EXPECT_EQ(zero_size, mf.zero_size);
      size_t pad = 0;
      while (pad < raw.text.size() && raw.text[raw.text.size() - 1 - pad] == ' ') ++pad;
      EXPECT_EQ(static_cast<int>(pad), mf.pad_spaces);
      EXPECT_EQ(!h->metadata.empty(), mf.has_metadata);
      if (mf.has_metadata) {
        ASSERT_TRUE(mf.metadata.is_object());
        EXPECT_EQ(h->metadata, mf.metadata.get<decltype(h->metadata)>());
      }
    }
    EXPECT_EQ(h->metadata, raw.metadata);
  }
}

TEST_F(RealFiles, MappedViewsEqualRawBytes) {
  for (const auto& p : Find(root_, false)) {
    SCOPED_TRACE(p.string());
    auto bytes = ReadFileBytes(p);
    auto f = st::SafetensorsFile::Open(p.string());
    ASSERT_OK(f);
    EXPECT_EQ(f->mapping()->size(), bytes.size());
    RawHeader raw = DecodeRaw(bytes);
    for (const auto& [name, r] : raw.tensors) {
      bool found = false;
      auto span = f->data(name, &found);
      ASSERT_TRUE(found) << name;
      ASSERT_EQ(span.size(), r.end - r.begin);
      const uint8_t* expect = bytes.data() + 8 + raw.n + r.begin;
      EXPECT_EQ(Sha256Hex(span.data(), span.size()), Sha256Hex(expect, r.end - r.begin)) << name;
    }
  }
}

TEST_F(RealFiles, SpecificValuesFromManifestNotes) {
  // Hand-copied facts from the MANIFEST notes.
  auto get = [&](const std::string& rel) { return st::ReadMetadata((root_ / rel).string()); };
  {
    auto h = get("safetensors/Astrodata-project__astrodata__model.safetensors");
    ASSERT_OK(h);
    const auto* t = h->Find("bn1.num_batches_tracked");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, st::Dtype::I64);
    EXPECT_TRUE(t->shape.empty());
    EXPECT_EQ(t->num_elements(), 1u);
    EXPECT_EQ(t->nbytes(), 8u);
  }
  {
    auto h = get("safetensors/huggingface__candle__jfk-codes.safetensors");
    ASSERT_OK(h);
    ASSERT_EQ(h->tensors.size(), 1u);
    EXPECT_EQ(h->tensors[0].shape, (std::vector<uint64_t>{1, 2, 828}));
    EXPECT_EQ(h->tensors[0].nbytes(), 1u * 2 * 828 * 8);
  }
  {
    auto h = get("safetensors/run-ai__runai-model-streamer__test_empty.safetensors");
    ASSERT_OK(h);
    EXPECT_TRUE(h->tensors.empty());
    EXPECT_EQ(h->header_len, 8u);
    EXPECT_EQ(h->file_size, 16u);
  }
  {
    auto h = get("layouts/BogoAI-tiny-transformers-repo/model.safetensors");
    ASSERT_OK(h);
    ASSERT_NE(h->Find("dummy_param"), nullptr);
    EXPECT_EQ(h->Find("dummy_param")->dtype, st::Dtype::F32);
    EXPECT_EQ(h->metadata.at("format"), "pt");
  }
}

TEST_F(RealFiles, PrefixParseEqualsFullParse) {
  // The pipeline parses a header as soon as its first 8+N bytes arrive.
  for (const auto& p : Find(root_, false)) {
    SCOPED_TRACE(p.string());
    auto bytes = ReadFileBytes(p);
    auto need = st::PeekHeaderLength(bytes.data(), 8, bytes.size(), "x");
    ASSERT_OK(need);
    RawHeader raw = DecodeRaw(bytes);
    EXPECT_EQ(*need, 8 + raw.n);
    auto full = st::ParseHeader(bytes.data(), bytes.size(), bytes.size(), "x");
    auto pre = st::ParseHeader(bytes.data(), static_cast<size_t>(*need), bytes.size(), "x");
    ASSERT_OK(full);
    ASSERT_OK(pre);
    ASSERT_EQ(full->tensors.size(), pre->tensors.size());
    for (size_t i = 0; i < full->tensors.size(); ++i) {
      EXPECT_EQ(full->tensors[i].name, pre->tensors[i].name);
      EXPECT_EQ(full->tensors[i].end, pre->tensors[i].end);
    }
    if (*need > 8) {
      auto short_buf = st::ParseHeader(bytes.data(), static_cast<size_t>(*need - 1), bytes.size(), "x");
      EXPECT_FALSE(short_buf.ok());
      EXPECT_EQ(short_buf.status().code(), hubload::Code::kInvalidArgument);
    }
  }
}

TEST_F(RealFiles, EveryIndexParsesAndListsItsShards) {
  auto files = Find(root_, true);
  ASSERT_EQ(files.size(), 9u);
  for (const auto& p : files) {
    std::string rel = fs::relative(p, root_).string();
    SCOPED_TRACE(rel);
    auto idx = st::ReadIndex(p.string());
    ASSERT_OK(idx);
    // Independent read.
    auto j = nlohmann::json::parse(Slurp(p), nullptr, false);
    ASSERT_TRUE(j.is_object());
    std::map<std::string, std::string> wm = j.at("weight_map").get<std::map<std::string, std::string>>();
    std::set<std::string> shards;
    std::map<std::string, size_t> per_shard;
    for (const auto& [k, v] : wm) {
      shards.insert(v);
      per_shard[v]++;
    }
    EXPECT_EQ(idx->weight_map, wm);
    EXPECT_EQ(idx->shards, std::vector<std::string>(shards.begin(), shards.end()));
    ASSERT_EQ(idx->tensors_by_shard.size(), per_shard.size());
    for (const auto& [s, n] : per_shard) EXPECT_EQ(idx->tensors_by_shard.at(s).size(), n) << s;
    ASSERT_TRUE(idx->total_size.has_value());
    EXPECT_EQ(*idx->total_size, j.at("metadata").at("total_size").get<uint64_t>());
    // Manifest facts.
    ASSERT_TRUE(manifest_.indexes.count(rel)) << "index not described by MANIFEST.md";
    const auto& mi = manifest_.indexes.at(rel);
    EXPECT_EQ(idx->weight_map.size(), mi.num_tensors);
    EXPECT_EQ(idx->shards.size(), mi.num_shards);
    EXPECT_EQ(*idx->total_size, mi.total_size);
  }
}

}  // namespace
