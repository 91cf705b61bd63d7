// Request body parsers of `hubload serve` (hub/server/bodies.h).
#include "hub/server/bodies.h"

#include <nlohmann/json.hpp>

#include "hub/server/store_internal.h"
#include "hubload/reasons.h"
#include "util/base64.h"
#include "util/json.h"
#include "util/percent.h"

namespace hubload::server::internal {
namespace {

using nlohmann::json;
using util::JsonIn;

Status Bad(const std::string& doc, const std::string& what) {
  return Status(Code::kInvalidFormat, doc + ": " + what, reason::kBadRequestBody);
}

// Base64 with line breaks and spaces allowed (as the original decoders do).
std::optional<std::string> DecodeBase64Lenient(const std::string& in) {
  std::string clean;
  clean.reserve(in.size());
  for (char c : in)
    if (c != '\n' && c != '\r' && c != ' ') clean.push_back(c);
  return util::Base64Decode(clean);
}

}  // namespace

Result<std::vector<PreuploadFile>> ParsePreupload(const std::string& body, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
  JsonIn in(j, doc);
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn files, in.Array("files"));
  HUBLOAD_ASSIGN_OR_RETURN(auto items, files.Elements());
  if (items.size() > 100000) return Bad(doc, "too many files (" + std::to_string(items.size()) + ")");
  std::vector<PreuploadFile> out;
  for (auto& f : items) {
    PreuploadFile p;
    HUBLOAD_ASSIGN_OR_RETURN(p.path, f.String("path"));
    HUBLOAD_ASSIGN_OR_RETURN(auto size, f.OptUint("size"));
    p.size = size.value_or(0);
    out.push_back(std::move(p));
  }
  return out;
}

Result<LfsBatchBody> ParseLfsBatch(const std::string& body, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
  JsonIn in(j, doc);
  LfsBatchBody b;
  HUBLOAD_ASSIGN_OR_RETURN(b.operation, in.StringOr("operation", "download"));
  if (b.operation != "download" && b.operation != "upload")
    return Bad(doc, "operation must be download or upload, got '" + b.operation + "'");
  HUBLOAD_ASSIGN_OR_RETURN(b.hash_algo, in.StringOr("hash_algo", "sha256"));
  HUBLOAD_ASSIGN_OR_RETURN(auto transfers, in.OptArray("transfers"));
  if (transfers) {
    HUBLOAD_ASSIGN_OR_RETURN(auto items, transfers->Elements());
    for (auto& t : items)
      if (t.IsString() && *t.AsString() == "multipart") b.multipart = true;
  }
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn objects, in.Array("objects"));
  HUBLOAD_ASSIGN_OR_RETURN(auto items, objects.Elements());
  if (items.size() > 100000) return Bad(doc, "too many objects (" + std::to_string(items.size()) + ")");
  for (auto& o : items) {
    LfsObject obj;
    auto oid = o.String("oid");
    auto size = o.Uint("size");
    if (!oid.ok() || !size.ok()) {
      Status st = !oid.ok() ? oid.status() : size.status();
      return Status(Code::kInvalidFormat, st.message(), reason::kBadLfsObject);
    }
    obj.oid = *oid;
    obj.size = *size;
    b.objects.push_back(std::move(obj));
  }
  return b;
}

