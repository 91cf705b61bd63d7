// The store records ranks exchange (loader/distributed/records.h), read
// through the checked JSON boundary (util/json.h).
#include "loader/distributed/records.h"

#include <nlohmann/json.hpp>

#include <limits>

#include "hubload/reasons.h"
#include "util/json.h"
#include "util/text.h"

namespace hubload::distributed::internal {

namespace {

using json = nlohmann::json;
using util::JsonIn;

std::string Doc(std::string_view key) { return "store record '" + std::string(key) + "'"; }

// An int field within [lo, int max].
Result<int> IntField(const JsonIn& o, std::string_view key, int64_t lo) {
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn v, o.Get(key));
  HUBLOAD_ASSIGN_OR_RETURN(int64_t n, v.AsInt());
  if (n < lo || n > std::numeric_limits<int>::max())
    return v.Invalid("must be an integer in " + std::to_string(lo) + " .. " +
                     std::to_string(std::numeric_limits<int>::max()) + ", got " + std::to_string(n));
  return static_cast<int>(n);
}

Result<std::vector<std::string>> Strings(const JsonIn& o, std::string_view key) {
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn a, o.Array(key));
  HUBLOAD_ASSIGN_OR_RETURN(std::vector<JsonIn> elems, a.Elements());
  std::vector<std::string> out;
  out.reserve(elems.size());
  for (const auto& e : elems) {
    HUBLOAD_ASSIGN_OR_RETURN(std::string s, e.AsString());
    out.push_back(std::move(s));
  }
  return out;
}

Result<JsonIn> Top(const json& j, std::string_view key, bool object) {
  JsonIn top(j, Doc(key));
  HUBLOAD_RETURN_IF_ERROR(object ? top.ExpectObject() : top.ExpectArray());
  return top;
}

}  // namespace

std::string TopologyJson(const TopologyRecord& t) {
  return util::DumpJson(json{{"node", t.node}, {"local_rank", t.local_rank}});
}

Result<TopologyRecord> ParseTopology(std::string_view text, std::string_view key) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(text, Doc(key)));
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn top, Top(j, key, /*object=*/true));
  TopologyRecord t;
  HUBLOAD_ASSIGN_OR_RETURN(t.node, IntField(top, "node", 0));
  HUBLOAD_ASSIGN_OR_RETURN(t.local_rank, IntField(top, "local_rank", 0));
  return t;
}

std::string ListingJson(const Plan& plan) {
  json files = json::array();
  for (const auto& f : plan.files)
    files.push_back(json{{"path", f.path}, {"etag", f.etag}, {"size", f.size}, {"owner", f.owner}});
  json extra{{"shards", plan.extra.shards},
             {"index_file", plan.extra.index_file},
             {"weights_file", plan.extra.weights_file},
             {"warnings", plan.extra.warnings}};
  return util::DumpJson(json{{"commit", plan.commit}, {"files", std::move(files)}, {"extra", std::move(extra)}});
}

Result<Plan> ParseListing(std::string_view text, std::string_view key) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(text, Doc(key)));
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn top, Top(j, key, /*object=*/true));
  Plan plan;
  HUBLOAD_ASSIGN_OR_RETURN(plan.commit, top.String("commit"));
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn files, top.Array("files"));
  HUBLOAD_ASSIGN_OR_RETURN(std::vector<JsonIn> elems, files.Elements());
  for (const auto& f : elems) {
    PlanFile p;
    HUBLOAD_ASSIGN_OR_RETURN(p.path, f.String("path"));
    HUBLOAD_ASSIGN_OR_RETURN(p.etag, f.String("etag"));
    HUBLOAD_ASSIGN_OR_RETURN(p.size, f.Uint("size"));
    HUBLOAD_ASSIGN_OR_RETURN(p.owner, IntField(f, "owner", -1));
    plan.files.push_back(std::move(p));
  }
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn extra, top.Object("extra"));
  // The load reads every shard and the index through the listed files.
  auto listed = [&](const JsonIn& v, const std::string& path) -> Status {
    for (const auto& f : plan.files)
      if (f.path == path) return Status::Ok();
    return v.Invalid("names " + path + ", which is not one of the listed files");
  };
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn shards, extra.Array("shards"));
  HUBLOAD_ASSIGN_OR_RETURN(std::vector<JsonIn> shard_elems, shards.Elements());
  for (const auto& e : shard_elems) {
    HUBLOAD_ASSIGN_OR_RETURN(std::string s, e.AsString());
    HUBLOAD_RETURN_IF_ERROR(listed(e, s));
    plan.extra.shards.push_back(std::move(s));
  }
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn index, extra.Get("index_file"));
  HUBLOAD_ASSIGN_OR_RETURN(plan.extra.index_file, index.AsString());
  if (!plan.extra.index_file.empty()) HUBLOAD_RETURN_IF_ERROR(listed(index, plan.extra.index_file));
  HUBLOAD_ASSIGN_OR_RETURN(plan.extra.weights_file, extra.String("weights_file"));
  HUBLOAD_ASSIGN_OR_RETURN(plan.extra.warnings, Strings(extra, "warnings"));
  return plan;
}

