// The torch-free reader against checkpoints python3-torch wrote: every
// tensor's dtype, shape, stride, offset and storage identity equal the
// manifest the same script dumped, and the bytes gathered here (by this
// test's own strided walk over the file) equal the bytes Python dumped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <set>

#include "hubload/pickle.h"
#include "hubload/reasons.h"
#include "hubload/safetensors.h"
#include "pickle/fixtures.h"
#include "safetensors/independent.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace pk = hubload::pickle;

// Row-major walk over size/stride: the contiguous bytes of the view.
std::string Gather(const std::vector<uint8_t>& file, const pk::Storage& s, const pk::Tensor& t) {
  const int bits = SpecBits(safetensors::DtypeName(t.dtype));
  const uint64_t item = static_cast<uint64_t>(bits / 8);
  uint64_t n = 1;
  for (uint64_t d : t.shape) n *= d;
  std::string out;
  std::vector<uint64_t> idx(t.shape.size(), 0);
  for (uint64_t k = 0; k < n; ++k) {
    uint64_t e = t.storage_offset;
    for (size_t d = 0; d < idx.size(); ++d) e += idx[d] * t.stride[d];
    out.append(reinterpret_cast<const char*>(file.data() + s.offset + e * item), item);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

void ExpectMatchesManifest(const pk::Checkpoint& ck, const std::vector<ExpectedTensor>& want,
                           const std::vector<uint8_t>& file, const std::string& label) {
  SCOPED_TRACE(label);
  ASSERT_EQ(ck.tensors.size(), want.size());
  std::map<int, uint32_t> py_to_ours;
  std::map<uint32_t, int> ours_to_py;
  for (size_t i = 0; i < want.size(); ++i) {
    const pk::Tensor& t = ck.tensors[i];
    const ExpectedTensor& e = want[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(t.name, e.name);  // file order = state dict order
    EXPECT_EQ(safetensors::DtypeName(t.dtype), e.dtype);
    EXPECT_EQ(t.shape, e.shape);
    EXPECT_EQ(t.stride, e.stride);
    EXPECT_EQ(t.storage_offset, e.storage_offset);
    ASSERT_LT(t.storage, ck.storages.size());
    // Same Python storage <=> same storage in the description.
    auto [a, fresh_a] = py_to_ours.emplace(e.storage, t.storage);
    auto [b, fresh_b] = ours_to_py.emplace(t.storage, e.storage);
    EXPECT_EQ(a->second, t.storage);
    EXPECT_EQ(b->second, e.storage);
    EXPECT_EQ(Gather(file, ck.storages[t.storage], t), e.data);
  }
}

TEST(PickleReader, MatchesWhatPythonWrote) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  for (const std::string& name : PythonFixtures::Files()) {
    const std::string path = fx->Path(name);
    auto want = fx->Manifest(name);
    auto bytes = ReadFileBytes(path);
    auto from_file = pk::ReadCheckpointFile(path);
    ASSERT_OK(from_file);
    ExpectMatchesManifest(*from_file, want, bytes, name + " (file)");
    const bool legacy = name.find("legacy") != std::string::npos;
    EXPECT_EQ(from_file->format, legacy ? pk::Format::kLegacy : pk::Format::kZip) << name;
    EXPECT_EQ(from_file->file_size, bytes.size());
    EXPECT_TRUE(from_file->warnings.empty()) << name;
    if (!legacy) {
      // The archive folder is the file's stem (PyTorchStreamWriter); storages are 64-byte aligned.
      EXPECT_EQ(from_file->archive, name.substr(0, name.size() - 4));
      EXPECT_EQ(from_file->version, 3) << "torch 1.13 writes file format version 3";
      for (const auto& s : from_file->storages) EXPECT_EQ(s.offset % 64, 0u) << name << " " << s.key;
    } else {
      EXPECT_EQ(from_file->version, 1001);
    }
    auto from_memory = pk::ReadCheckpoint(bytes, name);
    ASSERT_OK(from_memory);
    ExpectMatchesManifest(*from_memory, want, bytes, name + " (memory)");
    auto mapped = pk::PickleFile::Open(path);
    ASSERT_OK(mapped);
    for (const auto& s : mapped->checkpoint().storages) {
      auto span = mapped->data(s);
      ASSERT_EQ(span.size(), s.nbytes);
      if (s.nbytes) {
        EXPECT_EQ(span.data(), mapped->mapping()->data() + s.offset);
      }
    }
  }
}

TEST(PickleReader, StateDictDetails) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  auto ck = pk::ReadCheckpointFile(fx->Path("model.bin"));
  ASSERT_OK(ck);
  // Tied weights: two names, one storage; the views share the arange base.
  const pk::Tensor* emb = ck->Find("emb.weight");
  const pk::Tensor* head = ck->Find("head.weight");
  const pk::Tensor* view = ck->Find("view");
  const pk::Tensor* view_t = ck->Find("view_t");
  ASSERT_TRUE(emb && head && view && view_t);
  EXPECT_EQ(emb->storage, head->storage);
  EXPECT_EQ(view->storage, view_t->storage);
  EXPECT_FALSE(view->is_contiguous());
  EXPECT_FALSE(view_t->is_contiguous());
  EXPECT_TRUE(emb->is_contiguous());
  EXPECT_EQ(ck->storages[view->storage].numel, 24u);  // the whole base is saved
  const pk::Tensor* scalar = ck->Find("scalar");
  ASSERT_TRUE(scalar);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->num_elements(), 1u);
  const pk::Tensor* empty = ck->Find("empty");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->num_elements(), 0u);
  EXPECT_EQ(ck->Find("missing"), nullptr);
  // state_dict() detaches: no Parameter, no requires_grad.
  EXPECT_FALSE(emb->is_parameter);
  auto params = pk::ReadCheckpointFile(fx->Path("params.bin"));
  ASSERT_OK(params);
  ASSERT_NE(params->Find("w"), nullptr);
  EXPECT_TRUE(params->Find("w")->is_parameter);
  EXPECT_TRUE(params->Find("w")->requires_grad);
  EXPECT_FALSE(params->Find("b")->requires_grad);
  // The same tensor object twice: identical entries.
  auto same = pk::ReadCheckpointFile(fx->Path("same_object.bin"));
  ASSERT_OK(same);
  ASSERT_EQ(same->tensors.size(), 3u);
  EXPECT_EQ(same->tensors[0].storage, same->tensors[1].storage);
  EXPECT_EQ(same->tensors[2].storage_offset, 3u);
  EXPECT_EQ(same->storages.size(), 1u);
  EXPECT_EQ(same->storage_bytes(), 24u);
}

