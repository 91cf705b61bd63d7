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
/// A write refused by a read-only file system (EROFS).
inline constexpr std::string_view kReadOnlyFileSystem = "ReadOnlyFileSystem";
/// A file or folder the process may not read or write (EACCES, EPERM).
inline constexpr std::string_view kPermissionDenied = "PermissionDenied";

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
/// Transport: no answer in time (before any byte: connect/etag timeout).
inline constexpr std::string_view kTimeout = "Timeout";
/// Transport: a transfer that started sent nothing for the stall timeout.
inline constexpr std::string_view kStalled = "Stalled";
/// Transport: any other network failure (TLS, protocol, reset).
inline constexpr std::string_view kNetwork = "Network";
/// A 403 for a repo the Hub has disabled (huggingface_hub DisabledRepoError).
inline constexpr std::string_view kDisabledRepo = "DisabledRepo";
/// A 401 "Invalid credentials": the token was rejected, even for public repos.
inline constexpr std::string_view kInvalidCredentials = "InvalidCredentials";

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

// ==== every other reason the library raises, by module (stable names; the
// message says the specifics). Constants above carry their own notes. ====

// ---- cache (cache/) --------------------------------------------------------
inline constexpr std::string_view kBadArgument = "BadArgument";
inline constexpr std::string_view kBadChunk = "BadChunk";
inline constexpr std::string_view kBadCommit = "BadCommit";
inline constexpr std::string_view kBadLockOptions = "BadLockOptions";
inline constexpr std::string_view kBadRangeOptions = "BadRangeOptions";
inline constexpr std::string_view kBadRepoId = "BadRepoId";
inline constexpr std::string_view kBadRepoType = "BadRepoType";
inline constexpr std::string_view kBadRevision = "BadRevision";
inline constexpr std::string_view kCorruptRef = "CorruptRef";
inline constexpr std::string_view kDownloadInProgress = "DownloadInProgress";
inline constexpr std::string_view kNoCache = "NoCache";
inline constexpr std::string_view kNotCached = "NotCached";

// ---- hub client (hub/) -----------------------------------------------------
inline constexpr std::string_view kAmbiguousQuant = "AmbiguousQuant";
inline constexpr std::string_view kBadLink = "BadLink";
inline constexpr std::string_view kBadParentCommit = "BadParentCommit";
inline constexpr std::string_view kBadPartName = "BadPartName";
inline constexpr std::string_view kBadRevisionInfo = "BadRevisionInfo";
inline constexpr std::string_view kBadServerAnswer = "BadServerAnswer";
inline constexpr std::string_view kBodyFile = "BodyFile";
inline constexpr std::string_view kConnectionLost = "ConnectionLost";
inline constexpr std::string_view kEmptyCommit = "EmptyCommit";
inline constexpr std::string_view kFileChanged = "FileChanged";
inline constexpr std::string_view kIncompleteSplit = "IncompleteSplit";
inline constexpr std::string_view kMissingHeader = "MissingHeader";
inline constexpr std::string_view kNoCacheDir = "NoCacheDir";
inline constexpr std::string_view kNoSuchQuant = "NoSuchQuant";
inline constexpr std::string_view kNotAFile = "NotAFile";
inline constexpr std::string_view kNotAFolder = "NotAFolder";
inline constexpr std::string_view kRangeMismatch = "RangeMismatch";
inline constexpr std::string_view kRangeTooLarge = "RangeTooLarge";
inline constexpr std::string_view kStaleParentCommit = "StaleParentCommit";
inline constexpr std::string_view kTooManyRedirects = "TooManyRedirects";

// ---- leaves (util/) --------------------------------------------------------
inline constexpr std::string_view kFileTooLarge = "FileTooLarge";
inline constexpr std::string_view kNotARegularFile = "NotARegularFile";

// ---- device loading (loader/device/) ---------------------------------------
inline constexpr std::string_view kBuiltWithoutCuda = "BuiltWithoutCuda";
inline constexpr std::string_view kDeviceOutOfMemory = "DeviceOutOfMemory";
inline constexpr std::string_view kDoesNotFit = "DoesNotFit";
inline constexpr std::string_view kHostOutOfMemory = "HostOutOfMemory";
inline constexpr std::string_view kInvalidDeviceMap = "InvalidDeviceMap";
inline constexpr std::string_view kInvalidDevicePointer = "InvalidDevicePointer";
inline constexpr std::string_view kInvalidEvent = "InvalidEvent";
inline constexpr std::string_view kInvalidMaxMemory = "InvalidMaxMemory";
inline constexpr std::string_view kInvalidNoSplit = "InvalidNoSplit";
inline constexpr std::string_view kInvalidOptions = "InvalidOptions";
inline constexpr std::string_view kInvalidStream = "InvalidStream";
inline constexpr std::string_view kInvalidTensorName = "InvalidTensorName";
inline constexpr std::string_view kNoBackend = "NoBackend";
inline constexpr std::string_view kNoCudaDevice = "NoCudaDevice";
inline constexpr std::string_view kUncoveredTensor = "UncoveredTensor";
inline constexpr std::string_view kUnknownDevice = "UnknownDevice";
inline constexpr std::string_view kUnsupportedConversion = "UnsupportedConversion";

