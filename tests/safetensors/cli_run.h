// Running the built `hubload` binary from the safetensors tests.
#pragma once

#include <cstdlib>
#include <string>

#include "testing/util.h"

namespace hubload::testing {

/// Single-quoted for the shell.
inline std::string Q(const std::string& s) { return "'" + s + "'"; }

/// $HUBLOAD_BIN when set, else the hubload_cli target's path baked in at build time.
inline std::string Bin() {
#ifdef HUBLOAD_CLI_PATH
  if (!std::getenv("HUBLOAD_BIN")) return HUBLOAD_CLI_PATH;
#endif
  return HubloadBin();
}

}  // namespace hubload::testing
