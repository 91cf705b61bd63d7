// hf:// URIs as huggingface_hub's HfFileSystem writes them, for every CLI
// argument that takes a repo id or a path in a repo:
//
//   hf://org/name                      model org/name, default revision
//   hf://org/name@v1.0/sub/file.json   revision v1.0, path sub/file.json
//   hf://datasets/org/name@refs/pr/3/x dataset, revision refs/pr/3, path x
//   hf://spaces/org/name, hf://models/org/name
//
// Torch-free; no network. Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hubload/cache.h"
#include "hubload/status.h"

namespace hubload::cli {

/// A repo (and optionally a revision and a path in it) named on the command line.
struct RepoRef {
  std::string repo_id;                     // "org/name" (or a legacy one-segment id)
  RepoType repo_type = RepoType::kModel;
  bool repo_type_given = false;            // the URI said models/, datasets/ or spaces/
  std::string revision;                    // "" when the text gave none
  std::string path;                        // path in repo, "" when none
};

/// True when `text` starts with "hf://".
bool IsHfUri(std::string_view text);

/// Parses a plain repo id ("org/name", checked with ValidateRepoId) or an
/// hf:// URI (HfFileSystem's resolve_path grammar):
///   hf://[models/|datasets/|spaces/]ORG/NAME[@REVISION][/PATH]
/// ORG/NAME is two segments (a one-segment legacy id only when nothing but
/// @REVISION follows, since "hf://gpt2/x" cannot tell a path from a name
/// without asking the Hub). REVISION runs to the next '/', except
/// refs/pr/N and refs/convert/NAME, which keep their slashes; a
/// percent-encoded revision ("refs%2Fpr%2F3") is decoded. PATH is checked
/// with ValidateRepoPath; a trailing '/' is dropped. Errors: kInvalidArgument
/// reason kBadHfUri, the message quoting `text` and naming the rule broken
/// (empty segment, '@' without a revision, unsafe path, bad repo id, bad
/// revision).
Result<RepoRef> ParseRepoRef(std::string_view text);

/// Applies a command's REPO_ID argument (`*repo_arg`, a repo id or hf:// URI)
/// to its options: `*repo_arg` becomes the bare repo id; the URI's type and
/// revision replace `*repo_type` / `*revision` unless the user also gave
/// --repo-type / --revision (`*_set`) with another value (a usage error); its
/// path is put first in `*paths` (a usage error when `paths` is null: the
/// command takes no path). Returns 0, or 2 after printing
/// "hubload COMMAND: <why>" on stderr.
int ApplyRepoArg(const std::string& command, std::string* repo_arg, std::string* repo_type, bool repo_type_set,
                 std::string* revision, bool revision_set, std::vector<std::string>* paths);

/// ApplyRepoArg for a command that loads a model from a folder of the repo
/// (load, load-distributed): the URI's path is that folder and becomes
/// `*subfolder` ("hf://org/m/transformer" = org/m --subfolder transformer);
/// a --subfolder naming another folder (`subfolder_set`) is a usage error.
int ApplyRepoArgAsSubfolder(const std::string& command, std::string* repo_arg, std::string* repo_type,
                            bool repo_type_set, std::string* revision, bool revision_set, std::string* subfolder,
                            bool subfolder_set);

}  // namespace hubload::cli
