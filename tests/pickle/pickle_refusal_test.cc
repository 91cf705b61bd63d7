// Hostile and malformed checkpoints, built byte by byte here (pickle opcodes
// from pickletools.py, zips written by libzip): each is a Status naming the
// file and the rule broken; nothing is ever imported or run.
#include <gtest/gtest.h>

#include <filesystem>

#include "hubload/pickle.h"
#include "hubload/reasons.h"
#include "pickle/pickle_bytes.h"
#include "testing/util.h"
#include "testing/status_matchers.h"

namespace hubload::testing {
namespace {

namespace pk = hubload::pickle;

// A zip `archive/{data.pkl, data/<key>..., version}` read back by the library.
Result<pk::Checkpoint> ReadArchive(const TempDir& dir, const std::string& pkl,
                                   const std::vector<std::pair<std::string, std::string>>& storages,
                                   const pk::Limits& limits = {}, bool compress = false,
                                   const std::string& extra_name = "", const std::string& extra = "") {
  std::vector<std::pair<std::string, std::string>> entries = {{"archive/data.pkl", pkl}};
  for (const auto& [key, bytes] : storages) entries.emplace_back("archive/data/" + key, bytes);
  entries.emplace_back("archive/version", "3\n");
  if (!extra_name.empty()) entries.emplace_back(extra_name, extra);
  const std::string path = (dir.path() / "evil.bin").string();
  EXPECT_TRUE(WriteZip(path, entries, compress));
  return pk::ReadCheckpointFile(path, limits);
}

std::string OneTensor(int64_t numel, int64_t offset, const std::vector<int64_t>& size,
                      const std::vector<int64_t>& stride, const std::string& key = "0") {
  return StateDictPickle([&](PickleBytes& p) {
    p.Str("w").TensorV2("FloatStorage", key, numel, offset, size, stride);
  });
}

void ExpectRefused(const Result<pk::Checkpoint>& r, std::string_view reason, const std::string& must_mention) {
  ASSERT_FALSE(r.ok()) << "accepted; expected " << reason;
  EXPECT_TRUE(r.status().Is(reason)) << r.status().ToString();
  EXPECT_NE(r.status().message().find("evil.bin"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find(must_mention), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().context().file.find("evil.bin"), std::string::npos);
}

TEST(PickleRefusal, HandMadeArchiveIsRead) {
  // The control case: the same builders make a valid file.
  TempDir dir;
  auto r = ReadArchive(dir, OneTensor(6, 1, {2, 2}, {1, 2}), {{"0", FloatRange(6)}});
  ASSERT_OK(r);
  ASSERT_EQ(r->tensors.size(), 1u);
  EXPECT_EQ(r->tensors[0].name, "w");
  EXPECT_EQ(r->tensors[0].shape, (std::vector<uint64_t>{2, 2}));
  EXPECT_EQ(r->tensors[0].stride, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(r->tensors[0].storage_offset, 1u);
  EXPECT_EQ(r->archive, "archive");
  EXPECT_EQ(r->storages[0].nbytes, 24u);
}

// GLOBAL + REDUCE of dangerous callables: refused at the GLOBAL, before the
// REDUCE is reached; the command (touch a file) is never run.
TEST(PickleRefusal, DangerousGlobals) {
  TempDir dir;
  const std::string marker = (dir.path() / "pwned").string();
  struct Case {
    std::string module, name;
  };
  for (const Case& c : std::vector<Case>{{"os", "system"},
                                         {"posix", "system"},
                                         {"builtins", "eval"},
                                         {"__builtin__", "eval"},
                                         {"subprocess", "call"},
                                         {"evil_module", "Payload"},
                                         {"torch", "load"},
                                         {"collections", "defaultdict"}}) {
    SCOPED_TRACE(c.module + "." + c.name);
    PickleBytes p;
    p.Proto(2).Global(c.module, c.name).Str("touch " + marker).Tuple1().Reduce().Stop();
    ExpectRefused(ReadArchive(dir, p.str(), {}), reason::kPickleUnsafeGlobal, c.module + "." + c.name);
    // Inside a state dict value too.
    std::string sd = StateDictPickle([&](PickleBytes& q) {
      q.Str("w").Global(c.module, c.name).Str("touch " + marker).Tuple1().Reduce();
    });
    ExpectRefused(ReadArchive(dir, sd, {}), reason::kPickleUnsafeGlobal, c.module + "." + c.name);
    // Protocol 4 STACK_GLOBAL.
    PickleBytes s;
    s.Proto(4).StackGlobal(c.module, c.name).Str("touch " + marker).Tuple1().Reduce().Stop();
    ExpectRefused(ReadArchive(dir, s.str(), {}), reason::kPickleUnsafeGlobal, c.module + "." + c.name);
  }
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST(PickleRefusal, RefusedOpcodes) {
  TempDir dir;
  // INST imports and calls in one opcode: refused naming the class.
  PickleBytes inst;
  inst.Proto(2).Mark().Str("id").Append("ios\nsystem\n").Stop();
  ExpectRefused(ReadArchive(dir, inst.str(), {}), reason::kPickleUnsafeGlobal, "os.system");
  // NEWOBJ of an allowed class, EXT1, text PUT, sets.
  PickleBytes newobj;
  newobj.Proto(2).Global("collections", "OrderedDict").EmptyTuple().Raw({static_cast<char>(0x81)}).Stop();
  ExpectRefused(ReadArchive(dir, newobj.str(), {}), reason::kPickleOpcode, "NEWOBJ");
  PickleBytes ext;
  ext.Proto(2).Raw({static_cast<char>(0x82), 1}).Stop();
  ExpectRefused(ReadArchive(dir, ext.str(), {}), reason::kPickleOpcode, "EXT1");
  PickleBytes set;
  set.Proto(4).Raw({static_cast<char>(0x8f)}).Stop();
  ExpectRefused(ReadArchive(dir, set.str(), {}), reason::kPickleOpcode, "EMPTY_SET");
  PickleBytes proto;
  proto.Proto(6).None().Stop();
  ExpectRefused(ReadArchive(dir, proto.str(), {}), reason::kPickleOpcode, "protocol 6");
  // BUILD on anything but a dict (here a list) is refused.
  PickleBytes build;
  build.Proto(2).EmptyList().EmptyDict().Build().Stop();
  ExpectRefused(ReadArchive(dir, build.str(), {}), reason::kPickleOpcode, "BUILD");
  // REDUCE of an allowed global that a state dict never calls.
  PickleBytes call_storage;
  call_storage.Proto(2).Global("torch", "FloatStorage").EmptyTuple().Reduce().Stop();
  ExpectRefused(ReadArchive(dir, call_storage.str(), {}), reason::kPickleMalformed, "REDUCE");
}

TEST(PickleRefusal, TorchGlobalsHubloadDoesNotLoad) {
  TempDir dir;
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"torch._utils", "_rebuild_qtensor"}, {"torch._utils", "_rebuild_sparse_tensor"}, {"torch", "device"},
           {"torch", "ComplexDoubleStorage"}, {"torch", "complex128"}}) {
    PickleBytes p;
    p.Proto(2).Global(module, name).Stop();
    auto r = ReadArchive(dir, p.str(), {});
    ExpectRefused(r, reason::kPickleUnsupportedGlobal, module + "." + name);
    EXPECT_EQ(r.status().code(), Code::kUnsupported);
  }
}

TEST(PickleRefusal, StorageChecks) {
  TempDir dir;
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {6}, {1}, "7"), {{"0", FloatRange(6)}}),
                reason::kPickleStorageMissing, "data/7");
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {6}, {1}), {{"0", FloatRange(5)}}), reason::kPickleStorageSize,
                "20 bytes");
  // size / stride / offset reaching past the 6-element storage.
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {7}, {1}), {{"0", FloatRange(6)}}),
                reason::kPickleTensorOutOfRange, "reaches past");
  ExpectRefused(ReadArchive(dir, OneTensor(6, 5, {2}, {1}), {{"0", FloatRange(6)}}),
                reason::kPickleTensorOutOfRange, "storage_offset 5");
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {2, 2}, {5, 1}), {{"0", FloatRange(6)}}),
                reason::kPickleTensorOutOfRange, "stride [5,1]");
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {int64_t{1} << 40, int64_t{1} << 40}, {1, 1}), {{"0", FloatRange(6)}}),
                reason::kPickleTensorOutOfRange, "overflows");
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {-1}, {1}), {{"0", FloatRange(6)}}), reason::kPickleMalformed,
                "size");
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {2, 3}, {3}), {{"0", FloatRange(6)}}), reason::kPickleMalformed,
                "dimensions");
  // The last element exactly at the end is fine; an empty tensor addresses nothing.
  EXPECT_OK(ReadArchive(dir, OneTensor(6, 5, {1}, {1}), {{"0", FloatRange(6)}}));
  EXPECT_OK(ReadArchive(dir, OneTensor(6, 100, {0, 3}, {3, 1}), {{"0", FloatRange(6)}}));
  // One key used with two sizes.
  std::string twice = StateDictPickle([&](PickleBytes& p) {
    p.Str("a").TensorV2("FloatStorage", "0", 6, 0, {6}, {1});
    p.Str("b").TensorV2("FloatStorage", "0", 5, 0, {5}, {1});
  });
  ExpectRefused(ReadArchive(dir, twice, {{"0", FloatRange(6)}}), reason::kPickleMalformed, "two different");
}

