// HTTP error answers → Status, as huggingface_hub utils/_http.py hf_raise_for_status.
#include <nlohmann/json.hpp>

#include "hubload/hub.h"

namespace hubload {
namespace {

std::string BodyMessage(const HttpHeaders& h, const std::string& body) {
  if (auto m = h.Get("X-Error-Message"); m && !m->empty()) return *m;
  if (body.empty() || body.size() > 65536) return {};
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return {};
  for (const char* k : {"error", "message", "error_description"}) {
    if (j.contains(k)) {
      if (j[k].is_string()) return j[k].get<std::string>();
      if (j[k].is_array() && !j[k].empty() && j[k][0].is_string()) return j[k][0].get<std::string>();
    }
  }
  if (j.contains("errors") && j["errors"].is_array() && !j["errors"].empty() && j["errors"][0].is_object() &&
      j["errors"][0].contains("message") && j["errors"][0]["message"].is_string())
    return j["errors"][0]["message"].get<std::string>();
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
