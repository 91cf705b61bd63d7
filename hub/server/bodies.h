// Typed request bodies of `hubload serve` and their parsers. Every body is
// parsed with util::ParseJson and read through util::JsonIn only; a body that
// breaks its shape gives a Status (reason BadJson, BadJsonField,
// BadRequestBody or BadLfsObject) naming the field, which the handlers answer
// with 400 (422 for BadLfsObject). Pure functions: no I/O (fuzzed by
// tests/fuzz/server_commit_fuzz.cc and server_router_fuzz.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hubload/cache.h"
#include "hubload/status.h"

namespace hubload::server::internal {

/// POST /api/{type}s/{repo}/preupload/{rev}: {"files": [{"path", "size"?, "sample"?}]}.
struct PreuploadFile {
  std::string path;
  uint64_t size = 0;
};
Result<std::vector<PreuploadFile>> ParsePreupload(const std::string& body, const std::string& doc);

/// POST {repo}.git/info/lfs/objects/batch (git-lfs batch API).
struct LfsObject {
  std::string oid;
  uint64_t size = 0;
};
struct LfsBatchBody {
  std::string operation = "download";  // "download" | "upload"
  std::string hash_algo = "sha256";
  bool multipart = false;  // "multipart" among `transfers`
  std::vector<LfsObject> objects;
};
Result<LfsBatchBody> ParseLfsBatch(const std::string& body, const std::string& doc);

/// POST /api/repos/create: {"name", "organization"?, "type"?, "private"?,
/// "visibility"?, "files"?: [{"path", "content", "encoding"?}]}.
struct CreateRepoBody {
  std::string name, organization;
  RepoType type = RepoType::kModel;
  bool private_repo = false;
  std::map<std::string, std::string> files;  // path -> bytes (base64 decoded)
};
Result<CreateRepoBody> ParseCreateRepo(const std::string& body, const std::string& doc);

/// POST /api/{type}s/{repo}/paths-info/{rev}: JSON {"paths": [...], "expand"?}
/// or a form body (paths=a&paths=b&expand=true), chosen by `content_type`.
struct PathsInfoBody {
  std::vector<std::string> paths;
  bool expand = false;
};
Result<PathsInfoBody> ParsePathsInfo(const std::string& body, const std::string& content_type,
                                     const std::string& doc);

/// Multipart completion: {"oid"?, "parts": [{"partNumber", "etag"}]}.
struct MultipartCompleteBody {
  std::optional<std::string> oid;
  std::map<uint64_t, std::string> etags;  // partNumber -> etag as sent
};
Result<MultipartCompleteBody> ParseMultipartComplete(const std::string& body, const std::string& doc);

/// POST /api/{type}s/{repo}/branch/{name}: {"startingPoint"?, "emptyBranch"?,
/// "overwrite"?} (an empty body is {}).
struct BranchBody {
  std::string starting_point;
  bool empty = false;
  bool overwrite = false;
};
Result<BranchBody> ParseBranchBody(const std::string& body, const std::string& doc);

/// POST /api/{type}s/{repo}/tag/{revision}: {"tag", "message"?}.
struct TagBody {
  std::string tag, message;
};
Result<TagBody> ParseTagBody(const std::string& body, const std::string& doc);

/// PUT /api/{type}s/{repo}/settings (huggingface_hub update_repo_settings):
/// {"private"?: bool, "gated"?: "auto" | "manual" | false}; other keys ignored.
struct SettingsBody {
  std::optional<bool> private_repo;
  std::optional<std::string> gated;  // "" = not gated
};
Result<SettingsBody> ParseSettingsBody(const std::string& body, const std::string& doc);

/// POST /api/{type}s/{repo}/commit/{rev}: NDJSON, one {"key", "value"} per
/// line (trailing newline optional, blank lines skipped): exactly one
/// "header" {summary?, description?, parentCommit?}, then "file" {path,
/// content, encoding?}, "lfsFile" {path, oid (64 hex), size?, algo?},
/// "deletedFile" {path}, "deletedFolder" {path}. Paths must be committable
/// (relative, no '..', no .git/.cache segment).
struct CommitLine {
  enum class Kind { kFile, kLfsFile, kDeletedFile, kDeletedFolder };
  Kind kind = Kind::kFile;
  int line = 0;
  std::string path;
  std::string content;  // kFile: decoded bytes
  std::string oid;      // kLfsFile: sha256
  std::optional<uint64_t> size;
};
struct CommitBody {
  std::string summary, description, parent_commit;
  std::vector<CommitLine> ops;
};
Result<CommitBody> ParseCommitNdjson(const std::string& body, const std::string& doc);

}  // namespace hubload::server::internal
