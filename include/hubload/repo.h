// hubload/repo.h: the vocabulary of a Hub repository shared by the cache, the
// Hub client, the uploader and `hubload serve` — repo type, repo id, commit
// hash and THE rule for a path inside a repo. One rule, so that what the
// uploader refuses, the server refuses and the client never writes.
//
// Sources: huggingface_hub constants.REPO_TYPES, utils/_validators.py
// (validate_repo_id), _commit_api.py (_validate_path_in_repo and
// FORBIDDEN_FOLDERS = [".git", ".cache"]), and the Hub, which rejects commits
// touching those folders.
//
// Thread safety: pure functions of their arguments; callable from any thread.
#pragma once

#include <string_view>

#include "hubload/status.h"

namespace hubload {

/// Hub repository kinds (huggingface_hub constants.REPO_TYPES).
enum class RepoType { kModel, kDataset, kSpace };

/// "model" / "dataset" / "space".
const char* RepoTypeName(RepoType t);
/// Parses "model"/"dataset"/"space" (also the plurals); kInvalidArgument
/// reason "BadRepoType" naming the text otherwise.
Result<RepoType> ParseRepoType(std::string_view s);

/// True when `s` is a full commit id: exactly 40 lowercase hex digits
/// (huggingface_hub REGEX_COMMIT_HASH `^[0-9a-f]{40}$`).
bool IsCommitHash(std::string_view s);

/// Checks a repo id ("name" or "namespace/name", as huggingface_hub
/// validate_repo_id): one or two non-empty segments of [A-Za-z0-9._-], at most
/// 96 characters in all, no "..", no "--", no segment starting or ending with
/// '-' or '.', not ending in ".git". kInvalidArgument reason "BadRepoId"
/// naming the id and the rule broken.
Status ValidateRepoId(std::string_view repo_id);

/// Checks a path inside a repo — given by a caller, listed by a server, read
/// from a cache file or a commit body — before it is joined to a snapshot, a
/// local_dir or a server store. The rule (POSIX and Windows forms together,
/// B16; the forbidden folders as huggingface_hub _validate_path_in_repo):
///  - relative and '/'-separated: not empty, no leading '/', no backslash,
///    no Windows drive ("C:x", "C:\\x") or UNC form;
///  - no empty, "." or ".." segment (so no trailing '/', no "a//b");
///  - valid UTF-8 (the Hub's API carries paths in JSON strings);
///  - no NUL, no other control character (< 0x20) and no DEL (0x7f);
///  - at most 4096 bytes in all and 255 bytes per segment (Linux PATH_MAX /
///    NAME_MAX: longer names could never be written);
///  - no segment equal to ".git" or ".cache" (case-sensitive like the Hub
///    and huggingface_hub: ".gitattributes", ".github", ".Git" are allowed).
/// Errors: kInvalidArgument, message naming the path (control characters,
/// and every byte >= 0x80 of a path that is not UTF-8, shown as \xNN) and the rule; reason "UnsafePath" for the structural rules,
/// "ForbiddenFolder" (reason::kForbiddenFolder) for a ".git" / ".cache"
/// segment, checked after the structural rules.
Status ValidateRepoPath(std::string_view path);

}  // namespace hubload
