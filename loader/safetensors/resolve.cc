// Weight-file resolution (loading-semantics.md section A). Torch-free.
#include "util/text.h"
#include "hubload/resolve.h"
#include "hubload/reasons.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <system_error>
#include <unordered_set>

#include "loader/safetensors/internal.h"

namespace hubload {
namespace {

std::string Join(const std::string& folder, const std::string& name) {
  return folder.empty() ? name : folder + "/" + name;
}

std::string JoinList(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += v[i];
  }
  return s;
}

struct Candidate {
  std::string name;  // basename
  ResolvedWeights::Kind kind;
  bool pickle;
  bool legacy;
  std::string stem;
};

// The candidate list of one weights family (stem for safetensors, stem for pickle),
// in the convention's order, for one variant ("" = none).
std::vector<Candidate> FamilyCandidates(const std::string& safe_stem, const std::string& pickle_stem,
                                        const std::string& v, bool index_first, bool allow_pickle) {
  std::vector<Candidate> safe_index, safe_single, bin_index, bin_single;
  safe_index.push_back({AddVariant(safe_stem + ".safetensors.index.json", v), ResolvedWeights::kSharded, false,
                        false, safe_stem});
  if (!v.empty())
    safe_index.push_back({safe_stem + ".safetensors." + v + ".index.json", ResolvedWeights::kSharded, false, true,
                          safe_stem});
  safe_single.push_back({AddVariant(safe_stem + ".safetensors", v), ResolvedWeights::kSingleFile, false, false,
                         safe_stem});
  bin_index.push_back({AddVariant(pickle_stem + ".bin.index.json", v), ResolvedWeights::kSharded, true, false,
                       pickle_stem});
  if (!v.empty())
    bin_index.push_back({pickle_stem + ".bin." + v + ".index.json", ResolvedWeights::kSharded, true, true,
                         pickle_stem});
  bin_single.push_back({AddVariant(pickle_stem + ".bin", v), ResolvedWeights::kSingleFile, true, false, pickle_stem});

  std::vector<Candidate> out;
  auto add = [&](const std::vector<Candidate>& c) { out.insert(out.end(), c.begin(), c.end()); };
  if (index_first) {
    add(safe_index);
    add(safe_single);
    if (allow_pickle) {
      add(bin_index);
      add(bin_single);
    }
  } else {
    add(safe_single);
    add(safe_index);
    if (allow_pickle) {
      add(bin_single);
      add(bin_index);
    }
  }
  return out;
}

std::vector<Candidate> AllCandidates(const ResolveOptions& o, const std::string& v) {
  std::vector<Candidate> out;
  using C = ResolveOptions::Convention;
  if (o.convention == C::kDiffusers || o.convention == C::kAuto) {
    auto c = FamilyCandidates("diffusion_pytorch_model", "diffusion_pytorch_model", v, true, o.allow_pickle);
    out.insert(out.end(), c.begin(), c.end());
  }
  if (o.convention == C::kTransformers || o.convention == C::kAuto) {
    auto c = FamilyCandidates("model", "pytorch_model", v, o.convention == C::kAuto, o.allow_pickle);
    out.insert(out.end(), c.begin(), c.end());
  }
  return out;
}

// Variants present in `folder` for the known weights names ("(none)" for non-variant weights).
std::vector<std::string> VariantsPresent(const std::vector<std::string>& files, const std::string& folder) {
  static const std::set<std::string> kStems = {"diffusion_pytorch_model", "model", "pytorch_model"};
  std::set<std::string> variants;
  bool none = false;
  std::string prefix = folder.empty() ? "" : folder + "/";
  for (const auto& f : files) {
    if (f.compare(0, prefix.size(), prefix) != 0) continue;
    std::string base = f.substr(prefix.size());
    auto w = ParseWeightsFileName(base);
    if (!w || !kStems.count(w->stem)) continue;
    if (w->variant.empty()) none = true;
    else variants.insert(w->variant);
  }
  std::vector<std::string> out(variants.begin(), variants.end());
  if (none) out.insert(out.begin(), "(none)");
  return out;
}

std::optional<ResolvedWeights> TryResolve(const std::unordered_set<std::string>& present, const std::string& folder,
                                          const ResolveOptions& o, const std::string& v,
                                          std::vector<std::string>* looked_for) {
  for (const auto& c : AllCandidates(o, v)) {
    std::string path = Join(folder, c.name);
    if (looked_for) looked_for->push_back(path);
    if (!present.count(path)) continue;
    ResolvedWeights r;
    r.kind = c.kind;
    r.weights_file = path;
    r.weights_name = c.stem;
    r.variant_used = v;
    r.legacy_variant_names = c.legacy;
    r.is_pickle = c.pickle;
    r.subfolder = folder;
    if (c.legacy)
      r.warnings.push_back("'" + path + "' uses the deprecated legacy variant naming (`name.ext." + v +
                           ".index.json`); re-save it to get `name.ext.index." + v + ".json`");
    if (c.kind == ResolvedWeights::kSharded) {
      // Note a single file lying next to the index: it is ignored (B23 variant 3).
      std::string single = Join(folder, AddVariant(c.stem + (c.pickle ? ".bin" : ".safetensors"), v));
      if (present.count(single))
        r.warnings.push_back("'" + single + "' is ignored: the index '" + path + "' takes precedence");
    }
    return r;
  }
  return std::nullopt;
}

}  // namespace

