// diffusers pipelines (hubload/pipeline.h): model_index.json, components, and
// DiffusionPipeline.from_pretrained for the weights, over the load driver.
#include <algorithm>
#include <filesystem>

#include "hubload/pipeline.h"
#include "hubload/reasons.h"
#include "loader/pipeline/common.h"
#include "loader/pipeline/plan.h"
#include "util/file_io.h"
#include "util/json.h"

namespace hubload {

namespace fs = std::filesystem;
using pipeline_internal::WithContext;

Result<std::vector<PipelineComponent>> ParseModelIndex(const std::string& json_text, const std::string& label) {
  auto parsed = util::ParseJson(json_text, label);
  if (!parsed.ok() || !parsed->is_object()) {
    Status st(Code::kInvalidFormat,
              "'" + label + "' is not a JSON object (model_index.json of a diffusers pipeline)" +
                  (parsed.ok() ? std::string() : ": " + parsed.status().message()),
              reason::kInvalidModelIndex);
    st.mutable_context().file = label;
    return st;
  }
  util::JsonIn doc(*parsed, label);
  HUBLOAD_ASSIGN_OR_RETURN(auto members, doc.Members());
  std::vector<PipelineComponent> out;
  for (const auto& [key, v] : members) {
    if (key.empty() || key[0] == '_') continue;
    // A component is ["library", "ClassName"]; anything else (config values, [null, null]) is not.
    auto items = v.Elements();
    if (!items.ok() || items->size() != 2) continue;
    auto lib = (*items)[0].AsString();
    auto cls = (*items)[1].AsString();
    if (!lib.ok() || !cls.ok()) continue;
    out.push_back({key, *lib, *cls});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

Result<std::vector<PipelineComponent>> ListComponents(const HubClient& client, const PretrainedRequest& req) {
  std::string text, label;
  if (pipeline_internal::IsLocalRequest(req)) {
    label = (fs::path(req.repo_id) / "model_index.json").string();
    auto read = util::ReadSmallFile(label);
    if (!read.ok()) {
      ErrorContext ctx;
      ctx.repo_id = req.repo_id;
      ctx.file = label;
      return Status(Code::kNotFound, "'" + req.repo_id + "' has no model_index.json: not a diffusers pipeline folder",
                    reason::kNotAPipeline, ctx);
    }
    text = std::move(*read);
  } else {
    FileRequest fr;
    fr.repo_id = req.repo_id;
    fr.filename = "model_index.json";
    fr.revision = req.revision;
    fr.repo_type = req.repo_type;
    auto path = client.Download(fr);
    if (!path.ok()) {
      if (path.status().code() == Code::kEntryNotFound) {
        Status st(Code::kNotFound,
                  req.repo_id + "@" + req.revision + " has no model_index.json: not a diffusers pipeline repo",
                  reason::kNotAPipeline, path.status().context());
        return WithContext(st, req.repo_id, req.revision, "model_index.json");
      }
      return path.status();
    }
    label = req.repo_id + "/model_index.json";
    HUBLOAD_ASSIGN_OR_RETURN(text, util::ReadSmallFile(*path));
  }
  return ParseModelIndex(text, label);
}

Result<PretrainedStateDict> LoadComponent(const HubClient& client, const PretrainedRequest& req,
                                          const std::string& name) {
  HUBLOAD_ASSIGN_OR_RETURN(auto components, ListComponents(client, req));
  std::string present;
  bool found = false;
  for (const auto& c : components) {
    present += (present.empty() ? "" : ", ") + c.name;
    if (c.name == name) found = true;
  }
  if (!found) {
    Status st(Code::kNotFound,
              "pipeline " + req.repo_id + " has no component '" + name + "' in model_index.json (components: " +
                  (present.empty() ? "(none)" : present) + ")",
              reason::kComponentNotFound);
    return WithContext(st, req.repo_id, pipeline_internal::IsLocalRequest(req) ? "" : req.revision, "model_index.json");
  }
  PretrainedRequest r = req;
  r.subfolder = name;
  return LoadStateDict(client, r);
}

Result<PretrainedPipeline> LoadPipeline(const HubClient& client, const PretrainedRequest& req) {
  HUBLOAD_ASSIGN_OR_RETURN(auto components, ListComponents(client, req));
  const bool local = pipeline_internal::IsLocalRequest(req);
  std::vector<std::string> paths;
  std::string revision = local ? "" : req.revision;
  PretrainedRequest base = req;
  if (local) {
    HUBLOAD_ASSIGN_OR_RETURN(paths, ListLocalFiles(req.repo_id));
  } else {
    HUBLOAD_ASSIGN_OR_RETURN(RepoListing listing, client.ListFiles(req.repo_id, req.revision, req.repo_type));
    for (const auto& f : listing.files) paths.push_back(f.path);
    base.revision = listing.commit;  // every component from the same commit
  }
  // Resolve every component before any weights download.
  PretrainedPipeline out;
  out.components = components;
  std::vector<std::string> with_weights, fallbacks;
  bool any_variant = false;
  for (const auto& c : components) {
    PretrainedRequest r = base;
    r.subfolder = c.name;
    ResolveOptions ro = pipeline_internal::ToResolveOptions(r);
    ro.allow_variant_fallback = true;
    auto res = ResolveWeights(paths, ro);
    if (!res.ok()) {
      // A folder without any weights (scheduler, tokenizer) is skipped; with a
      // variant asked, ResolveWeights reports VariantNotFound there, so check
      // the folder without the variant.
      ResolveOptions plain = ro;
      plain.variant.clear();
      auto any = ResolveWeights(paths, plain);
      if (any.status().Is(reason::kWeightsNotFound)) {
        out.skipped.push_back(c.name);
        continue;
      }
      return WithContext(res.status().WithPrefix(req.repo_id + " component " + c.name), req.repo_id, revision, c.name);
    }
    with_weights.push_back(c.name);
    if (!req.variant.empty()) {
      if (res->variant_used == req.variant) any_variant = true;
      else fallbacks.push_back(c.name);
    }
  }
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (!req.variant.empty() && !any_variant && !with_weights.empty()) {
    Status st(Code::kNotFound,
              "no component of pipeline " + req.repo_id + " has '" + req.variant + "' variant weights (components: " +
                  join(with_weights) + ")",
              reason::kVariantNotFound);
    return WithContext(st, req.repo_id, revision, "");
  }
  if (!fallbacks.empty() && !req.allow_variant_fallback) {
    Status st(Code::kNotFound,
              "components of pipeline " + req.repo_id + " without '" + req.variant + "' variant weights: " +
                  join(fallbacks) + " (allow the variant fallback to load their non-variant weights)",
              reason::kVariantNotFound);
    return WithContext(st, req.repo_id, revision, "");
  }
  for (const auto& f : fallbacks)
    out.warnings.push_back("component '" + f + "' has no '" + req.variant +
                           "' variant weights: its non-variant weights are loaded");
  for (const auto& name : with_weights) {
    PretrainedRequest r = base;
    r.subfolder = name;
    if (std::find(fallbacks.begin(), fallbacks.end(), name) != fallbacks.end()) r.variant.clear();  // warned above
    auto sd = LoadStateDict(client, r);
    if (!sd.ok()) return sd.status().WithPrefix("component " + name);
    sd->info.revision = req.revision;
    for (const auto& w : sd->info.warnings) out.warnings.push_back(name + ": " + w);
    out.loaded.emplace(name, std::move(*sd));
  }
  return out;
}

}  // namespace hubload
