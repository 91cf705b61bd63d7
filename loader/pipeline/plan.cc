// The one fetch plan (loader/pipeline/plan.h).
#include "loader/pipeline/plan.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>

#include "hubload/reasons.h"
#include "hubload/repo.h"
#include "loader/pipeline/common.h"

namespace hubload::pipeline_internal {
namespace {

namespace fs = std::filesystem;

std::string BaseName(const std::string& p) {
  auto pos = p.find_last_of('/');
  return pos == std::string::npos ? p : p.substr(pos + 1);
}

// An index file named directly: its weights name and variant from the grammar.
void DescribeIndexName(const std::string& base, ResolvedWeights* r) {
  auto w = ParseWeightsFileName(base);
  if (!w || w->kind != WeightsFileName::Kind::kIndex) {
    r->weights_name = base.substr(0, base.find('.'));
    return;
  }
  r->weights_name = w->stem;
  r->is_pickle = w->pickle;
  r->variant_used = w->variant;
  r->legacy_variant_names = w->legacy_variant;
}

/// Resolution over a listing whose index (when sharded) is read by `read_index`.
struct Resolution {
  ResolvedWeights resolved;
  safetensors::Index index;
  std::vector<std::string> files;  // repo/folder-relative, load order
};

template <typename ReadIndex>
Result<Resolution> ResolveOver(const std::vector<std::string>& listing, const ResolvedWeights& resolved,
                               const ReadIndex& read_index) {
  Resolution r;
  r.resolved = resolved;
  if (resolved.kind == ResolvedWeights::kSingleFile) {
    r.files = {resolved.weights_file};
    return r;
  }
  HUBLOAD_ASSIGN_OR_RETURN(r.index, read_index(resolved.weights_file));
  HUBLOAD_ASSIGN_OR_RETURN(r.files, ShardPaths(resolved, r.index, listing));
  for (const auto& f : UnnamedShards(resolved, listing, r.files))
    r.resolved.warnings.push_back("'" + f + "' is not named by the index '" + resolved.weights_file +
                                  "' and is ignored");
  return r;
}

Result<FetchPlan> PlanLocal(const PretrainedRequest& req, bool allow_pickle, PretrainedInfo* info) {
  const std::string& path = req.repo_id;
  std::error_code ec;
  info->source = "local";
  FetchPlan plan;
  plan.local = true;
  Resolution res;
  fs::path root;
  if (fs::is_directory(path, ec)) {
    root = path;
    HUBLOAD_ASSIGN_OR_RETURN(auto listing, ListLocalFiles(path));
    HUBLOAD_ASSIGN_OR_RETURN(ResolvedWeights resolved, ResolveWeights(listing, ToResolveOptions(req)));
    if (resolved.is_pickle && !allow_pickle)
      return PickleUnsupported((root / resolved.weights_file).string(), path, "");
    auto read = [&](const std::string& rel) {
      return safetensors::ReadIndex((root / rel).string(), resolved.is_pickle ? ".bin" : ".safetensors");
    };
    HUBLOAD_ASSIGN_OR_RETURN(res, ResolveOver(listing, resolved, read));
  } else if (!fs::exists(path, ec)) {
    Status st(Code::kNotFound, "'" + path + "' does not exist", reason::kNotFound);
    st.mutable_context().file = path;
    return st;
  } else {
    // A weights file or an index file named directly: its folder is the listing.
    root = fs::path(path).parent_path();
    const std::string base = fs::path(path).filename().string();
    ResolvedWeights resolved;
    resolved.weights_file = base;
    if (base.ends_with(".json")) {
      resolved.kind = ResolvedWeights::kSharded;
      DescribeIndexName(base, &resolved);
    } else {
      resolved.kind = ResolvedWeights::kSingleFile;
      resolved.weights_name = base.substr(0, base.find('.'));
      resolved.is_pickle = base.ends_with(".bin");
    }
    if (resolved.is_pickle && !allow_pickle) return PickleUnsupported(path, path, "");
    std::vector<std::string> listing;
    for (auto it = fs::directory_iterator(root.empty() ? fs::path(".") : root, ec);
         !ec && it != fs::directory_iterator(); it.increment(ec))
      listing.push_back(it->path().filename().string());
    auto read = [&](const std::string&) {
      return safetensors::ReadIndex(path, resolved.is_pickle ? ".bin" : ".safetensors");
    };
    HUBLOAD_ASSIGN_OR_RETURN(res, ResolveOver(listing, resolved, read));
  }
  info->root = root.string();
  info->resolved = res.resolved;
  plan.sharded = res.resolved.kind == ResolvedWeights::kSharded;
  plan.index = std::move(res.index);
  if (plan.sharded) info->index_file = (root / res.resolved.weights_file).string();
  if (plan.sharded && !fs::is_directory(path, ec)) info->index_file = path;
  for (const auto& rel : res.files) {
    PlannedShard s;
    s.file = (root.empty() ? fs::path(rel) : root / rel).string();
    if (!plan.sharded && !fs::is_directory(path, ec)) s.file = path;
    s.local_path = s.file;
    auto sz = fs::file_size(s.local_path, ec);
    s.size = ec ? 0 : sz;
    s.format = res.resolved.is_pickle ? ShardFormat::kPickle : ShardFormat::kSafetensors;
    plan.shards.push_back(std::move(s));
  }
  return plan;
}

Result<FetchPlan> PlanHub(const HubClient& client, const PretrainedRequest& req, bool allow_pickle,
                          PretrainedInfo* info, const RepoListing* listed) {
  RepoListing own;
  if (!listed) {
    HUBLOAD_ASSIGN_OR_RETURN(own, client.ListFiles(req.repo_id, req.revision, req.repo_type));
    listed = &own;
  }
  const RepoListing& listing = *listed;
  info->source = "hub";
  info->commit = listing.commit;
  for (const auto& w : listing.warnings) info->warnings.push_back(w);
  RepoCache cache(client.options().config.cache_dir, req.repo_id, req.repo_type);
  info->root = cache.SnapshotDir(listing.commit);
  std::vector<std::string> paths;
  std::map<std::string, uint64_t> sizes;
  for (const auto& f : listing.files) {
    paths.push_back(f.path);
    sizes[f.path] = f.size;
  }
  const std::string where = req.repo_id + "@" + req.revision;
  auto resolved = ResolveWeights(paths, ToResolveOptions(req));
  if (!resolved.ok()) return resolved.status().WithPrefix(where);
  if (resolved->is_pickle && !allow_pickle)
    return PickleUnsupported(resolved->weights_file, req.repo_id, req.revision);
  auto read = [&](const std::string& index_file) -> Result<safetensors::Index> {
    FileRequest fr;
    fr.repo_id = req.repo_id;
    fr.filename = index_file;
    fr.revision = listing.commit;  // every file from the listed commit
    fr.repo_type = req.repo_type;
    HUBLOAD_ASSIGN_OR_RETURN(std::string local, client.Download(fr));
    return safetensors::ReadIndex(local, resolved->is_pickle ? ".bin" : ".safetensors");
  };
  auto res = ResolveOver(paths, *resolved, read);
  if (!res.ok()) {
    Status st = res.status().WithPrefix(where + " " + resolved->weights_file);
    ErrorContext ctx;
    ctx.file = resolved->weights_file;
    return st.Annotate(ctx);
  }
  info->resolved = res->resolved;
  FetchPlan plan;
  plan.sharded = res->resolved.kind == ResolvedWeights::kSharded;
  plan.index = std::move(res->index);
  if (plan.sharded) info->index_file = res->resolved.weights_file;
  for (const auto& f : res->files) {
    PlannedShard s;
    s.file = f;
    s.local_path = cache.PointerPath(listing.commit, f);
    s.size = sizes[f];
    s.format = res->resolved.is_pickle ? ShardFormat::kPickle : ShardFormat::kSafetensors;
    plan.shards.push_back(std::move(s));
  }
  return plan;
}

}  // namespace

bool IsLocalRequest(const PretrainedRequest& req) {
  if (req.source == PretrainedRequest::Source::kLocal) return true;
  if (req.source == PretrainedRequest::Source::kHub) return false;
  std::error_code ec;
  return fs::exists(req.repo_id, ec);
}

ResolveOptions ToResolveOptions(const PretrainedRequest& req) {
  ResolveOptions ro;
  ro.subfolder = req.subfolder;
  ro.variant = req.variant;
  ro.allow_variant_fallback = req.allow_variant_fallback;
  ro.convention = req.convention;
  ro.allow_pickle = true;  // resolved so that the refusal (or the pickle loader) can name the file
  return ro;
}

Status CheckRequest(const PretrainedRequest& req, bool local, PretrainedInfo* info) {
  info->repo_id = req.repo_id;
  info->revision = local ? "" : req.revision;
  return CheckRequest(req, local);
}

Status CheckRequest(const PretrainedRequest& req, bool local) {
  if (req.repo_id.empty())
    return Status(Code::kInvalidArgument, "empty repo_id (a Hub repo id or a local path)", reason::kEmptyRepoId);
  if (req.max_shards_in_flight < 1)
    return Status(Code::kInvalidArgument,
                  "max_shards_in_flight must be >= 1 (got " + std::to_string(req.max_shards_in_flight) + ")",
                  reason::kInvalidArgument);
  if (!req.subfolder.empty()) {
    // A folder inside the repo (or the local folder): the one path rule, so
    // "../x" is refused here, not answered "no weights found". Leading and
    // trailing '/' are allowed, as ResolveWeights strips them.
    const std::string sub = NormaliseSubfolder(req.subfolder);
    Status valid = sub.empty() ? Status::Ok() : ValidateRepoPath(sub);
    if (!valid.ok()) {
      ErrorContext ctx;
      ctx.repo_id = req.repo_id;
      return Status(Code::kInvalidArgument, "subfolder: " + valid.message(), valid.reason(), ctx);
    }
  }
  if (!local && req.source == PretrainedRequest::Source::kAuto) {
    Status valid = ValidateRepoId(req.repo_id);
    if (!valid.ok()) {
      ErrorContext ctx;
      ctx.repo_id = req.repo_id;
      ctx.file = req.repo_id;
      return Status(Code::kNotFound,
                    "'" + req.repo_id + "' is neither an existing local path nor a valid Hub repo id (" +
                        valid.message() + ")",
                    reason::kNotFound, ctx);
    }
  }
  return Status::Ok();
}

Status PickleUnsupported(const std::string& file, const std::string& repo_id, const std::string& revision) {
  ErrorContext ctx;
  ctx.repo_id = repo_id;
  ctx.revision = revision;
  ctx.file = file;
  std::string in = repo_id.empty() || repo_id == file ? "" : " in " + repo_id;
  return Status(Code::kUnsupported,
                "'" + file + "'" + in +
                    " is a pickle (.bin) checkpoint; hubload never executes pickled code and loads it only "
                    "through its restricted reader — convert it to safetensors (hubload reshard FILE OUT_DIR) "
                    "or load the .safetensors weights",
                reason::kPickleUnsupported, ctx);
}

std::vector<std::string> UnnamedShards(const ResolvedWeights& resolved, const std::vector<std::string>& listing,
                                       const std::vector<std::string>& named) {
  const std::string prefix = resolved.subfolder.empty() ? "" : resolved.subfolder + "/";
  const std::set<std::string> known(named.begin(), named.end());
  std::vector<std::string> out;
  for (const auto& f : listing) {
    if (f.compare(0, prefix.size(), prefix) != 0 || known.count(f) || known.count(BaseName(f))) continue;
    const std::string base = f.substr(prefix.size());
    if (base.find('/') != std::string::npos) continue;  // this folder only
    // A shard of the same family: same stem, variant and format, in the current naming.
    auto w = ParseWeightsFileName(base);
    if (w && w->kind == WeightsFileName::Kind::kShard && !w->legacy_variant && w->stem == resolved.weights_name &&
        w->variant == resolved.variant_used && w->pickle == resolved.is_pickle)
      out.push_back(f);
  }
  return out;
}

Result<FetchPlan> MakeFetchPlan(const HubClient* client, const PretrainedRequest& req, bool allow_pickle,
                                PretrainedInfo* info, const RepoListing* listing) {
  if (!IsLocalRequest(req) && !client)
    return Status(Code::kInvalidArgument, "'" + req.repo_id + "' is not a local path and no Hub client was given",
                  reason::kNoClient);
  auto plan = IsLocalRequest(req) ? PlanLocal(req, allow_pickle, info)
                                  : PlanHub(*client, req, allow_pickle, info, listing);
  if (!plan.ok()) return plan.status();
  for (const auto& w : info->resolved.warnings) info->warnings.push_back(w);
  for (const auto& s : plan->shards) {
    info->files.push_back(s.file);
    info->local_files.push_back(s.local_path);
    info->weights_bytes += s.size;
  }
  return plan;
}

Status ReadShardHeaders(const HubClient* client, const PretrainedRequest& req, const PretrainedInfo& info,
                        FetchPlan* plan) {
  for (PlannedShard& s : plan->shards) {
    if (s.format == ShardFormat::kPickle) {
      if (plan->local) {
        HUBLOAD_ASSIGN_OR_RETURN(s.description, pickle::ReadCheckpointFile(s.local_path));
      }
      continue;
    }
    if (plan->local) {
      HUBLOAD_ASSIGN_OR_RETURN(s.header, safetensors::ReadMetadata(s.local_path));
    } else {
      const std::string label = Where(info, s.file);
      FileRequest fr;
      fr.repo_id = req.repo_id;
      fr.filename = s.file;
      fr.revision = info.commit;
      fr.repo_type = req.repo_type;
      HUBLOAD_ASSIGN_OR_RETURN(std::string prefix, client->ReadRange(fr, 0, 8));
      HUBLOAD_ASSIGN_OR_RETURN(uint64_t need,
                               safetensors::PeekHeaderLength(reinterpret_cast<const uint8_t*>(prefix.data()),
                                                             prefix.size(), s.size, label));
      if (need > prefix.size()) {
        HUBLOAD_ASSIGN_OR_RETURN(std::string rest, client->ReadRange(fr, prefix.size(), need - prefix.size()));
        prefix += rest;
      }
      HUBLOAD_ASSIGN_OR_RETURN(s.header, safetensors::ParseHeader(reinterpret_cast<const uint8_t*>(prefix.data()),
                                                                  prefix.size(), s.size, label));
    }
    if (plan->sharded) {  // lenient: the plan holds the tensors that will load (the driver warns)
      auto applied = ApplyIndexToShard(plan->index, s.file, req.lenient_index, &s.header->tensors);
      if (!applied.ok()) return applied.status();
    }
  }
  return Status::Ok();
}

std::string Where(const PretrainedInfo& info, const std::string& file) {
  if (info.source == "hub") return info.repo_id + "@" + info.revision + " " + file;
  return file;
}

}  // namespace hubload::pipeline_internal
