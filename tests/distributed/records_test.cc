// The store records ranks exchange (loader/distributed/records.h) are read as
// untrusted JSON: every field of every record set to every wrong JSON type
// gives a Status naming the store key and the field path, never an exception.
// Expected values come from the records written by hand below.
#include "loader/distributed/records.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hubload/reasons.h"
#include "testing/status_matchers.h"

namespace hubload::distributed::internal {
namespace {

using json = nlohmann::json;

// One value of each JSON type (and sign), for replacing a field.
std::vector<json> AllKinds() {
  return {json(nullptr), json(true), json(1.5), json("x"), json::array(), json::object(), json(-7), json(3)};
}

// "files/0/size" -> "files[0].size" (util/json.h's field path form).
std::string FieldPath(const std::string& pointer) {
  std::string out;
  size_t i = 1;
  while (i <= pointer.size()) {
    size_t j = pointer.find('/', i);
    if (j == std::string::npos) j = pointer.size();
    std::string seg = pointer.substr(i, j - i);
    if (!seg.empty() && seg.find_first_not_of("0123456789") == std::string::npos)
      out += "[" + seg + "]";
    else
      out += (out.empty() ? "" : ".") + seg;
    i = j + 1;
  }
  return out;
}

struct Field {
  std::string pointer;
  std::function<bool(const json&)> accepts;  // the replacement values the record allows
  // A field a well-typed change breaks a cross-reference of (a listed path):
  // the message may name that one instead.
  std::string cross = {};
};

bool IsString(const json& v) { return v.is_string(); }
bool IsNonNegInt(const json& v) { return v.is_number_integer() && v.get<int64_t>() >= 0; }

// Every field of `good`, set to each kind of value: refused unless `accepts`,
// with a message naming `key` and the field path.
void CheckEveryField(const json& good, const std::string& key, const std::vector<Field>& fields,
                     const std::function<Status(const std::string&)>& parse) {
  ASSERT_OK(parse(good.dump()));
  for (const auto& f : fields) {
    for (const auto& bad : AllKinds()) {
      json j = good;
      j[json::json_pointer(f.pointer)] = bad;
      Status st = parse(j.dump());
      if (f.accepts(bad)) {
        EXPECT_OK(st) << key << " " << f.pointer << " = " << bad.dump() << ": " << st.ToString();
        continue;
      }
      ASSERT_FALSE(st.ok()) << key << " " << f.pointer << " = " << bad.dump() << " was accepted";
      EXPECT_NE(st.message().find("store record '" + key + "'"), std::string::npos) << st.message();
      // An emptied container names its first missing member ('extra.shards'), so the path's prefix.
      const bool names_field = st.message().find("'" + FieldPath(f.pointer)) != std::string::npos;
      const bool names_cross = !f.cross.empty() && st.message().find("'" + f.cross + "'") != std::string::npos;
      EXPECT_TRUE(names_field || names_cross) << f.pointer << ": " << st.message();
    }
    // A member absent is refused too (an array element removed is checked by the callers).
    json j = good;
    const json::json_pointer ptr(f.pointer);
    json& parent = j[ptr.parent_pointer()];
    if (!parent.is_object()) continue;
    parent.erase(ptr.back());
    Status st = parse(j.dump());
    EXPECT_FALSE(st.ok()) << key << " without " << f.pointer;
    EXPECT_NE(st.message().find("is required but absent"), std::string::npos) << st.message();
  }
  // The record itself of another type, and text that is not JSON.
  for (const auto& bad : AllKinds()) {
    if (bad.type() == good.type()) continue;
    Status st = parse(bad.dump());
    ASSERT_FALSE(st.ok()) << key << " = " << bad.dump();
    EXPECT_NE(st.message().find("store record '" + key + "'"), std::string::npos) << st.message();
  }
  for (const std::string text : {"", "{", "[1,", "nul", "\"abc"}) {
    Status st = parse(text);
    ASSERT_FALSE(st.ok()) << key << " text " << text;
    EXPECT_NE(st.message().find("store record '" + key + "'"), std::string::npos) << st.message();
  }
}

TEST(DistRecords, TopologyReadsBackAndRefusesEveryWrongField) {
  auto t = ParseTopology(R"({"node": 2, "local_rank": 1})", "topo/5");
  ASSERT_OK(t);
  EXPECT_EQ(t->node, 2);
  EXPECT_EQ(t->local_rank, 1);
  auto back = ParseTopology(TopologyJson({3, 0}), "topo/0");
  ASSERT_OK(back);
  EXPECT_EQ(back->node, 3);
  EXPECT_EQ(back->local_rank, 0);
  CheckEveryField(json{{"node", 1}, {"local_rank", 0}}, "topo/3",
                  {{"/node", IsNonNegInt}, {"/local_rank", IsNonNegInt}},
                  [](const std::string& s) { return ParseTopology(s, "topo/3").status(); });
  // Beyond int.
  EXPECT_FALSE(ParseTopology(R"({"node": 4294967296, "local_rank": 0})", "topo/1").ok());
}

TEST(DistRecords, PartialFileReadsBackAndRefusesEveryWrongField) {
  auto r = ParsePartialFile(R"({"path": "/c/models--o--m/blobs/ab.incomplete", "dev": 2049, "ino": 77, "bytes": 1048576})",
                            "nodebytes/1/3");
  ASSERT_OK(r);
  EXPECT_EQ(r->path, "/c/models--o--m/blobs/ab.incomplete");
  EXPECT_EQ(r->dev, 2049u);
  EXPECT_EQ(r->ino, 77u);
  EXPECT_EQ(r->bytes, 1048576u);
  auto back = ParsePartialFile(PartialFileJson({"/x y/z", 18446744073709551615ull, 5, 0}), "nodebytes/0/0");
  ASSERT_OK(back);
  EXPECT_EQ(back->path, "/x y/z");
  EXPECT_EQ(back->dev, 18446744073709551615ull);
  EXPECT_EQ(back->ino, 5u);
  EXPECT_EQ(back->bytes, 0u);
  auto absolute = [](const json& v) { return v.is_string() && !v.get<std::string>().empty() && v.get<std::string>()[0] == '/'; };
  CheckEveryField(json{{"path", "/p"}, {"dev", 1}, {"ino", 2}, {"bytes", 3}}, "nodebytes/0/1",
                  {{"/path", absolute}, {"/dev", IsNonNegInt}, {"/ino", IsNonNegInt}, {"/bytes", IsNonNegInt}},
                  [](const std::string& s) { return ParsePartialFile(s, "nodebytes/0/1").status(); });
  for (const char* bad : {"", "relative/path", "./x"}) {
    auto st = ParsePartialFile(json{{"path", bad}, {"dev", 1}, {"ino", 2}, {"bytes", 3}}.dump(), "nodebytes/0/1");
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find("'path'"), std::string::npos) << st.status().message();
    EXPECT_NE(st.status().message().find("absolute"), std::string::npos) << st.status().message();
  }
}

json GoodListing() {
  return json{{"commit", "c0ffee"},
              {"files",
               json::array({json{{"path", "model.safetensors.index.json"}, {"etag", "e1"}, {"size", 10}, {"owner", -1}},
                            json{{"path", "model-00001-of-00001.safetensors"},
                                 {"etag", "e2"},
                                 {"size", 4096},
                                 {"owner", -1}},
                            json{{"path", "config.json"}, {"etag", "e3"}, {"size", 0}, {"owner", -1}}})},
              {"extra",
               {{"shards", json::array({"model-00001-of-00001.safetensors"})},
                {"index_file", "model.safetensors.index.json"},
                {"weights_file", "model.safetensors.index.json"},
                {"warnings", json::array({"w1"})}}}};
}

TEST(DistRecords, ListingReadsBack) {
  auto p = ParseListing(GoodListing().dump(), "listing");
  ASSERT_OK(p);
  EXPECT_EQ(p->commit, "c0ffee");
  ASSERT_EQ(p->files.size(), 3u);
  EXPECT_EQ(p->files[1].path, "model-00001-of-00001.safetensors");
  EXPECT_EQ(p->files[1].etag, "e2");
  EXPECT_EQ(p->files[1].size, 4096u);
  EXPECT_EQ(p->files[1].owner, -1);
  EXPECT_EQ(p->extra.shards, std::vector<std::string>{"model-00001-of-00001.safetensors"});
  EXPECT_EQ(p->extra.index_file, "model.safetensors.index.json");
  EXPECT_EQ(p->extra.warnings, std::vector<std::string>{"w1"});
  // Written by ListingJson, read back equal (a prefetch's empty extra too).
  Plan q;
  q.commit = "abc";
  q.files.push_back(PlanFile{"a.bin", "etag-a", 1ull << 40, -1});
  auto r = ParseListing(ListingJson(q), "listing");
  ASSERT_OK(r);
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].size, 1ull << 40);
  EXPECT_TRUE(r->extra.shards.empty());
  EXPECT_TRUE(r->extra.index_file.empty());
}

