// HTTP error answers → Status, as huggingface_hub utils/_http.py hf_raise_for_status.
#include "hubload/hub.h"
#include "util/json.h"

namespace hubload {
namespace {

std::string BodyMessage(const HttpHeaders& h, const std::string& body) {
  if (auto m = h.Get("X-Error-Message"); m && !m->empty()) return *m;
  if (body.empty() || body.size() > 65536) return {};
  auto j = util::ParseJson(body, "error answer");
  if (!j.ok()) return {};
  util::JsonIn in(*j, "error answer");
  if (!in.IsObject()) return {};
  auto first_string = [](const util::JsonIn& v) -> std::string {
    if (v.IsString()) return v.AsString().value();
    if (v.IsArray()) {
      auto el = v.Elements();
      if (el.ok() && !el->empty() && (*el)[0].IsString()) return (*el)[0].AsString().value();
    }
    return {};
  };
  for (const char* k : {"error", "message", "error_description"}) {
    auto v = in.Find(k);
    if (!v.ok() || !*v) continue;
    if (std::string m = first_string(**v); !m.empty()) return m;
  }
  auto errors = in.OptArray("errors");
  if (errors.ok() && *errors) {
    auto el = (*errors)->Elements();
    if (el.ok() && !el->empty() && (*el)[0].IsObject()) {
      auto m = (*el)[0].OptString("message");
      if (m.ok() && *m) return **m;
    }
  }
  return {};
}

}  // namespace

Status StatusFromHttp(int status, const HttpHeaders& h, const std::string& body, ErrorContext ctx) {
  if (status >= 200 && status < 400) return Status::Ok();
  ctx.http_status = status;
  if (auto r = h.Get("X-Request-Id")) ctx.request_id = *r;
  else if (auto a = h.Get("X-Amzn-Trace-Id")) ctx.request_id = *a;
  if (auto e = h.Get("X-Error-Code")) ctx.error_code = *e;
  std::string server_msg = BodyMessage(h, body);
  const std::string& ec = ctx.error_code;
  Code code;
  std::string what;
  std::string subject = ctx.repo_id.empty() ? std::string("request") : "repo " + ctx.repo_id;
  if (ec == "RevisionNotFound") {
    code = Code::kRevisionNotFound;
    what = "revision '" + ctx.revision + "' not found in " + subject;
  } else if (ec == "EntryNotFound") {
    code = Code::kEntryNotFound;
    what = "file '" + ctx.file + "' not found in " + subject + " at revision '" + ctx.revision + "'";
  } else if (ec == "GatedRepo") {
    code = Code::kGated;
    what = subject + " is gated: " + (status == 401 ? "log in with a token" : "your token is not on the approved list");
  } else if (h.Get("X-Error-Message").value_or("") == "Access to this resource is disabled.") {
    code = Code::kPermissionDenied;
    what = subject + " is disabled";
  } else if (ec == "RepoNotFound") {
    code = Code::kRepoNotFound;
    what = subject + " not found (or private and the token has no access)";
  } else if (status == 401) {
    code = Code::kUnauthorized;
    what = "unauthorized for " + subject + " (missing or invalid token, or a private repo)";
  } else if (status == 403) {
    code = Code::kPermissionDenied;
    what = "forbidden: " + subject;
  } else if (status == 404) {
    code = ctx.file.empty() ? Code::kRepoNotFound : Code::kEntryNotFound;
    what = (ctx.file.empty() ? subject : "'" + ctx.file + "' of " + subject) + " not found";
  } else if (status == 429) {
    code = Code::kRateLimited;
    what = "rate limited by the server";
    if (auto ra = h.Get("Retry-After")) what += " (Retry-After: " + *ra + " s)";
  } else if (status == 408) {
    code = Code::kNetwork;
    what = "request timed out on the server";
  } else if (status >= 500) {
    code = Code::kServerError;
    what = "server error";
  } else if (status == 416) {
    code = Code::kInvalidArgument;
    what = "range not satisfiable";
    if (auto cr = h.Get("Content-Range")) what += " (Content-Range: " + *cr + ")";
  } else {
    code = Code::kInvalidArgument;
    what = "request rejected";
  }
  std::string msg = what + ": HTTP " + std::to_string(status);
  if (!server_msg.empty()) msg += " (" + server_msg + ")";
  if (!ctx.url.empty()) msg += " for " + ctx.url;
  if (!ctx.request_id.empty()) msg += " [request id " + ctx.request_id + "]";
  return Status(code, msg, ec.empty() ? std::string("Http") + std::to_string(status) : ec, std::move(ctx));
}

}  // namespace hubload
