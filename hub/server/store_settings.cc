// .hubload-repo.json: a store repo's access settings, commit log and tag
// names (store_internal.h). Read through util::JsonIn: the file may have been
// edited by hand or written by another version.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "hub/server/store_internal.h"
#include "util/file_io.h"
#include "util/json.h"

namespace hubload::server::internal {

using nlohmann::json;

Status ParseSettings(const std::string& text, const std::string& doc, RepoSettings* s) {
  HUBLOAD_ASSIGN_OR_RETURN(json j, util::ParseJson(text, doc));
  util::JsonIn in(j, doc);
  HUBLOAD_RETURN_IF_ERROR(in.ExpectObject());
  HUBLOAD_ASSIGN_OR_RETURN(auto priv, in.OptBool("private"));
  s->private_repo = priv.value_or(false);
  HUBLOAD_ASSIGN_OR_RETURN(auto gated, in.Find("gated"));
  if (gated && gated->IsString()) {
    HUBLOAD_ASSIGN_OR_RETURN(s->gated, gated->AsString());
  } else if (gated) {
    HUBLOAD_ASSIGN_OR_RETURN(bool g, gated->AsBool());
    if (g) s->gated = "auto";
  }
  for (auto [key, out] : {std::pair{"read_tokens_sha256", &s->read_sha256}, {"gated_tokens_sha256", &s->gated_sha256}}) {
    HUBLOAD_ASSIGN_OR_RETURN(auto arr, in.OptArray(key));
    if (!arr) continue;
    HUBLOAD_ASSIGN_OR_RETURN(auto items, arr->Elements());
    for (auto& v : items) {
      HUBLOAD_ASSIGN_OR_RETURN(std::string h, v.AsString());
      out->push_back(std::move(h));
    }
  }
  HUBLOAD_ASSIGN_OR_RETURN(s->created_at, in.StringOr("created_at", ""));
  HUBLOAD_ASSIGN_OR_RETURN(auto commits, in.OptObject("commits"));
  if (commits) {
    HUBLOAD_ASSIGN_OR_RETURN(auto members, commits->Members());
    for (auto& [id, rec] : members) {
      CommitRecord c;
      HUBLOAD_ASSIGN_OR_RETURN(c.parent, rec.StringOr("parent", ""));
      HUBLOAD_ASSIGN_OR_RETURN(c.title, rec.StringOr("title", ""));
      HUBLOAD_ASSIGN_OR_RETURN(c.message, rec.StringOr("message", ""));
      HUBLOAD_ASSIGN_OR_RETURN(c.date, rec.StringOr("date", ""));
      s->commits[id] = std::move(c);
    }
  }
  HUBLOAD_ASSIGN_OR_RETURN(auto tags, in.OptObject("tags"));
  if (tags) {
    HUBLOAD_ASSIGN_OR_RETURN(auto members, tags->Members());
    for (auto& [name, rec] : members) {
      HUBLOAD_ASSIGN_OR_RETURN(s->tags[name], rec.StringOr("message", ""));
    }
  }
  return Status::Ok();
}

RepoSettings LoadSettings(const fs::path& repo_dir) {
  RepoSettings s;
  std::string path = (repo_dir / ".hubload-repo.json").string();
  auto text = util::ReadSmallFile(path);
  if (!text.ok()) return s;
  RepoSettings parsed;
  parsed.present = true;
  Status st = ParseSettings(*text, path, &parsed);
  if (!st.ok()) {
    spdlog::warn("hubload serve: ignoring corrupt settings: {}", st.message());
    s.present = true;  // still a store repo; access and history default
    return s;
  }
  return parsed;
}

Status SaveSettings(const fs::path& repo_dir, const RepoSettings& s) {
  json j;
  j["private"] = s.private_repo;
  if (s.gated.empty()) {
    j["gated"] = false;
  } else {
    j["gated"] = s.gated;
  }
  j["read_tokens_sha256"] = s.read_sha256;
  j["gated_tokens_sha256"] = s.gated_sha256;
  j["created_at"] = s.created_at;
  json commits = json::object();
  for (auto& [id, c] : s.commits)
    commits[id] = {{"parent", c.parent}, {"title", c.title}, {"message", c.message}, {"date", c.date}};
  j["commits"] = std::move(commits);
  json tags = json::object();
  for (auto& [name, message] : s.tags) tags[name] = {{"message", message}};
  j["tags"] = std::move(tags);
  return util::AtomicWriteFile((repo_dir / ".hubload-repo.json").string(),
                               util::DumpJson(j, 1));
}

}  // namespace hubload::server::internal