TEST(DistRecords, ListingRefusesEveryWrongField) {
  // The index file and the shards must stay listed files: any change is refused.
  auto listed_path = [](const json&) { return false; };
  auto owner_ok = [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= -1; };
  CheckEveryField(GoodListing(), "listing",
                  {{"/commit", IsString},
                   {"/files", [](const json&) { return false; }, "extra.shards[0]"},
                   {"/files/0/path", listed_path, "extra.index_file"},
                   {"/files/2/path", IsString},
                   {"/files/1/etag", IsString},
                   {"/files/1/size", IsNonNegInt},
                   {"/files/0/owner", owner_ok},
                   {"/extra", [](const json&) { return false; }},
                   {"/extra/shards", [](const json& v) { return v.is_array(); }},
                   {"/extra/shards/0", listed_path},
                   {"/extra/index_file", listed_path},
                   {"/extra/weights_file", IsString},
                   {"/extra/warnings", [](const json& v) { return v.is_array(); }},
                   {"/extra/warnings/0", IsString}},
                  [](const std::string& s) { return ParseListing(s, "listing").status(); });
}

TEST(DistRecords, ListingRefusesAShardThatIsNotListed) {
  json j = GoodListing();
  j["extra"]["shards"].push_back("model-00002-of-00002.safetensors");
  auto p = ParseListing(j.dump(), "listing");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("model-00002-of-00002.safetensors"), std::string::npos);
  EXPECT_NE(p.status().message().find("'extra.shards[1]'"), std::string::npos) << p.status().message();
}

