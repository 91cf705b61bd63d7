// Choosing one quantisation's files (hubload/quant.h, field failure B55).
#include "hubload/quant.h"
#include "hubload/reasons.h"

#include <algorithm>
#include <map>
#include <optional>

#include "util/text.h"

namespace hubload {
namespace {

struct Part {
  std::string path, artifact;
  int index = 0, count = 0;  // 0, 0: a single file
  bool malformed = false;    // looks like a part, but the numbers break the rule
};

// "NAME-NNNNN-of-MMMMM" at the end of `stem` (".gguf" already removed).
Part ParsePart(const std::string& path) {
  Part p;
  p.path = path;
  std::string stem = path.substr(0, path.size() - 5);
  p.artifact = stem;
  const auto suffix = util::ParseShardSuffix(stem);
  if (!suffix) return p;
  p.artifact = stem.substr(0, suffix->prefix_len);
  p.index = suffix->shard;
  p.count = suffix->count;
  p.malformed = suffix->malformed;
  return p;
}

bool HasWord(const std::string& artifact, std::string_view tag) {
  size_t b = 0;
  while (b <= artifact.size()) {
    size_t e = artifact.find_first_of("-./", b);
    if (e == std::string::npos) e = artifact.size();
    if (util::EqualsIgnoreCase(std::string_view(artifact).substr(b, e - b), tag)) return true;
    b = e + 1;
  }
  return false;
}

std::string Describe(const std::string& artifact, int count) {
  return count > 0 ? artifact + " (" + std::to_string(count) + " parts)" : artifact;
}

}  // namespace

Result<QuantSelection> SelectQuantFiles(const std::vector<std::string>& repo_paths, std::string_view tag) {
  // Artifacts keyed by (name, part count); single files have count 0.
  std::map<std::pair<std::string, int>, std::vector<Part>> artifacts;
  std::vector<std::string> bad;
  for (const std::string& path : repo_paths) {
    if (!util::EndsWithIgnoreCase(path, ".gguf") || path.size() <= 5) continue;
    Part p = ParsePart(path);
    if (p.malformed) {
      if (tag.empty() || HasWord(p.artifact, tag)) bad.push_back(path);
      continue;
    }
    if (!tag.empty() && !HasWord(p.artifact, tag)) continue;
    artifacts[{p.artifact, p.count}].push_back(std::move(p));
  }
  auto list_all = [&]() {
    std::vector<std::string> names;
    for (const std::string& path : repo_paths) {
      if (!util::EndsWithIgnoreCase(path, ".gguf") || path.size() <= 5) continue;
      Part p = ParsePart(path);
      if (p.malformed) continue;
      std::string d = Describe(p.artifact, p.count);
      if (std::find(names.begin(), names.end(), d) == names.end()) names.push_back(d);
    }
    return util::JoinCut(names, 20);
  };
  const std::string what = tag.empty() ? std::string("no quant tag") : "quant tag '" + std::string(tag) + "'";
  if (!bad.empty() && artifacts.empty())
    return Status(Code::kInvalidArgument,
                  what + ": " + bad.front() + " is not a valid split part name (NAME-NNNNN-of-MMMMM.gguf with " +
                      "1 <= NNNNN <= MMMMM)",
                  reason::kBadPartName);
  if (artifacts.empty())
    return Status(Code::kInvalidArgument, what + " matches no GGUF file; available: " + list_all(),
                  reason::kNoSuchQuant);
  if (artifacts.size() > 1) {
    std::vector<std::string> names;
    for (auto& [key, parts] : artifacts) names.push_back(Describe(key.first, key.second));
    if (tag.empty())
      return Status(Code::kInvalidArgument, "several GGUF artifacts and no quant tag; available: " + list_all(),
                    reason::kNoSuchQuant);
    return Status(Code::kInvalidArgument, what + " matches several artifacts: " + util::JoinCut(names, 20),
                  reason::kAmbiguousQuant);
  }
  auto& [key, parts] = *artifacts.begin();
  QuantSelection sel;
  sel.artifact = key.first;
  sel.parts = std::max(1, key.second);
  std::sort(parts.begin(), parts.end(), [](const Part& a, const Part& b) { return a.index < b.index; });
  if (key.second > 0) {
    std::vector<std::string> missing;
    int present = 0;
    for (int i = 1, k = 0; i <= key.second; ++i) {
      while (k < static_cast<int>(parts.size()) && parts[k].index < i) ++k;
      if (k < static_cast<int>(parts.size()) && parts[k].index == i) ++present;
      else missing.push_back(std::to_string(i));
    }
    if (!missing.empty())
      return Status(Code::kInvalidArgument,
                    what + ": incomplete split: " + std::to_string(present) + " of " + std::to_string(key.second) +
                        " parts present for " + key.first + " (missing part " + util::JoinCut(missing, 10) + ")",
                    reason::kIncompleteSplit);
  }
  for (auto& p : parts)
    if (sel.files.empty() || sel.files.back() != p.path) sel.files.push_back(p.path);
  return sel;
}

}  // namespace hubload
