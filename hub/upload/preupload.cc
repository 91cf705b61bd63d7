// Preupload: which files go through LFS and which the server already holds
// (hub/upload/upload_internal.h).
#include <map>
#include <set>

#include "hub/answers.h"
#include "hub/upload/upload_internal.h"
#include "util/base64.h"
#include "util/json.h"

namespace hubload::hub_internal::upload {

Status Preupload(const Call& c, std::vector<Item>& items) {
  const UploadFolderRequest& req = c.req;
  std::string url = c.ApiRepo() + "/preupload/" + EncodeRevision(req.revision) + (req.create_pr ? "?create_pr=1" : "");
  size_t bs = static_cast<size_t>(std::max(1, c.s.opt.upload_batch_size));
  for (size_t start = 0; start < items.size(); start += bs) {
    size_t end = std::min(items.size(), start + bs);
    nlohmann::json files = nlohmann::json::array();
    std::map<std::string, Item*> by_path;
    for (size_t i = start; i < end; ++i) {
      files.push_back(
          {{"path", items[i].path}, {"size", items[i].size}, {"sample", util::Base64Encode(items[i].sample)}});
      by_path[items[i].path] = &items[i];
    }
    nlohmann::json body{{"files", files}};
    const std::string what = "preupload for repo " + req.repo_id;
    HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json ans,
                             c.Json("POST", url, util::DumpJson(body), "application/json", true, true, what));
    auto entries = ParsePreupload(ans, RedactUrl(url));
    if (!entries.ok()) return entries.status().Annotate(c.Ctx()).WithPrefix(what);
    std::set<std::string> seen;
    for (const PreuploadEntry& f : *entries) {
      auto it = by_path.find(f.path);
      if (it == by_path.end()) continue;
      if (f.upload_mode != "lfs" && f.upload_mode != "regular")
        return BadAnswer("preupload: uploadMode '" + f.upload_mode + "' for '" + f.path + "' is neither lfs nor regular",
                         c.Ctx(f.path));
      Item& item = *it->second;
      item.lfs = f.upload_mode == "lfs" && item.size > 0;  // huggingface_hub: empty files are regular
      item.ignore = f.should_ignore;
      item.remote_oid = f.oid;
      seen.insert(f.path);
    }
    for (auto& [p, item] : by_path)
      if (!seen.count(p)) return BadAnswer(what + ": the answer does not mention '" + p + "'", c.Ctx(p));
  }
  return Status::Ok();
}

}  // namespace hubload::hub_internal::upload
