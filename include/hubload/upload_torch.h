// hubload/upload_torch.h: push a LibTorch state dict to the Hub as a sharded
// safetensors checkpoint (SaveSharded, then HubClient::UploadFolder in one commit).
//
// This is the only upload header that needs LibTorch; it lives in
// hubload_pipeline (link hubload::hubload_pipeline).
//
// Thread safety: as UploadFolder (concurrent calls are independent).
#pragma once

#include <string>

#include "hubload/hub.h"
#include "hubload/torch_loader.h"
#include "hubload/upload.h"

namespace hubload {

struct PushStateDictRequest {
  std::string repo_id;  // "org/name"
  RepoType repo_type = RepoType::kModel;
  /// Subfolder in the repo the checkpoint goes to ("" = root, "unet" ...).
  std::string path_in_repo;
  std::string revision = "main";
  /// "" = "Upload state dict using hubload".
  std::string commit_message;
  std::string commit_description;
  bool create_pr = false;
  std::string parent_commit;
  bool create_repo = false;
  bool private_repo = false;
  /// max_shard_size (bytes or a huggingface_hub size string such as "5GB"),
  /// variant ("fp16" ...), weights_name ("model", "diffusion_pytorch_model")
  /// and index metadata, exactly as SaveSharded takes them.
  SaveOptions save;
  UploadCallbacks callbacks;
};

/// Saves `state_dict` with SaveSharded into a fresh temporary folder (removed
/// before returning, whatever happens), then uploads that folder to
/// `path_in_repo` with UploadFolder in ONE commit that also deletes the stale
/// files of the same weights name and variant under path_in_repo: exactly
/// `{name}.safetensors`, `{name}-NNNNN-of-NNNNN.safetensors` (name = weights
/// name with the variant, as ShardFilenamePattern) and the index
/// (IndexFilename), unless this save writes them. Other variants, other
/// weights names and unrelated files are never deleted (B27 on the Hub side).
/// Shards whose bytes the Hub already holds are not re-sent.
/// Errors: those of SaveSharded (kInvalidArgument, kUnsupported, kDiskFull,
/// kIOError) and UploadFolder (see upload.h); on any error no commit is made.
Result<CommitInfo> PushStateDict(const HubClient& client, const StateDict& state_dict,
                                 const PushStateDictRequest& request);

/// The fnmatch delete patterns PushStateDict uses for a weights name and
/// variant: {single file, shard glob, index name}, with fnmatch
/// metacharacters of the names escaped. ("model", "fp16") ->
/// {"model.fp16.safetensors",
///  "model.fp16-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].safetensors",
///  "model.safetensors.index.fp16.json"}.
std::vector<std::string> StaleCheckpointPatterns(const std::string& weights_name, const std::string& variant);

}  // namespace hubload