Result<CreateRepoBody> ParseCreateRepo(const std::string& body, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
  JsonIn in(j, doc);
  CreateRepoBody b;
  HUBLOAD_ASSIGN_OR_RETURN(b.name, in.String("name"));
  HUBLOAD_ASSIGN_OR_RETURN(b.organization, in.StringOr("organization", ""));
  HUBLOAD_ASSIGN_OR_RETURN(std::string type, in.StringOr("type", "model"));
  auto t = ParseRepoType(type);
  if (!t.ok() || type.back() == 's') return Bad(doc, "invalid repo type '" + type + "' (model|dataset|space)");
  b.type = *t;
  HUBLOAD_ASSIGN_OR_RETURN(auto priv, in.OptBool("private"));
  b.private_repo = priv.value_or(false);
  HUBLOAD_ASSIGN_OR_RETURN(auto visibility, in.OptString("visibility"));
  if (visibility) b.private_repo = *visibility != "public";
  HUBLOAD_ASSIGN_OR_RETURN(auto files, in.OptArray("files"));
  if (files) {
    HUBLOAD_ASSIGN_OR_RETURN(auto items, files->Elements());
    for (auto& f : items) {
      HUBLOAD_ASSIGN_OR_RETURN(std::string path, f.String("path"));
      HUBLOAD_ASSIGN_OR_RETURN(std::string content, f.String("content"));
      HUBLOAD_ASSIGN_OR_RETURN(std::string encoding, f.StringOr("encoding", ""));
      if (encoding == "base64") {
        auto decoded = DecodeBase64Lenient(content);
        if (!decoded) return Bad(doc, "files: bad base64 for " + path);
        content = std::move(*decoded);
      }
      b.files[path] = std::move(content);
    }
  }
  return b;
}

Result<PathsInfoBody> ParsePathsInfo(const std::string& body, const std::string& content_type,
                                     const std::string& doc) {
  PathsInfoBody b;
  if (content_type.find("json") != std::string::npos) {
    HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
    JsonIn in(j, doc);
    HUBLOAD_ASSIGN_OR_RETURN(JsonIn paths, in.Array("paths"));
    HUBLOAD_ASSIGN_OR_RETURN(auto items, paths.Elements());
    for (auto& p : items) {
      HUBLOAD_ASSIGN_OR_RETURN(std::string s, p.AsString());
      b.paths.push_back(std::move(s));
    }
    HUBLOAD_ASSIGN_OR_RETURN(auto expand, in.OptBool("expand"));
    b.expand = expand.value_or(false);
  } else {
    auto form = util::ParseQuery(body);
    if (!form) return Bad(doc, "malformed percent-encoding in the form body");
    for (auto& [k, v] : *form) {
      if (k == "paths") b.paths.push_back(v);
      if (k == "expand") b.expand = v == "true" || v == "1" || v == "True";
    }
  }
  if (b.paths.size() > 10000) return Bad(doc, "too many paths (" + std::to_string(b.paths.size()) + ", limit 10000)");
  return b;
}

Result<MultipartCompleteBody> ParseMultipartComplete(const std::string& body, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
  JsonIn in(j, doc);
  MultipartCompleteBody b;
  HUBLOAD_ASSIGN_OR_RETURN(b.oid, in.OptString("oid"));
  HUBLOAD_ASSIGN_OR_RETURN(JsonIn parts, in.Array("parts"));
  HUBLOAD_ASSIGN_OR_RETURN(auto items, parts.Elements());
  for (auto& p : items) {
    HUBLOAD_ASSIGN_OR_RETURN(uint64_t n, p.Uint("partNumber"));
    HUBLOAD_ASSIGN_OR_RETURN(std::string etag, p.String("etag"));
    b.etags[n] = std::move(etag);
  }
  return b;
}

Result<BranchBody> ParseBranchBody(const std::string& body, const std::string& doc) {
  BranchBody b;
  if (body.find_first_not_of(" \t\r\n") == std::string::npos) return b;
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
  JsonIn in(j, doc);
  HUBLOAD_RETURN_IF_ERROR(in.ExpectObject());
  HUBLOAD_ASSIGN_OR_RETURN(b.starting_point, in.StringOr("startingPoint", ""));
  HUBLOAD_ASSIGN_OR_RETURN(auto empty, in.OptBool("emptyBranch"));
  b.empty = empty.value_or(false);
  HUBLOAD_ASSIGN_OR_RETURN(auto overwrite, in.OptBool("overwrite"));
  b.overwrite = overwrite.value_or(false);
  return b;
}

Result<TagBody> ParseTagBody(const std::string& body, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
  JsonIn in(j, doc);
  TagBody b;
  HUBLOAD_ASSIGN_OR_RETURN(b.tag, in.String("tag"));
  HUBLOAD_ASSIGN_OR_RETURN(b.message, in.StringOr("message", ""));
  return b;
}