TEST(PickleReader, ShardedIndex) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  auto index = safetensors::ReadIndex(fx->Path("pytorch_model.bin.index.json"), ".bin");
  ASSERT_OK(index);
  ASSERT_EQ(index->shards.size(), 2u);
  // The safetensors suffix refuses .bin shard names.
  EXPECT_TRUE(safetensors::ReadIndex(fx->Path("pytorch_model.bin.index.json")).status().Is("InvalidShardName"));
  uint64_t total = 0;
  for (const auto& shard : index->shards) {
    auto ck = pk::ReadCheckpointFile(fx->Path(shard));
    ASSERT_OK(ck);
    EXPECT_OK(pk::CheckShardAgainstIndex(*index, shard, *ck)) << shard;
    for (const auto& t : ck->tensors) total += t.nbytes();
  }
  EXPECT_EQ(total, index->total_size.value_or(0));  // the script summed numel x element_size
  auto first = pk::ReadCheckpointFile(fx->Path(index->shards[0]));
  ASSERT_OK(first);
  Status wrong = pk::CheckShardAgainstIndex(*index, index->shards[1], *first);
  EXPECT_TRUE(wrong.Is("IndexTensorMissing")) << wrong.ToString();
}

TEST(PickleReader, FdReadsOnlyThroughPread) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  for (const std::string name : {"model.bin", "legacy.bin"}) {
    int fd = ::open(fx->Path(name).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::lseek(fd, 17, SEEK_SET), 17);
    auto size = ReadFileBytes(fx->Path(name)).size();
    auto ck = pk::ReadCheckpointFd(fd, size, "label-" + name);
    EXPECT_OK(ck);
    EXPECT_EQ(::lseek(fd, 0, SEEK_CUR), 17) << "the fd offset is not moved";
    // A file that shrank: the size claims more than there is.
    auto bigger = pk::ReadCheckpointFd(fd, size + 100, "label-" + name);
    EXPECT_FALSE(bigger.ok());
    ::close(fd);
  }
}

// Every prefix of a real checkpoint is refused with a Status naming the file.
TEST(PickleReader, TruncatedAtEveryCut) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  for (const std::string name : {"model.bin", "legacy.bin", "proto4.bin"}) {
    auto bytes = ReadFileBytes(fx->Path(name));
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
      auto r = pk::ReadCheckpoint(std::span<const uint8_t>(bytes.data(), cut), "cut.bin");
      ASSERT_FALSE(r.ok()) << name << " cut at " << cut;
      EXPECT_EQ(r.status().code(), Code::kInvalidFormat) << name << " cut " << cut << ": " << r.status().ToString();
      EXPECT_EQ(r.status().context().file, "cut.bin");
      EXPECT_NE(r.status().message().find("cut.bin"), std::string::npos);
    }
  }
}

TEST(PickleReader, LegacyStorageCountMismatch) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  auto bytes = ReadFileBytes(fx->Path("legacy.bin"));
  auto ck = pk::ReadCheckpoint(bytes, "legacy.bin");
  ASSERT_OK(ck);
  // Each storage is preceded by its int64 element count (little-endian).
  const pk::Storage& s = ck->storages[0];
  uint64_t count = 0;
  for (int i = 0; i < 8; ++i) count |= static_cast<uint64_t>(bytes[s.offset - 8 + i]) << (8 * i);
  EXPECT_EQ(count, s.numel);
  bytes[s.offset - 8] ^= 1;
  auto bad = pk::ReadCheckpoint(bytes, "legacy.bin");
  EXPECT_TRUE(bad.status().Is(reason::kPickleStorageSize)) << bad.status().ToString();
  // Trailing bytes are tolerated with a warning.
  auto good = ReadFileBytes(fx->Path("legacy.bin"));
  good.resize(good.size() + 5, 0);
  auto trailing = pk::ReadCheckpoint(good, "legacy.bin");
  ASSERT_OK(trailing);
  EXPECT_EQ(trailing->warnings.size(), 1u);
}

TEST(PickleReader, Detection) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  for (const std::string name : {"model.bin", "legacy.bin"}) {
    auto bytes = ReadFileBytes(fx->Path(name));
    EXPECT_TRUE(pk::LooksLikeTorchCheckpoint(bytes)) << name;
  }
  const std::string lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n";
  EXPECT_FALSE(pk::LooksLikeTorchCheckpoint(std::span(reinterpret_cast<const uint8_t*>(lfs.data()), lfs.size())));
}

}  // namespace
}  // namespace hubload::testing
