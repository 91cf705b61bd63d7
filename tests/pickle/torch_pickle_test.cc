// LibTorch tensors from pickle checkpoints, compared with the bytes
// python3-torch dumped for the same tensors (and, for the dtype policy, with
// the bytes of Python's t.float()). Storage sharing is checked against the
// Python storages; zero-copy against the mapping's address range.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "hubload/reasons.h"
#include "hubload/torch_pickle.h"
#include "pickle/fixtures.h"
#include "pickle/pickle_bytes.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace pk = hubload::pickle;

std::string Bytes(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
}

const void* StoragePtr(const at::Tensor& t) { return t.storage().data(); }

bool InMapping(const pk::PickleFile& f, const at::Tensor& t) {
  auto* p = static_cast<const uint8_t*>(StoragePtr(t));
  return p >= f.mapping()->data() && p < f.mapping()->data() + f.mapping()->size();
}

TEST(TorchPickle, TensorsMatchPythonAndStayShared) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  for (const std::string& name : PythonFixtures::Files()) {
    SCOPED_TRACE(name);
    auto file = pk::PickleFile::Open(fx->Path(name));
    ASSERT_OK(file);
    auto sd = LoadPickleTensors(*file, LoadOptions{});
    ASSERT_OK(sd);
    auto want = fx->Manifest(name);
    ASSERT_EQ(sd->size(), want.size());
    const bool legacy = name.find("legacy") != std::string::npos;
    int legacy_checked = 0, legacy_copied = 0;
    std::map<int, const void*> storage_ptr;
    std::map<const void*, int> ptr_storage;
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& [tname, t] = (*sd)[i];
      const ExpectedTensor& e = want[i];
      SCOPED_TRACE(e.name);
      EXPECT_EQ(tname, e.name);
      auto dt = SafetensorsDtype(t.scalar_type());
      ASSERT_OK(dt);
      EXPECT_EQ(safetensors::DtypeName(*dt), e.dtype);
      EXPECT_EQ(std::vector<uint64_t>(t.sizes().begin(), t.sizes().end()), e.shape);
      EXPECT_EQ(Bytes(t), e.data);
      if (t.numel() == 0) continue;
      // Views keep their pickled geometry over one shared buffer.
      EXPECT_EQ(std::vector<uint64_t>(t.strides().begin(), t.strides().end()), e.stride);
      EXPECT_EQ(static_cast<uint64_t>(t.storage_offset()), e.storage_offset);
      auto [a, fa] = storage_ptr.emplace(e.storage, StoragePtr(t));  // NOLINT
      auto [b, fb] = ptr_storage.emplace(StoragePtr(t), e.storage);
      EXPECT_EQ(a->second, StoragePtr(t)) << "tensors of one Python storage share one buffer";
      EXPECT_EQ(b->second, e.storage) << "tensors of different storages do not share";
      // Zero-copy exactly when the storage's file offset is aligned for the
      // dtype (the mapping starts on a page): always for zip storages (64-byte
      // aligned by PyTorch), by chance for legacy ones (after an 8-byte count).
      const auto& s = file->checkpoint().storages[file->checkpoint().tensors[i].storage];
      const bool aligned = s.offset % static_cast<uint64_t>(t.element_size()) == 0;
      EXPECT_EQ(InMapping(*file, t), aligned);
      if (!legacy) {
        EXPECT_TRUE(aligned);
      } else {
        ++legacy_checked;
        legacy_copied += aligned ? 0 : 1;
      }
    }
    if (name == "legacy.bin") {
      EXPECT_GT(legacy_copied, 0) << "the legacy fixture has unaligned storages (copied once each)";
      EXPECT_LT(legacy_copied, legacy_checked);
    }
  }
}

TEST(TorchPickle, DtypePolicy) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  auto want = fx->Manifest("model.bin");
  LoadOptions f32;
  f32.dtype = TargetDtype::kF32;
  auto sd = LoadPickleFile(fx->Path("model.bin"), f32);
  ASSERT_OK(sd);
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& [name, t] = (*sd)[i];
    SCOPED_TRACE(name);
    if (want[i].f32) {
      EXPECT_EQ(t.scalar_type(), at::kFloat);
      EXPECT_EQ(Bytes(t), *want[i].f32);  // Python's t.float()
      if (want[i].dtype != "F32" && t.numel() > 0) {
        EXPECT_TRUE(t.is_contiguous());
      }
    } else {
      EXPECT_EQ(Bytes(t), want[i].data);  // integers, bool and complex keep their dtype
      EXPECT_NE(t.scalar_type(), at::kFloat);
    }
  }
  // keep_in_fp32 names one whole dotted component ("block.1" is the LayerNorm).
  LoadOptions half;
  half.dtype = TargetDtype::kF16;
  half.keep_in_fp32 = {"1"};
  auto h = LoadPickleFile(fx->Path("model.bin"), half);
  ASSERT_OK(h);
  for (const auto& [name, t] : *h) {
    if (name.rfind("block.1.", 0) == 0) {
      EXPECT_EQ(t.scalar_type(), at::kFloat) << name;
    } else if (name == "emb.weight" || name == "bf16_buf") {
      EXPECT_EQ(t.scalar_type(), at::kHalf) << name;
    }
  }
}

