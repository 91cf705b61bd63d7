// Private to hub/: the HEAD probe of one file (huggingface_hub
// get_hf_file_metadata): commit, etag, size and where the bytes live.
#pragma once

#include <cstdint>
#include <string>

#include "hub/session.h"

namespace hubload::hub_internal {

struct FileMeta {
  std::string commit;
  std::string raw_etag;  // header value as sent (for If-Range)
  std::string etag;      // normalised: the blob name
  int64_t size = -1;     // -1 when the server did not say
  std::string location;  // absolute redirect target (CDN), if any
};

/// HEAD {endpoint}/{repo}/resolve/{rev}/{path} with Accept-Encoding:
/// identity, following redirects that stay on the same origin and carry no
/// X-Repo-Commit (B46: path-only, relative or absolute); the first other one
/// is where the bytes live (FileMeta::location). At most 10 hops, then
/// kNetwork "TooManyRedirects" naming the first URL. `commit_on_404` receives X-Repo-Commit of an error answer.
/// `max_retries` as HttpRequest::max_retries. Errors: transport errors,
/// StatusFromHttp, kInvalidFormat "MissingHeader" (no X-Repo-Commit or no
/// usable etag), kNetwork "TooManyRedirects".
Result<FileMeta> Head(const Session& s, RepoType t, const std::string& repo, const std::string& rev,
                      const std::string& path, std::string* commit_on_404, int max_retries = -1);

}  // namespace hubload::hub_internal
