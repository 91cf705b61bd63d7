// Internal helpers shared by the LibTorch loader sources (not installed).
#pragma once

#include <ATen/core/Tensor.h>

#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "hubload/safetensors.h"
#include "hubload/status.h"
#include "hubload/torch_loader.h"

namespace hubload::internal {

/// A LibTorch exception as a kInternal Status (first line of the message only).
Status FromTorchError(const std::exception& e, const std::string& what);

/// `st` prefixed with "tensor 'NAME'", unless its message names 'NAME'
/// already (an error names each tensor once).
Status NameTensor(const Status& st, const std::string& name);

/// "[12,16]".
std::string ShapeString(at::IntArrayRef s);

/// The LibTorch dtype holding checkpoint dtype `d` unchanged (BOOL U8 I8 I16
/// I32 I64 F16 BF16 F32 F64 C64), or nullopt when it must be converted.
std::optional<at::ScalarType> NativeScalarType(safetensors::Dtype d);

/// The body of LoadTensor: `bytes` (exactly info.nbytes(), maybe unaligned)
/// of tensor `info` as a CPU tensor under `options` (dtype policy,
/// keep_in_fp32, force_copy); zero-copy views keep `keepalive` alive.
/// `label` names the file in errors. Shared by the safetensors and pickle paths.
/// `in_file_mapping`: the bytes lie in a read-only MAP_SHARED file mapping
/// (safetensors::MappedFile), whose pages a conversion may then drop from the
/// process once converted; NEVER set it for heap or anonymous memory (dropping
/// those pages would zero them).
Result<at::Tensor> TensorFromBytes(const safetensors::TensorInfo& info, std::span<const uint8_t> bytes,
                                   std::shared_ptr<const void> keepalive, const LoadOptions& options,
                                   const std::string& label, bool in_file_mapping = false);

}  // namespace hubload::internal
