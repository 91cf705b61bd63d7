// hf:// URI parsing (tools/hubload/hf_uri.h).
#include "tools/hubload/hf_uri.h"

#include <cstdio>
#include <vector>

#include "hubload/reasons.h"
#include "util/percent.h"

namespace hubload::cli {
namespace {

constexpr std::string_view kScheme = "hf://";

Status Bad(std::string_view text, const std::string& rule) {
  return Status(Code::kInvalidArgument, "'" + std::string(text) + "' is not a repo id or hf:// URI: " + rule,
                reason::kBadHfUri);
}

std::vector<std::string_view> Split(std::string_view s) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find('/', start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

}  // namespace

bool IsHfUri(std::string_view text) { return text.substr(0, kScheme.size()) == kScheme; }

Result<RepoRef> ParseRepoRef(std::string_view text) {
  RepoRef ref;
  if (!IsHfUri(text)) {
    Status v = ValidateRepoId(text);
    if (!v.ok()) return Bad(text, v.message());
    ref.repo_id = std::string(text);
    return ref;
  }
  std::string_view rest = text.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);  // "hf://org/name/" = the repo root
  if (rest.empty()) return Bad(text, "nothing after hf://");
  std::vector<std::string_view> parts = Split(rest);
  size_t i = 0;
  if (parts[0] == "models" || parts[0] == "datasets" || parts[0] == "spaces") {
    auto t = ParseRepoType(parts[0]);
    if (!t.ok()) return Bad(text, t.status().message());
    ref.repo_type = *t;
    ref.repo_type_given = true;
    ++i;
  }
  for (size_t k = i; k < parts.size(); ++k)
    if (parts[k].empty()) return Bad(text, "empty segment (\"//\")");
  if (i == parts.size()) return Bad(text, "no repo id after '" + std::string(parts[0]) + "/'");
  // ORG/NAME[@REV][/PATH], or a legacy one-segment NAME[@REV] with nothing after.
  std::string repo;
  std::string_view rev_text;
  bool has_at = false;
  bool one_segment = false;
  size_t next = 0;
  if (size_t at = parts[i].find('@'); at != std::string_view::npos) {
    one_segment = true;
    repo = std::string(parts[i].substr(0, at));
    rev_text = parts[i].substr(at + 1);
    has_at = true;
    next = i + 1;
  } else if (i + 1 == parts.size()) {
    one_segment = true;
    repo = std::string(parts[i]);
    next = i + 1;
  } else {
    std::string_view name = parts[i + 1];
    size_t at = name.find('@');
    repo = std::string(parts[i]) + "/" + std::string(name.substr(0, at));
    if (at != std::string_view::npos) {
      has_at = true;
      rev_text = name.substr(at + 1);
    }
    next = i + 2;
  }
  Status v = ValidateRepoId(repo);
  if (!v.ok()) return Bad(text, v.message());
  ref.repo_id = repo;
  if (has_at) {
    if (rev_text.empty()) return Bad(text, "'@' without a revision");
    std::string rev(rev_text);
    // refs/pr/N and refs/convert/NAME keep their slashes (HfFileSystem's special refs).
    if (rev == "refs" && next < parts.size() && (parts[next] == "pr" || parts[next] == "convert")) {
      if (next + 1 >= parts.size()) return Bad(text, "'@refs/" + std::string(parts[next]) + "' without a name");
      rev += "/" + std::string(parts[next]) + "/" + std::string(parts[next + 1]);
      next += 2;
    }
    auto decoded = util::PercentDecode(rev);
    if (!decoded || decoded->empty()) return Bad(text, "malformed percent-escape in revision '" + rev + "'");
    if (decoded->find('@') != std::string::npos) return Bad(text, "more than one '@'");
    Status rv = ValidateRevision(*decoded);
    if (!rv.ok()) return Bad(text, rv.message());
    ref.revision = *decoded;
  }
  if (one_segment && next < parts.size())
    return Bad(text, "a one-segment repo id cannot be followed by a path (write ORG/NAME@REV/PATH)");
  std::string path;
  for (size_t k = next; k < parts.size(); ++k) path += (path.empty() ? "" : "/") + std::string(parts[k]);
  if (!path.empty()) {
    Status pv = ValidateRepoPath(path);
    if (!pv.ok()) return Bad(text, pv.message());
    ref.path = path;
  }
  return ref;
}

int ApplyRepoArg(const std::string& command, std::string* repo_arg, std::string* repo_type, bool repo_type_set,
                 std::string* revision, bool revision_set, std::vector<std::string>* paths) {
  auto usage = [&](const std::string& why) {
    std::fprintf(stderr, "hubload %s: %s\n", command.c_str(), why.c_str());
    return 2;
  };
  auto ref = ParseRepoRef(*repo_arg);
  if (!ref.ok()) return usage(ref.status().message());
  if (ref->repo_type_given) {
    auto given = ParseRepoType(*repo_type);
    if (repo_type_set && (!given.ok() || *given != ref->repo_type))
      return usage("--repo-type " + *repo_type + " contradicts '" + *repo_arg + "'");
    *repo_type = RepoTypeName(ref->repo_type);
  }
  if (!ref->revision.empty()) {
    if (revision_set && *revision != ref->revision)
      return usage("--revision " + *revision + " contradicts '" + *repo_arg + "'");
    *revision = ref->revision;
  }
  if (!ref->path.empty()) {
    if (!paths) return usage("'" + *repo_arg + "' names a path in the repo; this command takes a repo only");
    paths->insert(paths->begin(), ref->path);
  }
  *repo_arg = ref->repo_id;
  return 0;
}

int ApplyRepoArgAsSubfolder(const std::string& command, std::string* repo_arg, std::string* repo_type,
                            bool repo_type_set, std::string* revision, bool revision_set, std::string* subfolder,
                            bool subfolder_set) {
  const std::string given = *repo_arg;
  std::vector<std::string> paths;
  if (int rc = ApplyRepoArg(command, repo_arg, repo_type, repo_type_set, revision, revision_set, &paths); rc != 0)
    return rc;
  if (paths.empty()) return 0;
  if (subfolder_set && *subfolder != paths[0]) {
    std::fprintf(stderr, "hubload %s: --subfolder %s contradicts '%s'\n", command.c_str(), subfolder->c_str(),
                 given.c_str());
    return 2;
  }
  *subfolder = paths[0];
  return 0;
}

}  // namespace hubload::cli
