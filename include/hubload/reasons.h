// hubload/reasons.h: the stable `Status::reason()` values callers may switch
// on, as named constants grouped by the module that raises them. Library code
// compares reasons only through these constants (`st.Is(reason::kHashMismatch)`),
// never through string literals, so a typo is a compile error and one failure
// has one name on every path.
//
// Thread safety: constants.
#pragma once

#include <string_view>

namespace hubload::reason {

// ---- cache (blob writers, locks) -------------------------------------------
/// Downloaded bytes do not have the expected sha256 / git blob id.
inline constexpr std::string_view kHashMismatch = "HashMismatch";
/// Downloaded bytes are fewer or more than the announced size.
inline constexpr std::string_view kSizeMismatch = "SizeMismatch";
/// Another process held a blob's lock longer than the lock timeout.
inline constexpr std::string_view kLockTimeout = "LockTimeout";
inline constexpr std::string_view kDiskFull = "DiskFull";
inline constexpr std::string_view kInsufficientSpace = "InsufficientSpace";

// ---- hub (client, transport) ------------------------------------------------
/// A server answered byte ranges in a way no chunk fits (fall back to one stream).
inline constexpr std::string_view kRangesUnusable = "RangesUnusable";
/// A body sink stopped the transfer on purpose (enough bytes read).
inline constexpr std::string_view kSinkAborted = "SinkAborted";
inline constexpr std::string_view kCancelled = "Cancelled";
inline constexpr std::string_view kOfflineMiss = "OfflineMiss";
/// A path in a repo that breaks the structural rule (hubload/repo.h).
inline constexpr std::string_view kUnsafePath = "UnsafePath";
/// A path in a repo with a ".git" or ".cache" segment (hubload/repo.h;
/// huggingface_hub FORBIDDEN_FOLDERS; the Hub refuses them in commits).
inline constexpr std::string_view kForbiddenFolder = "ForbiddenFolder";
/// Transport: the connection was refused / the host name did not resolve
/// (retried only RetryPolicy::max_unreachable_retries times).
inline constexpr std::string_view kConnectFailed = "ConnectFailed";
inline constexpr std::string_view kDnsFailed = "DnsFailed";
/// An endpoint or redirect URL whose scheme is not http or https.
inline constexpr std::string_view kUnsupportedScheme = "UnsupportedScheme";
/// A redirect from https to http while the endpoint is https.
inline constexpr std::string_view kInsecureRedirect = "InsecureRedirect";
/// A request header (token, user agent, custom header) with CR, LF or NUL.
inline constexpr std::string_view kBadHeaderValue = "BadHeaderValue";

// ---- untrusted JSON (util/json.h) ------------------------------------------
/// Text that is not JSON (or nests too deep).
inline constexpr std::string_view kBadJson = "BadJson";
/// JSON whose field has the wrong type, range or shape, or is missing.
inline constexpr std::string_view kBadJsonField = "BadJsonField";

// ---- distributed (loader/distributed) ---------------------------------------
/// A rank of the job failed (its error record, or a malformed one, is the message).
inline constexpr std::string_view kJobFailed = "JobFailed";

// ---- server (hubload serve) -------------------------------------------------
/// A request body or query string the server cannot accept (answered 400).
inline constexpr std::string_view kBadRequestBody = "BadRequestBody";
/// An LFS batch object without a valid oid/size (answered 422, as git-lfs servers).
inline constexpr std::string_view kBadLfsObject = "BadLfsObject";
/// A branch or tag of that name exists already, or the name clashes with one
/// ("a/b" beside "a", as git refuses) (answered 409).
inline constexpr std::string_view kRefExists = "RefExists";
/// A commit's parent_commit is not the branch head (answered 412, as the Hub).
inline constexpr std::string_view kParentMismatch = "ParentMismatch";

// ---- weights resolution and loading ----------------------------------------
inline constexpr std::string_view kWeightsNotFound = "WeightsNotFound";
inline constexpr std::string_view kVariantNotFound = "VariantNotFound";
inline constexpr std::string_view kMissingShards = "MissingShards";
/// Pickle (`.bin`) weights that hubload will not load.
inline constexpr std::string_view kPickleUnsupported = "PickleUnsupported";
/// A dtype name that is not auto/fp32/fp16/bf16 (ParseTargetDtype).
inline constexpr std::string_view kInvalidDtype = "InvalidDtype";
/// A tensor dtype the loader cannot represent or convert.
inline constexpr std::string_view kUnsupportedDtype = "UnsupportedDtype";
/// A tensor's bytes lie outside its file (or the file ends before them).
inline constexpr std::string_view kTensorOutOfRange = "TensorOutOfRange";

// ---- sharded index cross-check (safetensors::CheckIndexAgainstShards) -------
/// The index puts a tensor in a shard that does not hold it.
inline constexpr std::string_view kIndexTensorMissing = "IndexTensorMissing";
/// A shard holds a tensor the index does not list.
inline constexpr std::string_view kIndexTensorUnlisted = "IndexTensorUnlisted";
/// A shard holds a tensor the index puts in another shard.
inline constexpr std::string_view kIndexTensorInOtherShard = "IndexTensorInOtherShard";
/// Several shards hold the same tensor.
inline constexpr std::string_view kIndexTensorStoredTwice = "IndexTensorStoredTwice";
/// A shard the index names is not beside it.
inline constexpr std::string_view kIndexShardMissing = "IndexShardMissing";
/// A shard beside the index cannot be read (its own format error follows).
inline constexpr std::string_view kIndexShardUnreadable = "IndexShardUnreadable";
/// metadata.total_size differs from the sum of the tensors' bytes (a warning
/// for load, as transformers tolerates it; an error for `inspect --strict`).
inline constexpr std::string_view kTotalSizeMismatch = "TotalSizeMismatch";

// ---- device_map planning (hubload/device.h) -------------------------------
/// An explicit device_map entry whose module prefix matches no tensor name.
inline constexpr std::string_view kDeviceMapEntryUnmatched = "DeviceMapEntryUnmatched";

// ---- sizes and resharding (hubload/size.h, hubload/split.h) ----------------
/// A size text outside the one size grammar (ParseMemorySize).
inline constexpr std::string_view kInvalidMemorySize = "InvalidMemorySize";
/// A size that parses but is not allowed where it is used (0 bytes, ...).
inline constexpr std::string_view kInvalidSize = "InvalidSize";
/// Two source files give one `__metadata__` key different values.
inline constexpr std::string_view kMetadataConflict = "MetadataConflict";

// ---- CLI (tools/hubload) ----------------------------------------------------
/// A repo argument that is neither a repo id nor a valid hf:// URI.
inline constexpr std::string_view kBadHfUri = "BadHfUri";
/// `cache verify`: a file whose bytes differ from the Hub's listing.
inline constexpr std::string_view kVerifyMismatch = "VerifyMismatch";

/// Internal: a Result was built from an OK Status.
inline constexpr std::string_view kOkStatusAsError = "OkStatusAsError";

// ---- pickle checkpoints (loader/pickle, include/hubload/pickle.h) ------------
/// Neither a zip nor a legacy torch.save file (an LFS pointer, safetensors, ...).
inline constexpr std::string_view kNotTorchCheckpoint = "NotTorchCheckpoint";
/// A zip archive that cannot be read (bad directory, truncated, duplicate names).
inline constexpr std::string_view kZipMalformed = "ZipMalformed";
/// A valid zip hubload does not read: compressed or encrypted entries, big-endian data.
inline constexpr std::string_view kZipUnsupported = "ZipUnsupported";
/// A pickle that breaks the pickle rules (truncated, stack underflow, bad memo, wrong argument types).
inline constexpr std::string_view kPickleMalformed = "PickleMalformed";
/// An opcode outside the restricted subset (NEWOBJ, INST, EXT1, ...).
inline constexpr std::string_view kPickleOpcode = "PickleOpcode";
/// A GLOBAL outside the allow-list (os.system, builtins.eval, an unknown class).
inline constexpr std::string_view kPickleUnsafeGlobal = "PickleUnsafeGlobal";
/// A global torch.load(weights_only=True) allows but hubload does not load (quantized, sparse...).
inline constexpr std::string_view kPickleUnsupportedGlobal = "PickleUnsupportedGlobal";
/// A pickle::Limits bound exceeded (nesting, memo, objects, string length).
inline constexpr std::string_view kPickleLimit = "PickleLimit";
/// The pickle is not a flat dict of tensors.
inline constexpr std::string_view kPickleNotStateDict = "PickleNotStateDict";
/// A tensor uses a storage key that the archive / key list does not hold.
inline constexpr std::string_view kPickleStorageMissing = "PickleStorageMissing";
/// A storage's bytes in the file differ from numel x element size, or overlap another's.
inline constexpr std::string_view kPickleStorageSize = "PickleStorageSize";
/// A tensor's offset + size/stride extent reaches past its storage.
inline constexpr std::string_view kPickleTensorOutOfRange = "PickleTensorOutOfRange";
/// A tensor hubload does not load (dtype without a safetensors equivalent, tensor metadata).
inline constexpr std::string_view kPickleUnsupportedTensor = "PickleUnsupportedTensor";

}  // namespace hubload::reason