TEST(PickleRefusal, NotAStateDict) {
  TempDir dir;
  std::string nested = StateDictPickle([&](PickleBytes& p) { p.Str("model").NewOrderedDict(); });
  ExpectRefused(ReadArchive(dir, nested, {}), reason::kPickleNotStateDict, "\"model\"");
  std::string number = StateDictPickle([&](PickleBytes& p) { p.Str("epoch").Int(3); });
  ExpectRefused(ReadArchive(dir, number, {}), reason::kPickleNotStateDict, "epoch");
  std::string dup = StateDictPickle([&](PickleBytes& p) {
    p.Str("w").TensorV2("FloatStorage", "0", 6, 0, {6}, {1});
    p.Str("w").TensorV2("FloatStorage", "0", 6, 0, {6}, {1});
  });
  ExpectRefused(ReadArchive(dir, dup, {{"0", FloatRange(6)}}), reason::kPickleNotStateDict, "twice");
  std::string bad_utf8 = StateDictPickle([&](PickleBytes& p) {
    p.Str("w\xff").TensorV2("FloatStorage", "0", 6, 0, {6}, {1});
  });
  ExpectRefused(ReadArchive(dir, bad_utf8, {{"0", FloatRange(6)}}), reason::kPickleNotStateDict, "UTF-8");
  PickleBytes list;
  list.Proto(2).EmptyList().Stop();
  ExpectRefused(ReadArchive(dir, list.str(), {}), reason::kPickleNotStateDict, "a list");
  // The _metadata attribute (BUILD with a dict state on the OrderedDict) is accepted.
  PickleBytes meta;
  meta.Proto(2).NewOrderedDict().EmptyDict().Str("_metadata").NewOrderedDict().SetItem().Build().Stop();
  auto ok = ReadArchive(dir, meta.str(), {});
  ASSERT_OK(ok);
  EXPECT_TRUE(ok->tensors.empty());
}

