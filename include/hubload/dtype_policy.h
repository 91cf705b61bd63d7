// hubload/dtype_policy.h: which dtype each checkpoint tensor is loaded as
// (the target dtype, keep_in_fp32, and the widenings LibTorch 1.13 forces),
// and the list of those conversions for a load report. Torch-free: the
// policy is a table over safetensors dtypes; hubload/torch_loader.h maps the
// result onto LibTorch dtypes.
//
// Thread safety: pure functions on values; call from any thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hubload/load.h"
#include "hubload/safetensors.h"
#include "hubload/status.h"

namespace hubload {

// TargetDtype, ParseTargetDtype, LoadOptions: hubload/load.h (included above).

/// F16, BF16, F32, F64 and every F8_* / F6_* / F4 dtype (the dtypes a target
/// dtype applies to; C64 is complex, not floating).
bool IsFloatingDtype(safetensors::Dtype d);

/// How each checkpoint dtype is loaded, as the safetensors name of the
/// LibTorch dtype it becomes (no target conversion):
///  BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64 C64: the same dtype.
///  F8_E4M3 (OCP E4M3FN), F8_E5M2 (OCP E5M2 = IEEE-style), F8_E8M0 (OCP E8M0,
///   scale 2^(e-127), 0xFF = NaN): BF16 under kAuto (every value of these
///   formats is exactly a bfloat16), else the target floating dtype.
///  U16 -> I32, U32 -> I64 (exact widening; LibTorch 1.13 has no unsigned
///   types beyond uint8). U64 -> I64 (values must be < 2^63, checked at load).
///  F4, F6_E2M3, F6_E3M2, F8_E4M3FNUZ, F8_E5M2FNUZ: kUnsupported naming the tensor.
/// With a target dtype (or keep_in_fp32, see LoadOptions) every floating
/// tensor becomes F32, F16 or BF16.
/// Returns the dtype a tensor of checkpoint dtype `d` called `name` gets under
/// `options`. Errors: kUnsupported (reason UnsupportedDtype) naming the tensor.
Result<safetensors::Dtype> LoadedSafetensorsDtype(safetensors::Dtype d, const std::string& name,
                                                  const LoadOptions& options);

/// One kind of conversion a load performs, with the tensors it applies to.
struct DtypeConversion {
  safetensors::Dtype from = safetensors::Dtype::F32;
  safetensors::Dtype to = safetensors::Dtype::F32;
  /// Why: "LibTorch 1.13 has no uint16", "target dtype F16", "keep_in_fp32".
  std::string why;
  /// Tensor names in the order they were added.
  std::vector<std::string> tensors;
};

/// Appends to `*out` the conversions the tensors of `header` undergo under
/// `options` (every tensor whose loaded dtype differs from its stored one),
/// merged into an existing entry with the same (from, to, why); call once per
/// shard to collect a whole checkpoint. Tensors whose dtype cannot be loaded
/// are skipped (loading reports them).
void AddDtypeConversions(const safetensors::Header& header, const LoadOptions& options,
                         std::vector<DtypeConversion>* out);

/// "3 tensors U16 -> I32 (LibTorch 1.13 has no uint16): a, b, c", naming at
/// most `max_names` tensors, then "... and N more". For report warnings.
std::string DescribeDtypeConversion(const DtypeConversion& c, size_t max_names = 3);

}  // namespace hubload