Result<SettingsBody> ParseSettingsBody(const std::string& body, const std::string& doc) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(body, doc));
  JsonIn in(j, doc);
  HUBLOAD_RETURN_IF_ERROR(in.ExpectObject());
  SettingsBody b;
  HUBLOAD_ASSIGN_OR_RETURN(b.private_repo, in.OptBool("private"));
  HUBLOAD_ASSIGN_OR_RETURN(auto gated, in.Find("gated"));
  if (gated && gated->IsString()) {
    HUBLOAD_ASSIGN_OR_RETURN(std::string g, gated->AsString());
    if (g != "auto" && g != "manual") return Bad(doc, "gated must be \"auto\", \"manual\" or false, got '" + g + "'");
    b.gated = g;
  } else if (gated && !gated->IsNull()) {
    HUBLOAD_ASSIGN_OR_RETURN(bool g, gated->AsBool());
    if (g) return Bad(doc, "gated must be \"auto\", \"manual\" or false, got true");
    b.gated = "";
  }
  return b;
}

Result<CommitBody> ParseCommitNdjson(const std::string& body, const std::string& doc) {
  CommitBody out;
  bool have_header = false;
  size_t start = 0;
  int line_no = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    std::string line = body.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.empty() || line == "\r") continue;
    std::string line_doc = doc + " line " + std::to_string(line_no);
    HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(line, line_doc));
    JsonIn in(j, line_doc);
    HUBLOAD_ASSIGN_OR_RETURN(std::string key, in.String("key"));
    HUBLOAD_ASSIGN_OR_RETURN(JsonIn v, in.Object("value"));
    if (key == "header") {
      if (have_header) return Bad(line_doc, "a second header line");
      have_header = true;
      HUBLOAD_ASSIGN_OR_RETURN(out.summary, v.StringOr("summary", ""));
      HUBLOAD_ASSIGN_OR_RETURN(out.description, v.StringOr("description", ""));
      HUBLOAD_ASSIGN_OR_RETURN(out.parent_commit, v.StringOr("parentCommit", ""));
      continue;
    }
    CommitLine op;
    op.line = line_no;
    HUBLOAD_ASSIGN_OR_RETURN(op.path, v.String("path"));
    if (key == "deletedFolder")
      while (!op.path.empty() && op.path.back() == '/') op.path.pop_back();
    if (!IsCommittablePath(op.path))
      return Bad(line_doc, "invalid path in repo '" + op.path +
                               "' (must be relative, without '..', empty, '.git' or '.cache' segments)");
    if (key == "file") {
      op.kind = CommitLine::Kind::kFile;
      HUBLOAD_ASSIGN_OR_RETURN(std::string content, v.StringOr("content", ""));
      HUBLOAD_ASSIGN_OR_RETURN(std::string encoding, v.StringOr("encoding", "base64"));
      if (encoding == "base64") {
        auto decoded = DecodeBase64Lenient(content);
        if (!decoded) return Bad(line_doc, "bad base64 content for " + op.path);
        op.content = std::move(*decoded);
      } else {
        op.content = std::move(content);
      }
    } else if (key == "lfsFile") {
      op.kind = CommitLine::Kind::kLfsFile;
      HUBLOAD_ASSIGN_OR_RETURN(op.oid, v.String("oid"));
      if (!IsHexOf(op.oid, 64, 64)) return Bad(line_doc, "lfsFile " + op.path + " needs a sha256 oid (64 hex)");
      HUBLOAD_ASSIGN_OR_RETURN(op.size, v.OptUint("size"));
      HUBLOAD_ASSIGN_OR_RETURN(std::string algo, v.StringOr("algo", "sha256"));
      if (algo != "sha256") return Bad(line_doc, "lfsFile " + op.path + ": unsupported algo '" + algo + "'");
    } else if (key == "deletedFile") {
      op.kind = CommitLine::Kind::kDeletedFile;
    } else if (key == "deletedFolder") {
      op.kind = CommitLine::Kind::kDeletedFolder;
    } else {
      return Bad(line_doc, "unknown operation key '" + key + "'");
    }
    out.ops.push_back(std::move(op));
  }
  if (!have_header) return Bad(doc, "missing header line");
  return out;
}

}  // namespace hubload::server::internal