TEST(PickleRefusal, LimitsAndMalformedPickles) {
  TempDir dir;
  PickleBytes deep;
  deep.Proto(2);
  for (int i = 0; i < 100; ++i) deep.Mark();
  ExpectRefused(ReadArchive(dir, deep.Stop().str(), {}), reason::kPickleLimit, "MARK nesting");
  // Deeply nested tuples without MARK: bounded work, no recursion, just not a dict.
  PickleBytes tuples;
  tuples.Proto(2).EmptyTuple();
  for (int i = 0; i < 200000; ++i) tuples.Tuple1();
  ExpectRefused(ReadArchive(dir, tuples.Stop().str(), {}), reason::kPickleNotStateDict, "a tuple");
  // Declared lengths far beyond the file or the limit: refused before any allocation.
  PickleBytes huge;
  huge.Proto(4).Raw({static_cast<char>(0x8d)});  // BINUNICODE8
  huge.Le(uint64_t{1} << 60, 8);
  ExpectRefused(ReadArchive(dir, huge.Stop().str(), {}), reason::kPickleLimit, "declared string length");
  PickleBytes past;
  past.Proto(2).Raw({'X'});
  past.Le(1000, 4);
  past.Append("abc");
  ExpectRefused(ReadArchive(dir, past.str(), {}), reason::kPickleMalformed, "truncated");
  pk::Limits small;
  small.max_objects = 50;
  PickleBytes many;
  many.Proto(2).EmptyList();
  for (int i = 0; i < 100; ++i) many.Int(i).Append();
  ExpectRefused(ReadArchive(dir, many.Stop().str(), {}, small), reason::kPickleLimit, "max_objects");
  small = {};
  small.max_memo = 10;
  PickleBytes memo;
  memo.Proto(2);
  for (int i = 0; i < 20; ++i) memo.None().Put(static_cast<uint8_t>(i));
  ExpectRefused(ReadArchive(dir, memo.Stop().str(), {}, small), reason::kPickleLimit, "memo");
  small = {};
  small.max_pickle_bytes = 10;
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {6}, {1}), {{"0", FloatRange(6)}}, small), reason::kPickleLimit,
                "data.pkl");
  PickleBytes underflow;
  underflow.Proto(2).Reduce().Stop();
  ExpectRefused(ReadArchive(dir, underflow.str(), {}), reason::kPickleMalformed, "underflow");
  PickleBytes no_stop;
  no_stop.Proto(2).None();
  ExpectRefused(ReadArchive(dir, no_stop.str(), {}), reason::kPickleMalformed, "STOP");
  PickleBytes memo_miss;
  memo_miss.Proto(2).Get(9).Stop();
  ExpectRefused(ReadArchive(dir, memo_miss.str(), {}), reason::kPickleMalformed, "memo entry 9");
  PickleBytes bad_pid;
  bad_pid.Proto(2).Mark().Str("module").Str("x").Tuple().PersId().Stop();
  ExpectRefused(ReadArchive(dir, bad_pid.str(), {}), reason::kPickleMalformed, "persistent id");
}