TEST(DistRecords, OwnersReadBackAndRefuseEveryWrongEntry) {
  auto o = ParseOwners("[-1, 0, 2, 1]", "plan", 4, 3);
  ASSERT_OK(o);
  EXPECT_EQ(*o, (std::vector<int>{-1, 0, 2, 1}));
  auto back = ParseOwners(OwnersJson({1, -1}), "plan", 2, 2);
  ASSERT_OK(back);
  EXPECT_EQ(*back, (std::vector<int>{1, -1}));
  // 3 leaders: owners -1 .. 2.
  CheckEveryField(json::array({0, 1}), "plan",
                  {{"/0", [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= -1 && v.get<int64_t>() < 3; }},
                   {"/1", [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= -1 && v.get<int64_t>() < 3; }}},
                  [](const std::string& s) {
                    // Removing an entry changes the count: refused as well.
                    return ParseOwners(s, "plan", 2, 3).status();
                  });
  // A leader index past the leaders (would index the leader list out of range).
  auto past = ParseOwners("[0, 3]", "plan", 2, 3);
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("'[1]'"), std::string::npos) << past.status().message();
  auto short_plan = ParseOwners("[0]", "plan", 2, 3);
  ASSERT_FALSE(short_plan.ok());
  EXPECT_NE(short_plan.status().message().find("store record 'plan'"), std::string::npos);
}

TEST(DistRecords, ErrorRecordCarriesThePeersStatus) {
  ErrorContext ctx;
  ctx.file = "model-00002-of-00004.safetensors";
  // A peer's error that is itself about bad JSON passes through unchanged.
  Status peer(Code::kInvalidFormat, "tree listing: 'size' of [2] must be ...", reason::kBadJsonField, ctx);
  Status st = ErrorFromRecord(ErrorRecordJson(3, peer), "abort");
  EXPECT_EQ(st.code(), Code::kInvalidFormat);
  EXPECT_TRUE(st.Is(reason::kBadJsonField));
  EXPECT_EQ(st.message(), "tree listing: 'size' of [2] must be ...");
  EXPECT_EQ(st.context().file, "model-00002-of-00004.safetensors");
  // Hand-written record: code 11 is Code::kNetwork in status.h's order.
  Status net = ErrorFromRecord(R"({"rank":1,"code":11,"reason":"ConnectFailed","message":"m","file":""})", "abort");
  EXPECT_EQ(net.code(), Code::kNetwork);
  EXPECT_EQ(net.reason(), "ConnectFailed");
}

TEST(DistRecords, ErrorRecordMalformedIsJobFailedNamingTheField) {
  json good{{"rank", 1}, {"code", 11}, {"reason", "r"}, {"message", "m"}, {"file", "f"}};
  auto code_ok = [](const json& v) { return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= 20; };
  CheckEveryField(good, "abort",
                  {{"/rank", IsNonNegInt}, {"/code", code_ok}, {"/reason", IsString}, {"/message", IsString},
                   {"/file", IsString}},
                  [](const std::string& s) {
                    Status st = ErrorFromRecord(s, "abort");
                    // A well-formed record gives the peer's (non-OK) status; map it to OK here.
                    if (!st.Is(reason::kJobFailed)) return Status::Ok();
                    return st;
                  });
  Status st = ErrorFromRecord(R"({"rank":1,"code":"11","reason":"r","message":"m","file":"f"})", "abort");
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_TRUE(st.Is(reason::kJobFailed));
  // The record's text is quoted.
  EXPECT_NE(st.message().find(R"("code":"11")"), std::string::npos) << st.message();
  // Codes outside status.h's range (0 = OK, 21 past kInternal).
  EXPECT_TRUE(ErrorFromRecord(R"({"rank":1,"code":0,"reason":"r","message":"m","file":"f"})", "abort").Is(reason::kJobFailed));
  EXPECT_TRUE(ErrorFromRecord(R"({"rank":1,"code":21,"reason":"r","message":"m","file":"f"})", "abort").Is(reason::kJobFailed));
}

}  // namespace
}  // namespace hubload::distributed::internal
