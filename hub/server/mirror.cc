// Mirror mode over a Hugging Face cache (issue 19): which snapshots the store
// can vouch for (start-up report), and the pull-through of files a listing
// names but the cache lacks from ServerOptions::upstream, through the normal
// client and cache writer (HubClient::Download into the store root: its blob
// locks make the download once-only across processes; a per-file mutex here
// makes it once-only within this server, so concurrent requests wait for the
// one download instead of each sending their own HEAD).
#include <map>
#include <memory>
#include <mutex>

#include <spdlog/spdlog.h>

#include "hub/server/impl.h"
#include "hubload/hub.h"
#include "hubload/reasons.h"

namespace hubload::server {

using namespace internal;
namespace fs = std::filesystem;

namespace internal {

class Upstream {
 public:
  Upstream(const std::string& endpoint, const std::string& token, const std::string& root) {
    ClientOptions o;
    o.config.endpoint = endpoint;
    o.config.token = token;
    o.config.cache_dir = root;
    o.config.offline = false;
    client_ = std::make_unique<HubClient>(std::move(o));
  }

  Status Fetch(RepoType type, const std::string& repo_id, const std::string& commit, const std::string& path) {
    std::shared_ptr<std::mutex> file_mu;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto& m = per_file_[RepoFolderName(repo_id, type) + "/" + commit + "/" + path];
      if (!m) m = std::make_shared<std::mutex>();
      file_mu = m;
    }
    std::lock_guard<std::mutex> lock(*file_mu);
    FileRequest req;
    req.repo_id = repo_id;
    req.filename = path;
    req.revision = commit;  // a commit: zero requests once the file is cached
    req.repo_type = type;
    auto r = client_->Download(req);
    return r.ok() ? Status::Ok() : r.status();
  }

 private:
  std::unique_ptr<HubClient> client_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::mutex>> per_file_;
};

}  // namespace internal

Status Server::Impl::PullThrough(RepoType type, const std::string& repo_id, const std::string& commit,
                                 const std::string& path) {
  if (opt.upstream.empty()) return Status(Code::kEntryNotFound, "no --upstream to fetch it from",
                                          reason::kEntryNotFound);
  std::shared_ptr<Upstream> up;
  {
    std::lock_guard<std::mutex> lock(upload_mu);
    if (!upstream) upstream = std::make_shared<Upstream>(opt.upstream, opt.upstream_token, opt.root);
    up = upstream;
  }
  Status st = up->Fetch(type, repo_id, commit, path);
  if (!st.ok()) spdlog::warn("hubload serve: pull-through of {}/{} at {} failed: {}", repo_id, path, commit, st.message());
  return st;
}

void Server::Impl::ReportMirrorCompleteness() const {
  std::error_code ec;
  for (auto it = fs::directory_iterator(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string folder = it->path().filename().string();
    if (folder.rfind("models--", 0) != 0 && folder.rfind("datasets--", 0) != 0 && folder.rfind("spaces--", 0) != 0)
      continue;
    std::error_code ec2;
    if (fs::exists(it->path() / ".hubload-repo.json", ec2)) continue;  // a store repo: complete by construction
    for (auto s = fs::directory_iterator(it->path() / "snapshots", ec2); !ec2 && s != fs::directory_iterator();
         s.increment(ec2)) {
      std::string commit = s->path().filename().string();
      if (!IsHexOf(commit, 40, 40)) continue;
      switch (SnapshotCompleteness(root, it->path(), commit)) {
        case Completeness::kComplete: break;
        case Completeness::kListed:
          spdlog::warn("hubload serve: {} snapshot {} lacks files its trees/{}.json lists: they answer {}", folder,
                       commit, commit,
                       opt.upstream.empty() ? "404 EntryNotFound" : "after a pull from " + opt.upstream);
          break;
        case Completeness::kUnproven:
          spdlog::warn("hubload serve: {} snapshot {} has no trees/{}.json listing: it may be partial; only the "
                       "files present are listed (access log: \"unproven\")",
                       folder, commit, commit);
          break;
      }
    }
  }
}

}  // namespace hubload::server
