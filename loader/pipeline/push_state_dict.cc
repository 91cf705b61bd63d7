// PushStateDict: SaveSharded into a temp folder, then one UploadFolder commit.
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "hubload/split.h"
#include "hubload/upload_torch.h"
#include "hubload/reasons.h"

namespace hubload {
namespace fs = std::filesystem;

namespace {

// fnmatch escaping: a metacharacter becomes a one-character class.
std::string GlobEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']') {
      out += '[';
      out += c;
      out += ']';
    } else {
      out += c;
    }
  }
  return out;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  auto p = s.find(from);
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

// Removes the folder when the push is over.
struct TempFolder {
  std::string path;
  ~TempFolder() {
    if (path.empty()) return;
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

}  // namespace

std::vector<std::string> StaleCheckpointPatterns(const std::string& weights_name, const std::string& variant) {
  const std::string pattern = ShardFilenamePattern(weights_name, variant);  // "...{suffix}.safetensors"
  const std::string marker = "\x01";
  std::string esc = GlobEscape(Replace(pattern, "{suffix}", marker));
  std::string digits = "[0-9][0-9][0-9][0-9][0-9]";
  return {Replace(esc, marker, ""), Replace(esc, marker, "-" + digits + "-of-" + digits),
          GlobEscape(IndexFilename(weights_name, variant))};
}

Result<CommitInfo> PushStateDict(const HubClient& client, const StateDict& state_dict,
                                 const PushStateDictRequest& request) {
  if (state_dict.empty())
    return Status(Code::kInvalidArgument, "push to " + request.repo_id + ": the state dict is empty",
                  reason::kEmptyStateDict);
  HUBLOAD_RETURN_IF_ERROR(ValidateRepoId(request.repo_id));
  std::error_code ec;
  std::string tmpl = (fs::temp_directory_path(ec) / "hubload-push-XXXXXX").string();
  if (ec) tmpl = "/tmp/hubload-push-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    return Status(Code::kIOError, "push to " + request.repo_id + ": cannot create a temporary folder from '" + tmpl +
                                      "': " + std::strerror(errno));
  TempFolder tmp{buf.data()};
  auto saved = SaveSharded(state_dict, tmp.path, request.save);
  if (!saved.ok()) return saved.status().WithPrefix("push to " + request.repo_id + ": saving the state dict");

  UploadFolderRequest up;
  up.repo_id = request.repo_id;
  up.repo_type = request.repo_type;
  up.folder = tmp.path;
  up.path_in_repo = request.path_in_repo;
  up.revision = request.revision;
  up.commit_message = request.commit_message.empty() ? "Upload state dict using hubload" : request.commit_message;
  up.commit_description = request.commit_description;
  up.create_pr = request.create_pr;
  up.parent_commit = request.parent_commit;
  up.create_repo = request.create_repo;
  up.private_repo = request.private_repo;
  up.delete_patterns = StaleCheckpointPatterns(request.save.weights_name, request.save.variant);
  up.callbacks = request.callbacks;
  return client.UploadFolder(up);
}

}  // namespace hubload
