// Tree API listing with pagination (hub/listing.h).
#include "hub/listing.h"

#include "hub/http_parse.h"
#include "util/json.h"

namespace hubload::hub_internal {

namespace {

// One entry of a tree page; `keep` is false for folders.
Status ParseEntry(const util::JsonIn& e, RepoFile* f, bool* keep) {
  HUBLOAD_RETURN_IF_ERROR(e.ExpectObject());
  Result<std::string> type = e.StringOr("type", "");
  if (!type.ok()) return type.status();
  *keep = type.value() == "file";
  if (!*keep) return Status::Ok();
  HUBLOAD_ASSIGN_OR_RETURN(f->path, e.String("path"));
  HUBLOAD_ASSIGN_OR_RETURN(auto size, e.OptUint("size"));
  f->size = size.value_or(0);
  HUBLOAD_ASSIGN_OR_RETURN(f->blob_id, e.StringOr("oid", ""));
  HUBLOAD_ASSIGN_OR_RETURN(auto lfs, e.OptObject("lfs"));
  if (lfs) {
    HUBLOAD_ASSIGN_OR_RETURN(auto oid, lfs->OptString("oid"));
    HUBLOAD_ASSIGN_OR_RETURN(auto sha, lfs->OptString("sha256"));
    f->lfs_sha256 = oid ? *oid : sha.value_or("");
    HUBLOAD_ASSIGN_OR_RETURN(auto lsize, lfs->OptUint("size"));
    if (lsize) f->size = *lsize;
  }
  return Status::Ok();
}

}  // namespace

Result<RepoListing> ListTree(const Session& s, RepoType t, const std::string& repo, const std::string& commit,
                             int max_retries) {
  RepoListing out;
  out.commit = commit;
  std::string url = s.ApiUrl(t, repo, "/tree/" + EncodeRevision(commit) + "?recursive=true&expand=false");
  ErrorContext ctx = s.Ctx(repo, commit, "");
  for (int page = 0; page < 100000 && !url.empty(); ++page) {
    HttpHeaders h;
    HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json j, s.GetJson(url, ctx, &h, max_retries));
    util::JsonIn doc(j, RedactUrl(url));
    auto elements = doc.Elements();
    if (!elements.ok()) return elements.status().Annotate(ctx);
    for (const util::JsonIn& e : *elements) {
      RepoFile f;
      bool keep = false;
      HUBLOAD_RETURN_IF_ERROR(ParseEntry(e, &f, &keep).Annotate(ctx));
      if (!keep) continue;
      HUBLOAD_RETURN_IF_ERROR(WithCtx(ValidateRepoPath(f.path), ctx));
      out.files.push_back(std::move(f));
    }
    auto next = NextLink(h);
    url = next ? *next : std::string();
    if (!url.empty() && UrlOrigin(url) != s.endpoint_origin)
      return Status(Code::kInvalidFormat, "tree pagination of " + repo + " points to another host", "BadLink", ctx);
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
