// hubload/quant.h: choosing the files of one quantisation of a repo that holds
// several (GGUF repos: `repo:Q4_K_M` in ollama, llama.cpp `-hf repo:quant`,
// LM Studio), split artifacts included (field failure B55).
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "hubload/status.h"

namespace hubload {

/// The files of one artifact: one file, or every part of a split one.
struct QuantSelection {
  /// Repo paths, part 1 first then in part order (the path to hand to a
  /// runtime is files[0], as llama.cpp opens part 1 and finds the others).
  std::vector<std::string> files;
  /// Name of the artifact: its path without the part suffix and ".gguf"
  /// ("Q4_K_M/m-Q4_K_M").
  std::string artifact;
  /// Number of parts (1 for a single file).
  int parts = 1;
};

/// Chooses among the `*.gguf` files of `repo_paths` (a repo listing) the one
/// artifact `tag` names, before anything is downloaded:
///  - a file belongs to tag T when T equals, ignoring ASCII case, one of the
///    '-', '.' or '/'-separated words of its path (without ".gguf" and the
///    part suffix), so "Q4_K_M" and "q4_k_m" pick "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf"
///    and "MXFP4" picks "m-mxfp4.gguf"; "best" picks the single file
///    "best-of-breed.gguf" (never a part: its name has no part suffix);
///  - a part is named `NAME-NNNNN-of-MMMMM.gguf` (llama.cpp gguf-split), with
///    5-digit numbers and 1 <= NNNNN <= MMMMM; the parts with the same NAME and
///    MMMMM are one artifact;
///  - an empty tag is allowed only when the repo holds one artifact.
/// Errors (kInvalidArgument, the message lists what is there): reason
/// "NoSuchQuant" (nothing matches, or no tag and several artifacts: lists the
/// artifacts), "AmbiguousQuant" (several artifacts match), "IncompleteSplit"
/// ("incomplete split: 1 of 2 parts present", naming the artifact and the
/// missing parts), "BadPartName" (a matching file whose part suffix is
/// malformed, e.g. "-00000-of-00002" or NNNNN > MMMMM).
Result<QuantSelection> SelectQuantFiles(const std::vector<std::string>& repo_paths, std::string_view tag);

}  // namespace hubload
