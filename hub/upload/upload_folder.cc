// huggingface_hub upload_folder: the folder walk, allow/ignore patterns and
// delete_patterns (hub/upload/upload_internal.h).
#include <algorithm>
#include <filesystem>
#include <set>

#include "hub/answers.h"
#include "hub/listing.h"
#include "hub/upload/upload_internal.h"
#include "util/file_io.h"
#include "util/text.h"
#include "hubload/reasons.h"

namespace hubload::hub_internal::upload {
namespace fs = std::filesystem;

namespace {

// huggingface_hub DEFAULT_IGNORE_PATTERNS.
const std::vector<std::string> kDefaultIgnore = {".git",
                                                 ".git/*",
                                                 "*/.git",
                                                 "**/.git/**",
                                                 ".cache/huggingface",
                                                 ".cache/huggingface/*",
                                                 "*/.cache/huggingface",
                                                 "**/.cache/huggingface/**"};

std::string StripSlashes(std::string s) {
  while (!s.empty() && s.front() == '/') s.erase(s.begin());
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}

// Every file of the repo at `revision` (no cache involved).
Result<std::vector<RepoFile>> RemoteFiles(const Session& s, const std::string& repo_id, const std::string& revision,
                                          RepoType type) {
  std::string commit = revision;
  if (!IsCommitHash(revision)) {
    std::string url = s.ApiUrl(type, repo_id, "/revision/" + EncodeRevision(revision));
    ErrorContext ctx = s.Ctx(repo_id, revision, "");
    HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json j, s.GetJson(url, ctx));
    auto sha = ParseRevisionSha(j, RedactUrl(url));
    if (!sha.ok()) return sha.status().Annotate(ctx);
    if (!IsCommitHash(*sha))
      return Status(Code::kInvalidFormat, "revision info of " + repo_id + "@" + revision + " has no 40-hex 'sha'",
                    reason::kBadRevisionInfo, ctx);
    commit = *sha;
  }
  HUBLOAD_ASSIGN_OR_RETURN(RepoListing l, ListTree(s, type, repo_id, commit));
  return std::move(l.files);
}

// True when a regular file below the symlinked folder `dir` (not followed
// further; at most 100000 entries looked at) would pass the patterns as
// `rel`/..., i.e. when not entering the folder leaves out a file the upload wanted.
bool SymlinkedFolderMatches(const fs::path& dir, const std::string& rel, const std::vector<std::string>& allow,
                            const std::vector<std::string>& ignore) {
  std::error_code ec;
  size_t seen = 0;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator() && ++seen <= 100'000; it.increment(ec)) {
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    if (MatchesPatterns(rel + "/" + it->path().lexically_relative(dir).generic_string(), allow, ignore)) return true;
  }
  return seen > 100'000;  // too large to tell: say it
}

}  // namespace

bool LooksLikeLfsPointer(const std::string& path, uint64_t size) {
  static constexpr std::string_view kFirstLine = "version https://git-lfs.github.com/spec/v1";
  if (size >= 1024 || size < kFirstLine.size()) return false;
  auto text = util::ReadSmallFile(path, 1024);
  if (!text.ok()) return false;
  std::string_view t = *text;
  return t.substr(0, kFirstLine.size()) == kFirstLine &&
         (t.size() == kFirstLine.size() || t[kFirstLine.size()] == '\n' || t[kFirstLine.size()] == '\r');
}

