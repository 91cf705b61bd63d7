// `hubload cache ls` (cmd_cache_ls.cc), registered with the other `cache`
// subcommands in cmd_cache.cc.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tools/hubload/cli.h"

namespace hubload::cli {

struct CacheLsArgs {
  bool json = false, strict = false, revisions = false, quiet = false;
  std::vector<std::string> filters;
  std::string sort, format = "table";
  long long limit = -1;  // -1: no limit
};

/// Adds `cache ls` (alias `scan`) with hf cache ls's options to `cache`.
CLI::App* AddCacheLs(CLI::App* cache, const std::shared_ptr<CacheLsArgs>& a);

/// Runs `cache ls`; exit code 0, 1 (no cache folder, --strict with
/// warnings) or 2 (a bad --filter / --sort / --limit).
int CacheLs(const CacheLsArgs& a, const Global& g);

}  // namespace hubload::cli