std::string OwnersJson(const std::vector<int>& owners) { return util::DumpJson(json(owners)); }

Result<std::vector<int>> ParseOwners(std::string_view text, std::string_view key, size_t num_files,
                                     int num_leaders) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(text, Doc(key)));
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn top, Top(j, key, /*object=*/false));
  HUBLOAD_ASSIGN_OR_RETURN(std::vector<JsonIn> elems, top.Elements());
  if (elems.size() != num_files)
    return top.Invalid("must hold one owner per listed file (" + std::to_string(num_files) + "), holds " +
                       std::to_string(elems.size()));
  std::vector<int> owners;
  owners.reserve(elems.size());
  for (const auto& e : elems) {
    HUBLOAD_ASSIGN_OR_RETURN(int64_t o, e.AsInt());
    if (o < -1 || o >= num_leaders)
      return e.Invalid("must be a leader index in -1 .. " + std::to_string(num_leaders - 1) + ", got " +
                       std::to_string(o));
    owners.push_back(static_cast<int>(o));
  }
  return owners;
}

std::string PartialFileJson(const PartialFileRecord& r) {
  return util::DumpJson(json{{"path", r.path}, {"dev", r.dev}, {"ino", r.ino}, {"bytes", r.bytes}});
}

Result<PartialFileRecord> ParsePartialFile(std::string_view text, std::string_view key) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(text, Doc(key)));
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn top, Top(j, key, /*object=*/true));
  PartialFileRecord r;
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn path, top.Get("path"));
  HUBLOAD_ASSIGN_OR_RETURN(r.path, path.AsString());
  if (r.path.empty() || r.path[0] != '/') return path.Invalid("must be an absolute path, got " + util::Quoted(r.path));
  HUBLOAD_ASSIGN_OR_RETURN(r.dev, top.Uint("dev"));
  HUBLOAD_ASSIGN_OR_RETURN(r.ino, top.Uint("ino"));
  HUBLOAD_ASSIGN_OR_RETURN(r.bytes, top.Uint("bytes"));
  return r;
}

std::string ErrorRecordJson(int rank, const Status& st) {
  return util::DumpJson(json{{"rank", rank},
                              {"code", static_cast<int>(st.code())},
                              {"reason", st.reason()},
                              {"message", st.message()},
                              {"file", st.context().file}});
}

Status ErrorFromRecord(std::string_view text, std::string_view key) {
  Status recorded;
  const Status read = [&]() -> Status {
    HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(text, Doc(key)));
    HUBLOAD_ASSIGN_OR_RETURN(JsonIn top, Top(j, key, /*object=*/true));
    HUBLOAD_RETURN_IF_ERROR(IntField(top, "rank", 0).status());
    HUBLOAD_ASSIGN_OR_RETURN(JsonIn code_in, top.Get("code"));
    HUBLOAD_ASSIGN_OR_RETURN(int64_t code, code_in.AsInt());
    if (code <= 0 || code > static_cast<int64_t>(Code::kInternal))
      return code_in.Invalid("must be an error code in 1 .. " + std::to_string(static_cast<int>(Code::kInternal)) +
                             ", got " + std::to_string(code));
    ErrorContext ctx;
    HUBLOAD_ASSIGN_OR_RETURN(std::string reason, top.String("reason"));
    HUBLOAD_ASSIGN_OR_RETURN(std::string message, top.String("message"));
    HUBLOAD_ASSIGN_OR_RETURN(ctx.file, top.String("file"));
    recorded = Status(static_cast<Code>(code), std::move(message), std::move(reason), std::move(ctx));
    return Status::Ok();
  }();
  if (read.ok()) return recorded;
  return Status(Code::kInternal, "job failed (" + read.message() + "): " + std::string(text),
                reason::kJobFailed);
}

}  // namespace hubload::distributed::internal