std::string NormaliseSubfolder(std::string_view subfolder) {
  while (!subfolder.empty() && subfolder.front() == '/') subfolder.remove_prefix(1);
  while (!subfolder.empty() && subfolder.back() == '/') subfolder.remove_suffix(1);
  return std::string(subfolder);
}

std::string AddVariant(const std::string& name, const std::string& variant) {
  if (variant.empty()) return name;
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return name + "." + variant;
  return name.substr(0, dot) + "." + variant + name.substr(dot);
}

Result<ResolvedWeights> ResolveWeights(const std::vector<std::string>& repo_files, const ResolveOptions& options) {
  for (char c : options.variant) {
    if (c == '/' || c == '\\' || std::isspace(static_cast<unsigned char>(c)) || c == '\0')
      return Status(Code::kInvalidArgument,
                    "variant '" + options.variant + "' may not contain '/', '\\' or whitespace",
                    reason::kInvalidVariant);
  }
  std::string folder = NormaliseSubfolder(options.subfolder);
  std::unordered_set<std::string> present(repo_files.begin(), repo_files.end());
  std::vector<std::string> looked_for;
  if (auto r = TryResolve(present, folder, options, options.variant, &looked_for)) return *r;

  std::string where = folder.empty() ? "the repo root" : "'" + folder + "/'";
  if (!options.variant.empty()) {
    auto fallback = TryResolve(present, folder, options, "", nullptr);
    if (fallback && options.allow_variant_fallback) {
      fallback->warnings.insert(fallback->warnings.begin(),
                                "variant '" + options.variant + "' not found in " + where + "; using the non-variant '" +
                                    fallback->weights_file + "' instead");
      return *fallback;
    }
    auto variants = VariantsPresent(repo_files, folder);
    std::string msg = "no weights for variant '" + options.variant + "' in " + where + " (looked for " +
                      JoinList(looked_for) + "); variants present: " +
                      (variants.empty() ? std::string("none") : JoinList(variants));
    if (fallback) msg += "; pass no variant (or allow the fallback) to load '" + fallback->weights_file + "'";
    Status st(Code::kNotFound, msg, reason::kVariantNotFound);
    st.mutable_context().file = folder;
    return st;
  }
  // A diffusers pipeline root (model_index.json) keeps its weights in
  // subfolders: name those that have some (the first level only).
  std::string hint;
  if (folder.empty()) {
    std::set<std::string> with_weights;
    for (const std::string& f : repo_files)
      if (auto slash = f.find('/'); slash != std::string::npos && slash > 0) {
        const std::string sub = f.substr(0, slash);
        if (!with_weights.count(sub) && TryResolve(present, sub, options, options.variant, nullptr))
          with_weights.insert(sub);
      }
    if (!with_weights.empty())
      hint = "; these subfolders have weights: " +
             JoinList(std::vector<std::string>(with_weights.begin(), with_weights.end())) + " (load one of them)";
  }
  Status st(Code::kNotFound, "no weights found in " + where + " (looked for " + JoinList(looked_for) + ")" + hint,
            reason::kWeightsNotFound);
  st.mutable_context().file = folder;
  return st;
}