TEST(PickleRefusal, ZipContainer) {
  TempDir dir;
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {6}, {1}), {{"0", FloatRange(6)}}, {}, /*compress=*/true),
                reason::kZipUnsupported, "compressed");
  ExpectRefused(ReadArchive(dir, OneTensor(6, 0, {6}, {1}), {{"0", FloatRange(6)}}, {}, false, "archive/byteorder",
                            "big"),
                reason::kZipUnsupported, "byteorder");
  EXPECT_OK(ReadArchive(dir, OneTensor(6, 0, {6}, {1}), {{"0", FloatRange(6)}}, {}, false, "archive/byteorder",
                          "little")
                  );
  // A zip without data.pkl, and one whose first entry is not in a folder.
  const std::string path = (dir.path() / "evil.bin").string();
  ASSERT_TRUE(WriteZip(path, {{"archive/other", "x"}}));
  ExpectRefused(pk::ReadCheckpointFile(path), reason::kNotTorchCheckpoint, "data.pkl");
  ASSERT_TRUE(WriteZip(path, {{"data.pkl", "x"}}));
  ExpectRefused(pk::ReadCheckpointFile(path), reason::kNotTorchCheckpoint, "folder");
  // Corrupt end of central directory and corrupt local header.
  ASSERT_TRUE(WriteZip(path, {{"archive/data.pkl", OneTensor(6, 0, {6}, {1})}, {"archive/data/0", FloatRange(6)}}));
  auto bytes = ReadFileBytes(path);
  auto corrupt = bytes;
  corrupt[0 + 26] = 0x7f;  // local header name length of the first entry
  auto r = pk::ReadCheckpoint(corrupt, "evil.bin");
  ExpectRefused(r, reason::kZipMalformed, "local header");
}

