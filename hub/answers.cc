// Hub JSON answers through util::JsonIn (hub/answers.h).
#include "hub/answers.h"

#include <algorithm>

#include "hub/http_parse.h"
#include "util/hex.h"
#include "util/json.h"

namespace hubload::hub_internal {
namespace {

using util::JsonIn;

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

Status ParseTreeEntry(const JsonIn& e, RepoFile* f, bool* keep) {
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

Status ParseLfsObject(const JsonIn& o, LfsBatchObject* out) {
  HUBLOAD_RETURN_IF_ERROR(o.ExpectObject());
  HUBLOAD_ASSIGN_OR_RETURN(out->oid, o.String("oid"));
  HUBLOAD_ASSIGN_OR_RETURN(out->size, o.Uint("size"));
  HUBLOAD_ASSIGN_OR_RETURN(auto err, o.Find("error"));
  if (err) {
    out->has_error = true;
    if (err->IsObject()) {
      HUBLOAD_ASSIGN_OR_RETURN(auto code, err->OptInt("code"));
      out->error_code = code.value_or(0);
      HUBLOAD_ASSIGN_OR_RETURN(out->error_message, err->StringOr("message", ""));
    }
    if (out->error_message.empty()) out->error_message = util::DumpJson(err->raw());
    return Status::Ok();
  }
  HUBLOAD_ASSIGN_OR_RETURN(auto actions, o.OptObject("actions"));
  if (!actions) return Status::Ok();  // already stored
  HUBLOAD_ASSIGN_OR_RETURN(auto up, actions->OptObject("upload"));
  if (!up) return Status::Ok();
  HUBLOAD_ASSIGN_OR_RETURN(out->upload_href, up->String("href"));
  HUBLOAD_ASSIGN_OR_RETURN(auto verify, actions->OptObject("verify"));
  if (verify) {
    HUBLOAD_ASSIGN_OR_RETURN(out->verify_href, verify->String("href"));
  }
  HUBLOAD_ASSIGN_OR_RETURN(auto header, up->OptObject("header"));
  if (!header) return Status::Ok();
  HUBLOAD_ASSIGN_OR_RETURN(auto cs, header->Find("chunk_size"));
  if (!cs) return Status::Ok();
  if (cs->IsString()) {
    HUBLOAD_ASSIGN_OR_RETURN(std::string text, cs->AsString());
    auto v = ParseDecimal(std::string_view(text));
    if (!v || *v <= 0) return cs->Invalid("must be a positive decimal integer");
    out->chunk_size = static_cast<uint64_t>(*v);
  } else {
    auto v = cs->AsUint();
    if (!v.ok()) return cs->Error("a positive integer or a decimal string");
    if (*v == 0) return cs->Invalid("must be positive");
    out->chunk_size = *v;
  }
  HUBLOAD_ASSIGN_OR_RETURN(auto members, header->Members());
  for (auto& [k, v] : members) {
    if (!AllDigits(k)) continue;
    auto n = ParseDecimal(std::string_view(k));
    if (!n) return v.Invalid("is a part number out of range");
    HUBLOAD_ASSIGN_OR_RETURN(std::string url, v.AsString());
    out->parts.emplace_back(static_cast<uint64_t>(*n), std::move(url));
  }
  std::sort(out->parts.begin(), out->parts.end());
  return Status::Ok();
}

}  // namespace

Result<std::string> ParseRevisionSha(const nlohmann::json& j, const std::string& doc) {
  return JsonIn(j, doc).String("sha");
}

Result<std::vector<RepoFile>> ParseTreePage(const nlohmann::json& j, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(auto elements, JsonIn(j, doc).Elements());
  std::vector<RepoFile> out;
  for (const JsonIn& e : elements) {
    RepoFile f;
    bool keep = false;
    HUBLOAD_RETURN_IF_ERROR(ParseTreeEntry(e, &f, &keep));
    if (keep) out.push_back(std::move(f));
  }
  return out;
}

Result<std::vector<PreuploadEntry>> ParsePreupload(const nlohmann::json& j, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn files, JsonIn(j, doc).Array("files"));
  HUBLOAD_ASSIGN_OR_RETURN(auto elements, files.Elements());
  std::vector<PreuploadEntry> out;
  for (const JsonIn& f : elements) {
    HUBLOAD_RETURN_IF_ERROR(f.ExpectObject());
    PreuploadEntry e;
    HUBLOAD_ASSIGN_OR_RETURN(e.path, f.String("path"));
    HUBLOAD_ASSIGN_OR_RETURN(e.upload_mode, f.String("uploadMode"));
    HUBLOAD_ASSIGN_OR_RETURN(auto ignore, f.OptBool("shouldIgnore"));
    e.should_ignore = ignore.value_or(false);
    HUBLOAD_ASSIGN_OR_RETURN(e.oid, f.StringOr("oid", ""));
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<LfsBatchObject>> ParseLfsBatch(const nlohmann::json& j, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn objects, JsonIn(j, doc).Array("objects"));
  HUBLOAD_ASSIGN_OR_RETURN(auto elements, objects.Elements());
  std::vector<LfsBatchObject> out;
  for (const JsonIn& o : elements) {
    LfsBatchObject obj;
    HUBLOAD_RETURN_IF_ERROR(ParseLfsObject(o, &obj));
    out.push_back(std::move(obj));
  }
  return out;
}

Result<CommitAnswer> ParseCommitAnswer(const nlohmann::json& j, const std::string& doc) {
  JsonIn in(j, doc);
  CommitAnswer a;
  HUBLOAD_ASSIGN_OR_RETURN(a.commit_oid, in.String("commitOid"));
  HUBLOAD_ASSIGN_OR_RETURN(a.commit_url, in.String("commitUrl"));
  HUBLOAD_ASSIGN_OR_RETURN(a.pr_url, in.StringOr("pullRequestUrl", ""));
  return a;
}

Result<std::optional<std::string>> ParseRepoUrl(const nlohmann::json& j, const std::string& doc) {
  JsonIn in(j, doc);
  if (!in.IsObject()) return in.Error("an object");
  return in.OptString("url");
}

namespace {

Status CheckCommitId(const JsonIn& in, const std::string& key, const std::string& v) {
  if (v.size() != 40 || !util::IsLowerHex(v)) {
    HUBLOAD_ASSIGN_OR_RETURN(JsonIn f, in.Get(key));
    return f.Invalid("must be a 40-hex commit id, got '" + v.substr(0, 80) + "'");
  }
  return Status::Ok();
}

Result<std::vector<GitRefInfo>> ParseRefList(const JsonIn& in, std::string_view key, bool required) {
  std::vector<GitRefInfo> out;
  HUBLOAD_ASSIGN_OR_RETURN(auto arr, in.OptArray(key));
  if (!arr) {
    if (required) HUBLOAD_RETURN_IF_ERROR(in.Array(key).status());
    return out;
  }
  HUBLOAD_ASSIGN_OR_RETURN(auto elements, arr->Elements());
  for (const JsonIn& e : elements) {
    HUBLOAD_RETURN_IF_ERROR(e.ExpectObject());
    GitRefInfo r;
    HUBLOAD_ASSIGN_OR_RETURN(r.name, e.String("name"));
    HUBLOAD_ASSIGN_OR_RETURN(r.ref, e.String("ref"));
    HUBLOAD_ASSIGN_OR_RETURN(r.target_commit, e.String("targetCommit"));
    HUBLOAD_RETURN_IF_ERROR(CheckCommitId(e, "targetCommit", r.target_commit));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Result<RepoRefs> ParseRefs(const nlohmann::json& j, const std::string& doc) {
  JsonIn in(j, doc);
  HUBLOAD_RETURN_IF_ERROR(in.ExpectObject());
  RepoRefs refs;
  HUBLOAD_ASSIGN_OR_RETURN(refs.branches, ParseRefList(in, "branches", true));
  HUBLOAD_ASSIGN_OR_RETURN(refs.tags, ParseRefList(in, "tags", true));
  HUBLOAD_ASSIGN_OR_RETURN(refs.pull_requests, ParseRefList(in, "pullRequests", false));
  return refs;
}

Result<std::vector<GitCommitInfo>> ParseCommitsPage(const nlohmann::json& j, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(auto elements, JsonIn(j, doc).Elements());
  std::vector<GitCommitInfo> out;
  for (const JsonIn& e : elements) {
    HUBLOAD_RETURN_IF_ERROR(e.ExpectObject());
    GitCommitInfo c;
    HUBLOAD_ASSIGN_OR_RETURN(c.commit_id, e.String("id"));
    HUBLOAD_RETURN_IF_ERROR(CheckCommitId(e, "id", c.commit_id));
    HUBLOAD_ASSIGN_OR_RETURN(c.title, e.StringOr("title", ""));
    HUBLOAD_ASSIGN_OR_RETURN(c.message, e.StringOr("message", ""));
    HUBLOAD_ASSIGN_OR_RETURN(c.created_at, e.StringOr("date", ""));
    HUBLOAD_ASSIGN_OR_RETURN(auto authors, e.OptArray("authors"));
    if (authors) {
      HUBLOAD_ASSIGN_OR_RETURN(auto list, authors->Elements());
      for (const JsonIn& a : list) {
        HUBLOAD_RETURN_IF_ERROR(a.ExpectObject());
        HUBLOAD_ASSIGN_OR_RETURN(std::string user, a.String("user"));
        c.authors.push_back(std::move(user));
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace hubload::hub_internal
