// hubload/torch_pickle.h: LibTorch tensors from a pickle checkpoint
// (`pytorch_model.bin`) read by hubload/pickle.h — the torch.load(
// weights_only=True, mmap=True) of hubload. Includes LibTorch (ATen core).
//
// Semantics (as torch.load rebuilds tensors, torch/_utils.py _rebuild_tensor):
// every storage becomes one CPU buffer and every tensor a view of it with
// the pickled size, stride and storage_offset (Tensor::as_strided), so
// tensors sharing a storage in the file (tied weights, views such as
// t[1:, ::2] or t.T) share one buffer: equal `storage().data()`.
// A storage's buffer is a zero-copy view of the read-only file mapping when
// its bytes are aligned for the dtypes that view it (zip storages are 64-byte
// aligned by PyTorch's writer), otherwise ONE copy per storage (legacy files:
// storages follow an 8-byte count at arbitrary offsets).
// The dtype policy of torch_loader.h applies tensor by tensor, unchanged:
// LoadedDtype(dtype, name, options) decides (LoadOptions::dtype,
// keep_in_fp32; float8 decoded to bf16 under kAuto, U16/U32/U64 widened); a
// tensor whose dtype changes becomes a fresh contiguous tensor (no longer
// sharing). force_copy: each storage is copied once into fresh, writable,
// aligned memory (views still share it). Zero-copy tensors are READ-ONLY
// memory: writing to them faults (use force_copy, or ModuleLoadMode::kCopy).
// Tensors with no element are fresh empty tensors.
// The returned StateDict works with ModuleLoader / SaveSharded like a
// safetensors one (SaveSharded stores each shared storage once).
//
// Errors: Status, never exceptions (c10::Error caught as kInternal
// "TorchError"); kUnsupported (reason UnsupportedDtype) naming the tensor for
// dtypes LoadedDtype refuses; kInvalidFormat (TensorOutOfRange) for a
// Checkpoint that does not describe the mapped file; the errors of
// pickle::PickleFile::Open for the path overloads.
//
// Thread safety: functions may run concurrently on different or the same
// PickleFile (it is immutable); tensors may be read from any thread.
#pragma once

#include <functional>
#include <string>

#include "hubload/pickle.h"
#include "hubload/status.h"
#include "hubload/torch_loader.h"

namespace hubload {

/// Calls `fn(name, tensor)` for each tensor of `file` in file order. A storage
/// buffer lives while a tensor viewing it does (the call drops its own
/// reference after the storage's last tensor, so copied legacy storages do not
/// pile up). Stops at the first error (its own or fn's) and returns it,
/// prefixed with the file / tensor name.
Status ForEachPickleTensor(const pickle::PickleFile& file, const LoadOptions& options,
                           const std::function<Status(const std::string&, at::Tensor)>& fn);

/// Every tensor of `file`, in file order (see the file comment for sharing).
Result<StateDict> LoadPickleTensors(const pickle::PickleFile& file, const LoadOptions& options);

/// pickle::PickleFile::Open(path) then LoadPickleTensors.
Result<StateDict> LoadPickleFile(const std::string& path, const LoadOptions& options,
                                 const pickle::Limits& limits = {});

}  // namespace hubload