Result<std::vector<std::string>> ShardPaths(const ResolvedWeights& resolved, const safetensors::Index& index,
                                            const std::vector<std::string>& repo_files) {
  const std::string ext = resolved.is_pickle ? ".bin" : ".safetensors";
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : index.weight_map) shards.insert(shard);
  if (shards.empty()) {
    Status st(Code::kInvalidFormat, "index '" + resolved.weights_file + "' names no shard (empty weight_map)",
              reason::kEmptyIndex);
    st.mutable_context().file = resolved.weights_file;
    return st;
  }
  const std::string& v = resolved.variant_used;
  std::unordered_set<std::string> present(repo_files.begin(), repo_files.end());
  std::vector<std::string> out, missing;
  for (const auto& s : shards) {
    bool bad = s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
               s.find('\\') != std::string::npos || s.find('\0') != std::string::npos ||
               s.find("..") != std::string::npos || (s.size() >= 2 && s[1] == ':') ||
               s.size() <= ext.size() || s.compare(s.size() - ext.size(), ext.size(), ext) != 0;
    if (bad) {
      Status st(Code::kInvalidFormat,
                "index '" + resolved.weights_file + "' names shard '" + s +
                    "': a shard must be a plain file name (no '/', '\\', '..', drive) ending in '" + ext + "'",
                reason::kInvalidShardName);
      st.mutable_context().file = resolved.weights_file;
      return st;
    }
    // With a variant every shard carries it; without one, no shard is a variant
    // shard of this weights name (other names, e.g. consolidated-*, are free).
    const auto w = ParseWeightsFileName(s);
    bool mixing = v.empty() ? (w && w->stem == resolved.weights_name && !w->variant.empty())
                            : !(w && w->variant == v);
    if (mixing) {
      Status st(Code::kInvalidFormat,
                "index '" + resolved.weights_file + "' names shard '" + s + "', which " +
                    (v.empty() ? std::string("is a variant shard, but no variant was asked")
                               : "does not carry the variant '" + v + "'") +
                    ": variant and non-variant files must not be mixed",
                reason::kVariantMixing);
      st.mutable_context().file = resolved.weights_file;
      return st;
    }
    std::string path = Join(resolved.subfolder, s);
    if (!present.count(path)) missing.push_back(path);
    out.push_back(path);
  }
  if (!missing.empty()) {
    Status st(Code::kNotFound,
              "index '" + resolved.weights_file + "' names " + std::to_string(missing.size()) +
                  " shard(s) that are not present: " + util::JoinCut(missing),
              reason::kMissingShards);
    st.mutable_context().file = missing.front();
    st.mutable_context().names = missing;  // the message cuts the list
    return st;
  }
  return out;
}

Result<std::vector<std::string>> ListLocalFiles(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    Status st(Code::kNotFound, "'" + root + "' is not a folder", reason::kNotAFolder);
    st.mutable_context().file = root;
    return st;
  }
  std::vector<std::string> out;
  fs::recursive_directory_iterator it(root, fs::directory_options::follow_directory_symlink, ec), end;
  size_t guard = 0;
  for (; !ec && it != end; it.increment(ec)) {
    if (++guard > 10'000'000) break;
    const auto& p = it->path();
    std::string fname = p.filename().string();
    if (it->is_directory(ec)) {
      if (!fname.empty() && fname[0] == '.') it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    out.push_back(p.lexically_relative(fs::path(root)).generic_string());
  }
  if (ec) {
    Status st(Code::kIOError, "cannot list '" + root + "': " + ec.message(), reason::kListFailed);
    st.mutable_context().file = root;
    return st;
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hubload
