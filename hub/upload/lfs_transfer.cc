// LFS batch, basic and multipart PUTs straight from the files, completion and
// verify (hub/upload/upload_internal.h).
#include <map>
#include <set>

#include "hub/errors.h"
#include "hub/answers.h"
#include "hub/repo_urls.h"
#include "hub/upload/upload_internal.h"
#include "util/json.h"
#include "util/worker_pool.h"

namespace hubload::hub_internal::upload {
namespace {

struct PutTask {
  Object* obj = nullptr;
  int part = 0;  // 1-based; 0 = basic
  uint64_t offset = 0, length = 0;
};

std::string PartLabel(const Object& o, int part) {
  if (part == 0) return "'" + o.path + "'";
  return "'" + o.path + "' (part " + std::to_string(part) + " of " + std::to_string(o.part_urls.size()) + ")";
}

Status Put(const Call& c, const PutTask& t) {
  HttpRequest req;
  req.method = "PUT";
  req.url = t.part == 0 ? t.obj->upload_href : t.obj->part_urls[static_cast<size_t>(t.part - 1)];
  req.body_file = FileBody{t.obj->local, t.offset, t.length};
  const std::string url = req.url;
  auto r = c.Send(std::move(req), /*auth=*/false, /*retry=*/true);
  ErrorContext ctx = c.Ctx(t.obj->path);
  if (!r.ok()) {
    Status st = r.status();
    st.mutable_context().file = t.obj->path;
    return st.WithPrefix("uploading " + PartLabel(*t.obj, t.part) + " failed; no commit was made");
  }
  if (r->status < 200 || r->status >= 300) {
    ctx.url = RedactUrl(r->effective_url.empty() ? url : r->effective_url);
    return StatusFromHttp(r->status, r->headers, r->body, ctx)
        .WithPrefix("uploading " + PartLabel(*t.obj, t.part) + " failed; no commit was made");
  }
  if (t.part > 0) {
    auto etag = r->headers.Get("ETag");
    if (!etag || etag->empty())
      return BadAnswer("uploading " + PartLabel(*t.obj, t.part) + ": the part answer has no ETag; no commit was made",
                       ctx);
    t.obj->part_etags[static_cast<size_t>(t.part - 1)] = *etag;
  }
  return Status::Ok();
}

Status CompleteObject(const Call& c, Object& o) {
  if (o.chunk_size > 0) {
    nlohmann::json parts = nlohmann::json::array();
    for (size_t i = 0; i < o.part_etags.size(); ++i)
      parts.push_back({{"partNumber", static_cast<int>(i + 1)}, {"etag", o.part_etags[i]}});
    nlohmann::json body{{"oid", o.oid}, {"parts", parts}};
    auto r = c.Json("POST", o.upload_href, util::DumpJson(body), kLfsJson, false, true,
                    "completing the multipart upload of '" + o.path + "' failed; no commit was made", o.path, kLfsJson);
    if (!r.ok()) return r.status();
  }
  if (!o.verify_href.empty()) {
    nlohmann::json body{{"oid", o.oid}, {"size", o.size}};
    auto r = c.Json("POST", o.verify_href, util::DumpJson(body), "application/json", true, true,
                    "verifying the upload of '" + o.path + "' failed; no commit was made", o.path);
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

}  // namespace

Status LfsBatch(const Call& c, std::vector<std::unique_ptr<Object>>& objects, std::vector<Object*>& to_send) {
  const UploadFolderRequest& req = c.req;
  std::string url =
      c.s.opt.config.endpoint + "/" + WebPrefix(req.repo_type) + req.repo_id + ".git/info/lfs/objects/batch";
  size_t bs = static_cast<size_t>(std::max(1, c.s.opt.upload_batch_size));
  for (size_t start = 0; start < objects.size(); start += bs) {
    size_t end = std::min(objects.size(), start + bs);
    nlohmann::json objs = nlohmann::json::array();
    std::map<std::string, Object*> by_oid;
    for (size_t i = start; i < end; ++i) {
      objs.push_back({{"oid", objects[i]->oid}, {"size", objects[i]->size}});
      by_oid[objects[i]->oid] = objects[i].get();
    }
    nlohmann::json body{{"operation", "upload"},
                        {"transfers", nlohmann::json::array({"basic", "multipart"})},
                        {"objects", objs},
                        {"hash_algo", "sha256"}};
    if (!req.create_pr) body["ref"] = {{"name", req.revision}};
    const std::string what = "LFS batch for repo " + req.repo_id;
    HUBLOAD_ASSIGN_OR_RETURN(nlohmann::json ans, c.Json("POST", url, util::DumpJson(body), kLfsJson, true, true, what, "",
                                                        kLfsJson));
    auto answered = ParseLfsBatch(ans, RedactUrl(url));
    if (!answered.ok()) return answered.status().Annotate(c.Ctx()).WithPrefix(what);
    std::set<std::string> seen;
    for (LfsBatchObject& a : *answered) {
      auto it = by_oid.find(a.oid);
      if (it == by_oid.end())
        return BadAnswer("LFS batch: the server answered for oid " + a.oid + " it was not asked", c.Ctx());
      Object& obj = *it->second;
      seen.insert(a.oid);
      if (a.has_error) {
        ErrorContext ctx = c.Ctx(obj.path);
        ctx.http_status = static_cast<int>(a.error_code);
        Code code = a.error_code == 401   ? Code::kUnauthorized
                    : a.error_code == 403 ? Code::kPermissionDenied
                                          : Code::kInvalidArgument;
        return Status(code,
                      "LFS batch refused '" + obj.path + "' (oid " + a.oid + "): " + a.error_message + " (code " +
                          std::to_string(a.error_code) + "); no commit was made",
                      "LfsObjectError", ctx);
      }
      if (a.upload_href.empty()) continue;  // already stored
      obj.upload_href = a.upload_href;
      obj.verify_href = a.verify_href;
      if (a.chunk_size > 0) {
        uint64_t want = (obj.size + a.chunk_size - 1) / a.chunk_size;
        if (a.parts.size() != want)
          return BadAnswer("LFS batch: '" + obj.path + "' (" + std::to_string(obj.size) + " bytes, chunk_size " +
                               std::to_string(a.chunk_size) + ") needs " + std::to_string(want) +
                               " part URLs, the server gave " + std::to_string(a.parts.size()),
                           c.Ctx(obj.path));
        obj.chunk_size = a.chunk_size;
        for (auto& p : a.parts) obj.part_urls.push_back(p.second);
        obj.part_etags.assign(a.parts.size(), "");
      }
      to_send.push_back(&obj);
    }
    for (auto& [oid, obj] : by_oid)
      if (!seen.count(oid))
        return BadAnswer("LFS batch: the answer does not mention '" + obj->path + "' (oid " + oid + ")",
                         c.Ctx(obj->path));
  }
  return Status::Ok();
}

Status Transfer(const Call& c, std::vector<Object*>& to_send, Progress& progress, FirstError& err, CommitInfo& info) {
  std::vector<PutTask> tasks;
  uint64_t total = 0;
  for (Object* o : to_send) {
    total += o->size;
    if (o->chunk_size == 0) {
      tasks.push_back({o, 0, 0, o->size});
      o->parts_left = 1;
    } else {
      o->parts_left = static_cast<int>(o->part_urls.size());
      for (size_t i = 0; i < o->part_urls.size(); ++i) {
        uint64_t off = i * o->chunk_size;
        tasks.push_back({o, static_cast<int>(i + 1), off, std::min(o->chunk_size, o->size - off)});
      }
    }
  }
  progress.Start(UploadPhase::kUploading, total);
  std::atomic<uint64_t> sent{0};
  util::ParallelFor(tasks.size(), c.s.opt.upload_workers, [&] { return err.Stop(); }, [&](size_t i) {
    const PutTask& t = tasks[i];
    Status st = Put(c, t);
    if (!st.ok()) return err.Set(st);
    sent += t.length;
    progress.Add(t.length, t.obj->path, t.obj->size);
    if (t.obj->parts_left.fetch_sub(1) == 1) {
      Status done = CompleteObject(c, *t.obj);
      if (!done.ok()) err.Set(done);
    }
  });
  HUBLOAD_RETURN_IF_ERROR(err.Get());
  progress.Finish();
  info.lfs_bytes_uploaded = sent.load();
  info.lfs_objects_uploaded = to_send.size();
  return Status::Ok();
}

}  // namespace hubload::hub_internal::upload
