// libFuzzer entry for the request body parsers of `hubload serve`
// (hub/server/bodies.h): the input is an NDJSON commit body, and the same
// bytes are given to every JSON body parser (preupload, LFS batch, repo
// create, paths-info JSON and form, multipart completion, branch, tag,
// settings). Checks: no crash, no sanitizer report, and what the commit
// parser accepts keeps its promises (one op per non-header line, safe paths,
// 64-hex LFS oids).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "hub/server/bodies.h"
#include "hub/server/store_internal.h"

namespace srv = hubload::server::internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  auto c = srv::ParseCommitNdjson(body, "fuzz commit");
  if (c.ok()) {
    for (const auto& op : c->ops) {
      if (!srv::IsCommittablePath(op.path)) std::abort();
      if (op.kind == srv::CommitLine::Kind::kLfsFile && !srv::IsHexOf(op.oid, 64, 64)) std::abort();
    }
  }
  (void)srv::ParsePreupload(body, "fuzz");
  (void)srv::ParseLfsBatch(body, "fuzz");
  (void)srv::ParseCreateRepo(body, "fuzz");
  (void)srv::ParsePathsInfo(body, "application/json", "fuzz");
  (void)srv::ParsePathsInfo(body, "application/x-www-form-urlencoded", "fuzz");
  (void)srv::ParseMultipartComplete(body, "fuzz");
  (void)srv::ParseBranchBody(body, "fuzz");
  (void)srv::ParseTagBody(body, "fuzz");
  (void)srv::ParseSettingsBody(body, "fuzz");
  return 0;
}
