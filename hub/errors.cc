// HTTP error answers → Status, as huggingface_hub utils/_http.py hf_raise_for_status.
#include "hub/errors.h"

#include <algorithm>
#include <ctime>

#include "hub/http_parse.h"
#include "hubload/hub.h"
#include "hubload/reasons.h"
#include "util/json.h"

namespace hubload {
namespace {

// Text of the first <tag>...</tag> in an XML error body, printable ASCII
// only and at most 200 bytes ("" when absent).
std::string XmlElement(const std::string& body, const std::string& tag) {
  size_t b = body.find("<" + tag + ">");
  if (b == std::string::npos) return {};
  b += tag.size() + 2;
  size_t e = body.find("</" + tag + ">", b);
  if (e == std::string::npos || e - b > 200) return {};
  std::string v = body.substr(b, e - b);
  for (char c : v)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e) return {};
  return v;
}

std::string BodyMessage(const HttpHeaders& h, const std::string& body) {
  if (auto m = h.Get("X-Error-Message"); m && !m->empty()) return *m;
  if (body.empty() || body.size() > 65536) return {};
  // S3 / CloudFront / GCS answer with XML: <Error><Code>..</Code><Message>..</Message></Error> (B44).
  if (size_t first = body.find_first_not_of(" \t\r\n"); first != std::string::npos && body[first] == '<') {
    std::string code = XmlElement(body, "Code"), msg = XmlElement(body, "Message");
    return code.empty() ? msg : msg.empty() ? code : code + ": " + msg;
  }
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

// B38, as huggingface_hub's 429 message ("Retry after 55 seconds (0/500
// requests remaining in current 300s window)") plus the group and what helps.
std::string RateLimitedWhat(const HttpHeaders& h) {
  std::string what = "rate limited by the server";
  auto rl = hub_internal::ParseRateLimit(h);
  if (rl && !rl->group.empty()) what += " on the '" + rl->group + "' endpoints";
  if (auto wait = hub_internal::AnnouncedWait(h, static_cast<int64_t>(std::time(nullptr))))
    what += "; retry after " + std::to_string(static_cast<int64_t>(*wait)) + " s";
  else if (auto ra = h.Get("Retry-After"))
    what += " (Retry-After: " + ra->substr(0, 64) + ")";
  if (rl && rl->quota >= 0 && rl->window_s >= 0)
    what += " (" + std::to_string(std::max<int64_t>(rl->remaining, 0)) + "/" + std::to_string(rl->quota) +
            " requests remaining in the current " + std::to_string(rl->window_s) + " s window)";
  what += "; authenticated requests (HF_TOKEN or `hf auth login`) get higher limits";
  return what;
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
  std::string what, why;
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
    code = Code::kPermissionDenied;  // huggingface_hub DisabledRepoError
    why = reason::kDisabledRepo;
    what = subject + " is disabled";
  } else if (ec == "RepoNotFound") {
    code = Code::kRepoNotFound;
    what = subject + " not found (or private and the token has no access)";
  } else if (status == 401 && server_msg.find("Invalid credentials") != std::string::npos) {
    // B45: a revoked, expired or mistyped token fails even on public repos.
    code = Code::kUnauthorized;
    why = reason::kInvalidCredentials;
    what = "the token was rejected (invalid, expired or revoked): log in again (`hf auth login`), or unset "
           "HF_TOKEN / remove the saved token file to go anonymous";
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
    what = RateLimitedWhat(h);
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
  if (why.empty()) why = ec.empty() ? std::string("Http") + std::to_string(status) : ec;
  return Status(code, msg, why, std::move(ctx));
}

}  // namespace hubload