Result<CommitInfo> UploadFolder(const Session& s, const UploadFolderRequest& request) {
  HUBLOAD_RETURN_IF_ERROR(CheckRequest(request));
  std::error_code ec;
  if (!fs::is_directory(request.folder, ec))
    return Status(Code::kInvalidArgument, "upload to " + request.repo_id + ": '" + request.folder + "' is not a folder",
                  reason::kNotAFolder);
  const std::string prefix = StripSlashes(request.path_in_repo);
  if (!prefix.empty()) HUBLOAD_RETURN_IF_ERROR(ValidateRepoPath(prefix));

  // Local files, filtered as huggingface_hub filter_repo_objects.
  std::vector<std::string> ignore = request.ignore_patterns;
  ignore.insert(ignore.end(), kDefaultIgnore.begin(), kDefaultIgnore.end());
  std::vector<CommitAdd> adds;
  std::vector<std::string> skipped;  // CommitInfo::warnings of the walk
  fs::path root(request.folder);
  size_t visited = 0;
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (++visited > 10'000'000) return Status(Code::kInvalidArgument, "'" + request.folder + "' has too many entries");
    std::error_code ec2;
    if (!it->is_regular_file(ec2)) {  // files and symlinks to files
      std::string rel = it->path().lexically_relative(root).generic_string();
      const std::string local = it->path().string();
      std::error_code e3;
      auto own = it->symlink_status(e3);
      if (fs::is_symlink(own) && fs::is_directory(it->path(), e3)) {
        // Named only when a file under it would have been uploaded had it been entered.
        if (SymlinkedFolderMatches(it->path(), rel, request.allow_patterns, ignore))
          skipped.push_back("skipped symlinked folder '" + local + "' (not entered)");
        continue;
      }
      // Only what the allow/ignore patterns would have uploaded is worth a word.
      if (!MatchesPatterns(rel, request.allow_patterns, ignore)) continue;
      if (fs::is_symlink(own) && !fs::exists(it->path(), e3))
        skipped.push_back("skipped dangling symlink '" + local + "'");
      else if (fs::is_fifo(own) || fs::is_socket(own) || fs::is_block_file(own) || fs::is_character_file(own) ||
               (fs::is_symlink(own) && !fs::is_directory(it->path(), e3)))
        skipped.push_back("skipped '" + local + "': not a regular file (FIFO, socket or device)");
      continue;
    }
    std::string rel = it->path().lexically_relative(root).generic_string();
    if (!MatchesPatterns(rel, request.allow_patterns, ignore)) continue;
    std::string in_repo = prefix.empty() ? rel : prefix + "/" + rel;
    Status v = ValidateRepoPath(in_repo);
    if (!v.ok()) return v.WithPrefix("local file '" + it->path().string() + "' cannot be uploaded");
    adds.push_back({in_repo, it->path().string()});
  }
  if (ec) return Status(Code::kIOError, "cannot list '" + request.folder + "': " + ec.message());
  std::sort(adds.begin(), adds.end(),
            [](const CommitAdd& a, const CommitAdd& b) { return a.path_in_repo < b.path_in_repo; });

  // What was skipped explains an empty commit (e.g. a folder holding only a dangling link).
  const std::string why_empty = skipped.empty() ? "" : " (" + util::JoinCut(skipped, 5) + ")";
  if (adds.empty() && request.delete_patterns.empty())
    return Status(Code::kInvalidArgument,
                  "nothing to upload from '" + request.folder + "' to " + request.repo_id +
                      ": no file matches the allow/ignore patterns and no delete pattern is given" + why_empty,
                  reason::kEmptyCommit);
  if (request.create_repo) {
    auto url = CreateRepo(s, request.repo_id, request.repo_type, request.private_repo);
    if (!url.ok()) return url.status();
  }

  // Remote files to delete (huggingface_hub _prepare_folder_deletions).
  std::vector<std::string> deletions;
  if (!request.delete_patterns.empty()) {
    auto files = RemoteFiles(s, request.repo_id, request.create_pr ? "main" : request.revision, request.repo_type);
    if (!files.ok()) return files.status().WithPrefix("listing files to delete in " + request.repo_id);
    std::set<std::string> added;
    for (auto& a : adds) added.insert(a.path_in_repo);
    const std::string pre = prefix.empty() ? "" : prefix + "/";
    for (const auto& f : *files) {
      if (f.path.compare(0, pre.size(), pre) != 0) continue;
      std::string rel = f.path.substr(pre.size());
      if (f.path == ".gitattributes" || added.count(f.path)) continue;
      if (MatchesPatterns(rel, request.delete_patterns, {})) deletions.push_back(f.path);
    }
  }
  if (adds.empty() && deletions.empty())
    return Status(Code::kInvalidArgument,
                  "nothing to upload from '" + request.folder + "' to " + request.repo_id +
                      ": no file matches the allow/ignore patterns and nothing is to be deleted" + why_empty,
                  reason::kEmptyCommit);
  UploadFolderRequest r = request;
  if (r.commit_message.empty()) r.commit_message = "Upload folder using hubload";
  auto info = CreateCommit(s, r, adds, deletions);
  if (info.ok()) info->warnings.insert(info->warnings.begin(), skipped.begin(), skipped.end());
  return info;
}

}  // namespace hubload::hub_internal::upload
