// Tree API listing with pagination (hub/listing.h).
#include "hub/url.h"
#include "hub/listing.h"

#include "hub/answers.h"
#include "hub/http_parse.h"
#include "hubload/reasons.h"

namespace hubload::hub_internal {

Result<RepoListing> ListTree(const Session& s, RepoType t, const std::string& repo, const std::string& commit,
                             int max_retries) {
  RepoListing out;
  out.commit = commit;
  std::string url = s.ApiUrl(t, repo, "/tree/" + EncodeRevision(commit) + "?recursive=true&expand=false");
  ErrorContext ctx = s.Ctx(repo, commit, "");
  for (int page = 0; page < 100000 && !url.empty(); ++page) {
    HttpHeaders h;
    HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json j, s.GetJson(url, ctx, &h, max_retries));
    auto entries = ParseTreePage(j, RedactUrl(url));
    if (!entries.ok()) return entries.status().Annotate(ctx);
    for (RepoFile& f : *entries) {
      HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(f.path), ctx));
      out.files.push_back(std::move(f));
    }
    auto next = NextLink(h);
    url = next ? *next : std::string();
    if (!url.empty() && UrlOrigin(url) != s.endpoint_origin)
      return Status(Code::kInvalidFormat, "tree pagination of " + repo + " points to another host", reason::kBadLink,
                    ctx);
  }
  return out;
}

std::vector<RepoFile> FromTreeEntries(const std::vector<cache_internal::TreeEntry>& v) {
  std::vector<RepoFile> out;
  out.reserve(v.size());
  for (auto& e : v) out.push_back(RepoFile{e.path, e.size, e.blob_id, e.lfs_sha256});
  return out;
}

std::vector<cache_internal::TreeEntry> ToTreeEntries(const std::vector<RepoFile>& v) {
  std::vector<cache_internal::TreeEntry> out;
  out.reserve(v.size());
  for (auto& f : v) out.push_back(cache_internal::TreeEntry{f.path, f.size, f.blob_id, f.lfs_sha256});
  return out;
}

}  // namespace hubload::hub_internal
