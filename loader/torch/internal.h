// Internal helpers shared by the LibTorch loader sources (not installed).
#pragma once

#include <ATen/core/Tensor.h>

#include <exception>
#include <string>

#include "hubload/status.h"

namespace hubload::internal {

/// A LibTorch exception as a kInternal Status (first line of the message only).
Status FromTorchError(const std::exception& e, const std::string& what);

/// "[12,16]".
std::string ShapeString(at::IntArrayRef s);

}  // namespace hubload::internal
