// Private to hub/: every JSON document the Hub answers, read through the
// checked accessor layer (util::JsonIn). Each parser takes the parsed value
// and the document's name (a redacted URL) and returns the fields the client
// uses, or kInvalidFormat "BadJsonField" naming the document and the field
// path ("files[3].uploadMode must be a string, got an integer"). Never
// throws; every type of every field is checked (tests/hub/answers_test.cc
// sets each field of each document to each JSON type; tests/fuzz/
// hub_json_fuzz.cc feeds arbitrary text).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "hubload/hub.h"

namespace hubload::hub_internal {

/// GET /api/{type}s/{repo}/revision/{rev}: the "sha" string (not yet checked to be 40 hex).
Result<std::string> ParseRevisionSha(const nlohmann::json& j, const std::string& doc);

/// One page of GET /api/{type}s/{repo}/tree/{rev}?recursive=true: the file
/// entries ("type" == "file"; folders skipped), paths not yet validated.
Result<std::vector<RepoFile>> ParseTreePage(const nlohmann::json& j, const std::string& doc);

/// POST /api/{type}s/{repo}/preupload/{rev}: files[] entries.
struct PreuploadEntry {
  std::string path;
  std::string upload_mode;  // "lfs" or "regular" (checked by the caller)
  bool should_ignore = false;
  std::string oid;          // "" when absent
};
Result<std::vector<PreuploadEntry>> ParsePreupload(const nlohmann::json& j, const std::string& doc);

/// POST {repo}.git/info/lfs/objects/batch: objects[] entries.
struct LfsBatchObject {
  std::string oid;
  uint64_t size = 0;
  bool has_error = false;
  int64_t error_code = 0;
  std::string error_message;
  /// Empty when the server already stores the object (no upload action).
  std::string upload_href;
  std::string verify_href;
  uint64_t chunk_size = 0;  // multipart when > 0
  /// Part number -> URL, sorted by number (multipart only).
  std::vector<std::pair<uint64_t, std::string>> parts;
};
Result<std::vector<LfsBatchObject>> ParseLfsBatch(const nlohmann::json& j, const std::string& doc);

/// POST /api/{type}s/{repo}/commit/{rev}.
struct CommitAnswer {
  std::string commit_oid;
  std::string commit_url;
  std::string pr_url;  // "" when absent
};
Result<CommitAnswer> ParseCommitAnswer(const nlohmann::json& j, const std::string& doc);

/// POST /api/repos/create: the "url" string when present.
Result<std::optional<std::string>> ParseRepoUrl(const nlohmann::json& j, const std::string& doc);

/// GET /api/{type}s/{repo}/refs: "branches", "tags" and (when present)
/// "pullRequests" arrays of {name, ref, targetCommit}; other keys
/// ("converts") ignored. targetCommit is checked to be 40 lower-case hex.
Result<RepoRefs> ParseRefs(const nlohmann::json& j, const std::string& doc);

/// One page of GET /api/{type}s/{repo}/commits/{rev}: an array of {id,
/// title, message, date, authors: [{user}]} (huggingface_hub GitCommitInfo);
/// a missing message or authors list is empty.
Result<std::vector<GitCommitInfo>> ParseCommitsPage(const nlohmann::json& j, const std::string& doc);

}  // namespace hubload::hub_internal
