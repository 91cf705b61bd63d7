// Local checkpoints: a file, an index or a folder -> the files to read, in load
// order, with the index-family checks (torch-free; hubload/resolve.h).
#include <algorithm>
#include <filesystem>
#include <set>

#include "hubload/reasons.h"
#include "hubload/resolve.h"

namespace hubload {
namespace fs = std::filesystem;

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "name.safetensors.index.V.json" / legacy "name.safetensors.V.index.json" / "name.safetensors.index.json".
void DescribeIndexName(const std::string& base, ResolvedWeights* r) {
  for (const std::string ext : {".safetensors.", ".bin."}) {
    auto pos = base.find(ext);
    if (pos == std::string::npos) continue;
    r->weights_name = base.substr(0, pos);
    r->is_pickle = ext == ".bin.";
    std::string rest = base.substr(pos + ext.size());  // index.json | index.V.json | V.index.json
    if (rest.rfind("index.", 0) == 0 && EndsWith(rest, ".json") && rest.size() > 11) {
      r->variant_used = rest.substr(6, rest.size() - 11);
    } else if (EndsWith(rest, ".index.json") && rest.size() > 11) {
      r->variant_used = rest.substr(0, rest.size() - 11);
      r->legacy_variant_names = true;
    }
    return;
  }
  r->weights_name = base;
}

Status PickleUnsupported(const std::string& file) {
  Status st(Code::kUnsupported,
            "'" + file + "' is a pickle (.bin) checkpoint; hubload loads safetensors only — convert it "
            "(e.g. with huggingface's safetensors convert script) and load the .safetensors file",
            std::string(reason::kPickleUnsupported));
  st.mutable_context().file = file;
  return st;
}

}  // namespace

Result<LocalCheckpointFiles> ResolveLocalCheckpoint(const std::string& path, const ResolveOptions& options) {
  std::error_code ec;
  LocalCheckpointFiles out;
  if (fs::is_directory(path, ec)) {
    HUBLOAD_ASSIGN_OR_RETURN(auto listing, ListLocalFiles(path));
    HUBLOAD_ASSIGN_OR_RETURN(out.resolved, ResolveWeights(listing, options));
    std::string full = (fs::path(path) / out.resolved.weights_file).string();
    if (out.resolved.is_pickle) return PickleUnsupported(full);
    if (out.resolved.kind == ResolvedWeights::kSingleFile) {
      out.files.push_back(full);
      return out;
    }
    out.index_path = full;
    HUBLOAD_ASSIGN_OR_RETURN(out.index, safetensors::ReadIndex(full));
    HUBLOAD_ASSIGN_OR_RETURN(auto shards, ShardPaths(out.resolved, out.index, listing));
    for (const auto& s : shards) out.files.push_back((fs::path(path) / s).string());
    // Shards of the same family that the index does not name are ignored, with a warning (B23).
    std::string prefix = out.resolved.subfolder.empty() ? "" : out.resolved.subfolder + "/";
    std::string family = AddVariant(out.resolved.weights_name + ".safetensors", out.resolved.variant_used);
    family = family.substr(0, family.size() - 12);
    std::set<std::string> named(shards.begin(), shards.end());
    auto is_digits = [](const std::string& x) {
      return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    for (const auto& f : listing) {
      if (f.compare(0, prefix.size(), prefix) != 0 || named.count(f)) continue;
      std::string base = f.substr(prefix.size());
      // family-NNNNN-of-NNNNN.safetensors
      if (base.size() != family.size() + 27 || base.compare(0, family.size() + 1, family + "-") != 0 ||
          !EndsWith(base, ".safetensors"))
        continue;
      std::string mid = base.substr(family.size() + 1, 14);  // NNNNN-of-NNNNN
      if (!is_digits(mid.substr(0, 5)) || mid.substr(5, 4) != "-of-" || !is_digits(mid.substr(9, 5))) continue;
      out.resolved.warnings.push_back("'" + f + "' is not named by the index '" + out.resolved.weights_file +
                                        "' and is ignored");
    }
    return out;
  }
  if (!fs::exists(path, ec)) {
    Status st(Code::kNotFound, "'" + path + "' does not exist", "NotFound");
    st.mutable_context().file = path;
    return st;
  }
  std::string base = fs::path(path).filename().string();
  if (EndsWith(base, ".json")) {
    out.resolved.kind = ResolvedWeights::kSharded;
    out.resolved.weights_file = base;
    DescribeIndexName(base, &out.resolved);
    if (out.resolved.is_pickle) return PickleUnsupported(path);
    out.index_path = path;
    HUBLOAD_ASSIGN_OR_RETURN(out.index, safetensors::ReadIndex(path));
    fs::path dir = fs::path(path).parent_path();
    std::vector<std::string> listing;
    for (auto it = fs::directory_iterator(dir.empty() ? fs::path(".") : dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      listing.push_back(it->path().filename().string());
    HUBLOAD_ASSIGN_OR_RETURN(auto shards, ShardPaths(out.resolved, out.index, listing));
    for (const auto& s : shards) out.files.push_back((dir / s).string());
    return out;
  }
  if (EndsWith(base, ".bin")) return PickleUnsupported(path);
  out.resolved.kind = ResolvedWeights::kSingleFile;
  out.resolved.weights_file = base;
  out.resolved.weights_name = base.substr(0, base.find('.'));
  out.files.push_back(path);
  return out;
}

}  // namespace hubload