TEST(PickleRefusal, NotACheckpoint) {
  TempDir dir;
  const std::string path = (dir.path() / "evil.bin").string();
  struct Case {
    std::string bytes, mention;
  };
  for (const Case& c : std::vector<Case>{
           {"version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 10\n", "Git LFS pointer"},
           {std::string("\x07\0\0\0\0\0\0\0", 8) + "{\"a\":1}", "safetensors"},
           {"", "empty"},
           {"hello world", "not a torch.save checkpoint"},
           // A plain pickle without torch.save's magic number is never loaded.
           {PickleBytes().Proto(2).Global("os", "system").Stop().str(), "magic number"}}) {
    WriteFileBytes(path, c.bytes);
    ExpectRefused(pk::ReadCheckpointFile(path), reason::kNotTorchCheckpoint, c.mention);
  }
  EXPECT_EQ(pk::ReadCheckpointFile((dir.path() / "absent.bin").string()).status().code(), Code::kNotFound);
  EXPECT_EQ(pk::ReadCheckpointFile(dir.str()).status().code(), Code::kIOError);
}

// torch >= 2.1 writes dtypes without a legacy storage class as
// _rebuild_tensor_v3(UntypedStorage, ..., dtype); Parameters via
// _rebuild_parameter; tensors with attributes via _rebuild_from_type_v2.
TEST(PickleRefusal, NewerTorchShapesAreRead) {
  TempDir dir;
  std::string v3 = StateDictPickle([&](PickleBytes& p) {
    p.Str("f8").Global("torch._utils", "_rebuild_tensor_v3").Mark();
    p.Storage("UntypedStorage", "0", 6).Int(1).Ints({2}).Ints({2}).False().NewOrderedDict();
    p.Global("torch", "float8_e4m3fn").Tuple().Reduce();
    p.Str("p").Global("torch._utils", "_rebuild_parameter").Mark();
    p.TensorV2("FloatStorage", "1", 2, 0, {2}, {1}).Raw({static_cast<char>(0x88)}).NewOrderedDict().Tuple().Reduce();
    p.Str("t").Global("torch._tensor", "_rebuild_from_type_v2").Mark();
    p.Global("torch._utils", "_rebuild_tensor_v2").Global("torch", "Tensor").Mark();
    p.Storage("FloatStorage", "1", 2).Int(0).Ints({2}).Ints({1}).False().NewOrderedDict().Tuple();
    p.EmptyDict().Tuple().Reduce();
  });
  auto r = ReadArchive(dir, v3, {{"0", std::string(6, '\x38')}, {"1", FloatRange(2)}});
  ASSERT_OK(r);
  ASSERT_EQ(r->tensors.size(), 3u);
  EXPECT_EQ(r->tensors[0].dtype, safetensors::Dtype::F8_E4M3);
  EXPECT_EQ(r->storages[0].dtype, safetensors::Dtype::U8);
  EXPECT_TRUE(r->tensors[1].is_parameter);
  EXPECT_TRUE(r->tensors[1].requires_grad);
  EXPECT_EQ(r->tensors[2].storage, r->tensors[1].storage);
  // A subclass or Python state is refused as unsupported.
  std::string state = StateDictPickle([&](PickleBytes& p) {
    p.Str("t").Global("torch._tensor", "_rebuild_from_type_v2").Mark();
    p.Global("torch._utils", "_rebuild_tensor_v2").Global("torch", "Tensor").Mark();
    p.Storage("FloatStorage", "1", 2).Int(0).Ints({2}).Ints({1}).False().NewOrderedDict().Tuple();
    p.EmptyDict().Str("attr").Int(1).SetItem().Tuple().Reduce();
  });
  ExpectRefused(ReadArchive(dir, state, {{"1", FloatRange(2)}}), reason::kPickleUnsupportedTensor, "attributes");
}

}  // namespace
}  // namespace hubload::testing