// ---- distributed (loader/distributed/) -------------------------------------
inline constexpr std::string_view kBadEnvironment = "BadEnvironment";
inline constexpr std::string_view kBadOption = "BadOption";
inline constexpr std::string_view kBadTopology = "BadTopology";
inline constexpr std::string_view kBroadcastFailed = "BroadcastFailed";
inline constexpr std::string_view kBroadcastTimeout = "BroadcastTimeout";
inline constexpr std::string_view kRankDied = "RankDied";
inline constexpr std::string_view kRendezvous = "Rendezvous";
inline constexpr std::string_view kStoreLost = "StoreLost";

// ---- fetch-and-load pipeline (loader/pipeline/) ----------------------------
inline constexpr std::string_view kComponentNotFound = "ComponentNotFound";
inline constexpr std::string_view kEmptyRepoId = "EmptyRepoId";
inline constexpr std::string_view kEmptyStateDict = "EmptyStateDict";
inline constexpr std::string_view kException = "Exception";
inline constexpr std::string_view kHeaderChanged = "HeaderChanged";
inline constexpr std::string_view kInvalidModelIndex = "InvalidModelIndex";
inline constexpr std::string_view kNoClient = "NoClient";
inline constexpr std::string_view kNotAPipeline = "NotAPipeline";
inline constexpr std::string_view kSourceIncomplete = "SourceIncomplete";
inline constexpr std::string_view kTruncated = "Truncated";
inline constexpr std::string_view kUnsupportedOption = "UnsupportedOption";

// ---- safetensors format (loader/safetensors/) ------------------------------
inline constexpr std::string_view kEmptyIndex = "EmptyIndex";
inline constexpr std::string_view kGitLfsPointer = "GitLfsPointer";
inline constexpr std::string_view kHeaderTooLarge = "HeaderTooLarge";
inline constexpr std::string_view kHeaderTooSmall = "HeaderTooSmall";
inline constexpr std::string_view kHtmlPage = "HtmlPage";
inline constexpr std::string_view kInvalidHeaderJson = "InvalidHeaderJson";
inline constexpr std::string_view kInvalidHeaderLength = "InvalidHeaderLength";
inline constexpr std::string_view kInvalidHeaderUtf8 = "InvalidHeaderUtf8";
inline constexpr std::string_view kInvalidIndexJson = "InvalidIndexJson";
inline constexpr std::string_view kInvalidOffset = "InvalidOffset";
inline constexpr std::string_view kInvalidPattern = "InvalidPattern";
inline constexpr std::string_view kInvalidShardName = "InvalidShardName";
inline constexpr std::string_view kInvalidTotalSize = "InvalidTotalSize";
inline constexpr std::string_view kListFailed = "ListFailed";
inline constexpr std::string_view kMetadataIncompleteBuffer = "MetadataIncompleteBuffer";
inline constexpr std::string_view kMisalignedSlice = "MisalignedSlice";
inline constexpr std::string_view kUnknownDtype = "UnknownDtype";
inline constexpr std::string_view kValidationOverflow = "ValidationOverflow";
inline constexpr std::string_view kVariantMixing = "VariantMixing";

// ---- LibTorch sinks (loader/torch/) ----------------------------------------
inline constexpr std::string_view kDuplicateKey = "DuplicateKey";
inline constexpr std::string_view kFinished = "Finished";
inline constexpr std::string_view kInvalidRegex = "InvalidRegex";
inline constexpr std::string_view kInvalidTensorSource = "InvalidTensorSource";
inline constexpr std::string_view kMissingKeys = "MissingKeys";
inline constexpr std::string_view kMkdirFailed = "MkdirFailed";
inline constexpr std::string_view kShapeMismatch = "ShapeMismatch";
inline constexpr std::string_view kShapeTooLarge = "ShapeTooLarge";
inline constexpr std::string_view kSharedTensorOverlap = "SharedTensorOverlap";
inline constexpr std::string_view kTorchError = "TorchError";
inline constexpr std::string_view kUnexpectedKeys = "UnexpectedKeys";

// ---- server (hub/server, hubload serve) ------------------------------------
inline constexpr std::string_view kRepoNotFound = "RepoNotFound";
inline constexpr std::string_view kRevisionNotFound = "RevisionNotFound";

// ---- raised by several modules ---------------------------------------------
inline constexpr std::string_view kDuplicateTensor = "DuplicateTensor";
inline constexpr std::string_view kEntryNotFound = "EntryNotFound";
inline constexpr std::string_view kIOError = "IOError";
inline constexpr std::string_view kInvalidArgument = "InvalidArgument";
inline constexpr std::string_view kInvalidDevice = "InvalidDevice";
inline constexpr std::string_view kInvalidName = "InvalidName";
inline constexpr std::string_view kInvalidTensor = "InvalidTensor";
inline constexpr std::string_view kInvalidVariant = "InvalidVariant";
inline constexpr std::string_view kNotFound = "NotFound";
inline constexpr std::string_view kShortRead = "ShortRead";
inline constexpr std::string_view kTensorInvalidInfo = "TensorInvalidInfo";
inline constexpr std::string_view kUnsupportedDevice = "UnsupportedDevice";

}  // namespace hubload::reason
