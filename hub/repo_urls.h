// Private to hub/: URL pieces per repo type (hub-protocol.md §0.1).
#pragma once

#include "hubload/cache.h"

namespace hubload::hub_internal {

/// "models", "datasets" or "spaces": the /api/{type}s/ segment.
inline const char* ApiSegment(RepoType t) {
  switch (t) {
    case RepoType::kDataset: return "datasets";
    case RepoType::kSpace: return "spaces";
    default: return "models";
  }
}

/// "", "datasets/" or "spaces/": the prefix of /resolve/ and .git URLs.
inline const char* WebPrefix(RepoType t) {
  switch (t) {
    case RepoType::kDataset: return "datasets/";
    case RepoType::kSpace: return "spaces/";
    default: return "";
  }
}

}  // namespace hubload::hub_internal