TEST(TorchPickle, ForceCopyIsWritableAndStillShared) {
  HUBLOAD_PYTHON_FIXTURES(fx);
  auto file = pk::PickleFile::Open(fx->Path("model.bin"));
  ASSERT_OK(file);
  LoadOptions copy;
  copy.force_copy = true;
  auto sd = LoadPickleTensors(*file, copy);
  ASSERT_OK(sd);
  std::map<std::string, at::Tensor> by_name(sd->begin(), sd->end());
  at::Tensor emb = by_name["emb.weight"], head = by_name["head.weight"];
  EXPECT_FALSE(InMapping(*file, emb));
  EXPECT_EQ(StoragePtr(emb), StoragePtr(head));
  EXPECT_EQ(StoragePtr(by_name["view"]), StoragePtr(by_name["view_t"]));
  emb.fill_(7.0f);  // writable memory; the tie is visible through the other name
  EXPECT_EQ(head.sum().item<float>(), 7.0f * head.numel());
  // view_t = base.t() and view = base[1:, ::2] of one arange(24) buffer.
  EXPECT_EQ(by_name["view_t"][2][1].item<float>(), 8.0f);
  by_name["view_t"].fill_(-1.0f);
  EXPECT_EQ(by_name["view"].sum().item<float>(), -1.0f * 9);
}

// Hand-made torch >= 2.1 shapes: float8 and uint16 via _rebuild_tensor_v3 on
// an UntypedStorage, with a strided view. E4M3FN values hand-decoded (bias 7):
// 0x38 = 1.0, 0x40 = 2.0, 0xC0 = -2.0, 0x3C = 1.5.
TEST(TorchPickle, Float8AndUint16FromRebuildTensorV3) {
  TempDir dir;
  std::string pkl = StateDictPickle([&](PickleBytes& p) {
    p.Str("f8").Global("torch._utils", "_rebuild_tensor_v3").Mark();
    p.Storage("UntypedStorage", "0", 5).Int(1).Ints({2}).Ints({2}).False().NewOrderedDict();
    p.Global("torch", "float8_e4m3fn").Tuple().Reduce();
    p.Str("u16").Global("torch._utils", "_rebuild_tensor_v3").Mark();
    p.Storage("UntypedStorage", "1", 4).Int(0).Ints({2}).Ints({1}).False().NewOrderedDict();
    p.Global("torch", "uint16").Tuple().Reduce();
  });
  const std::string path = (dir.path() / "v3.bin").string();
  ASSERT_TRUE(WriteZip(path, {{"archive/data.pkl", pkl},
                              {"archive/data/0", std::string("\x00\x38\x00\xC0\x3C", 5)},
                              {"archive/data/1", std::string("\xff\xff\x02\x00", 4)},
                              {"archive/version", "3\n"}}));
  auto sd = LoadPickleFile(path, LoadOptions{});
  ASSERT_OK(sd);
  ASSERT_EQ(sd->size(), 2u);
  at::Tensor f8 = (*sd)[0].second;
  EXPECT_EQ(f8.scalar_type(), at::kBFloat16);  // kAuto: float8 decoded exactly to bf16
  ASSERT_EQ(f8.numel(), 2);
  EXPECT_EQ(f8[0].item<float>(), 1.0f);   // bytes 1 and 3 of the storage
  EXPECT_EQ(f8[1].item<float>(), -2.0f);
  at::Tensor u16 = (*sd)[1].second;
  EXPECT_EQ(u16.scalar_type(), at::kInt);  // widened, LibTorch 1.13 has no uint16
  EXPECT_EQ(u16[0].item<int32_t>(), 65535);
  EXPECT_EQ(u16[1].item<int32_t>(), 2);
  LoadOptions f32;
  f32.dtype = TargetDtype::kF32;
  auto as_f32 = LoadPickleFile(path, f32);
  ASSERT_OK(as_f32);
  EXPECT_EQ((*as_f32)[0].second.scalar_type(), at::kFloat);
  EXPECT_EQ((*as_f32)[0].second[1].item<float>(), -2.0f);
}

TEST(TorchPickle, ErrorsAreStatuses) {
  auto missing = LoadPickleFile("/nonexistent/pytorch_model.bin", LoadOptions{});
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  TempDir dir;
  // F8_E4M3FNUZ has no conversion: kUnsupported naming the tensor.
  std::string pkl = StateDictPickle([&](PickleBytes& p) {
    p.Str("fnuz").Global("torch._utils", "_rebuild_tensor_v3").Mark();
    p.Storage("UntypedStorage", "0", 2).Int(0).Ints({2}).Ints({1}).False().NewOrderedDict();
    p.Global("torch", "float8_e4m3fnuz").Tuple().Reduce();
  });
  const std::string path = (dir.path() / "fnuz.bin").string();
  ASSERT_TRUE(WriteZip(path, {{"archive/data.pkl", pkl}, {"archive/data/0", "ab"}, {"archive/version", "3\n"}}));
  auto r = LoadPickleFile(path, LoadOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnsupported);
  EXPECT_NE(r.status().message().find("fnuz"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace hubload::testing
