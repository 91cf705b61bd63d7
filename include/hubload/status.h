// hubload/status.h: the error model of every public hubload call.
//
// Every fallible call returns a Status or a Result<T>; no exception crosses the
// public API. A Status carries a coarse Code (what a caller switches on), a
// stable machine-readable `reason` (e.g. "HeaderTooSmall", "RepoNotFound"),
// a human message that names the repo/file/tensor and the rule broken, and an
// ErrorContext with the request details. Tokens never appear in any field.
//
// Thread safety: Status and Result are values; distinct objects may be used
// from different threads freely, one object is not synchronised.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace hubload {

enum class Code {
  kOk = 0,
  kInvalidArgument,   // caller passed something malformed
  kNotFound,          // a local file or key is absent
  kRepoNotFound,      // Hub: X-Error-Code RepoNotFound (or 401 on a repo that may be private)
  kRevisionNotFound,  // Hub: X-Error-Code RevisionNotFound
  kEntryNotFound,     // Hub: X-Error-Code EntryNotFound (file absent at that revision)
  kGated,             // Hub: X-Error-Code GatedRepo
  kUnauthorized,      // 401: bad or missing token
  kPermissionDenied,  // 403 other than gated
  kRateLimited,       // 429
  kServerError,       // 5xx after retries
  kNetwork,           // connection, DNS, TLS, timeout, stalled transfer
  kCorruptDownload,   // size or sha256 of a downloaded blob does not match
  kDiskFull,          // ENOSPC / EDQUOT / EFBIG while writing
  kIOError,           // other local file-system errors
  kInvalidFormat,     // a file (safetensors, index, JSON) breaks its format rules
  kConflict,          // e.g. stale parent_commit
  kOfflineMiss,       // offline mode and the file is not in the cache
  kCancelled,         // work cancelled (first error elsewhere, or caller)
  kUnsupported,       // valid input hubload does not handle (e.g. a dtype)
  kInternal,
};

/// Short stable name of a code ("InvalidFormat"), for logs and JSON.
inline const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk: return "Ok";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kRepoNotFound: return "RepoNotFound";
    case Code::kRevisionNotFound: return "RevisionNotFound";
    case Code::kEntryNotFound: return "EntryNotFound";
    case Code::kGated: return "Gated";
    case Code::kUnauthorized: return "Unauthorized";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kRateLimited: return "RateLimited";
    case Code::kServerError: return "ServerError";
    case Code::kNetwork: return "Network";
    case Code::kCorruptDownload: return "CorruptDownload";
    case Code::kDiskFull: return "DiskFull";
    case Code::kIOError: return "IOError";
    case Code::kInvalidFormat: return "InvalidFormat";
    case Code::kConflict: return "Conflict";
    case Code::kOfflineMiss: return "OfflineMiss";
    case Code::kCancelled: return "Cancelled";
    case Code::kUnsupported: return "Unsupported";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

/// Where an error happened. Empty strings / 0 mean "not applicable".
/// Never holds a token (URLs are stored without credentials or signatures).
struct ErrorContext {
  std::string repo_id;
  std::string revision;
  std::string file;        // path in the repo, or local path
  std::string tensor;      // tensor name, for format errors
  std::string url;
  int http_status = 0;
  std::string request_id;  // X-Request-Id
  std::string error_code;  // X-Error-Code as sent by the Hub
  /// The full list a message cuts ("a, b, c ... and 159 more", util::JoinCut):
  /// e.g. every missing shard of an index. Empty when the message lists all.
  /// The CLI's --json error output prints it whole.
  std::vector<std::string> names;
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  /// `reason`: a stable name callers may switch on (hubload/reasons.h
  /// constants); empty = only the code.
  Status(Code code, std::string message, std::string_view reason = {}, ErrorContext ctx = {})
      : code_(code), message_(std::move(message)), reason_(reason), ctx_(std::move(ctx)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  /// Human-readable message; names the repo/file/tensor and the rule broken.
  const std::string& message() const { return message_; }
  /// Stable machine-readable sub-code, e.g. "HeaderTooSmall"; may be empty.
  const std::string& reason() const { return reason_; }
  const ErrorContext& context() const { return ctx_; }
  ErrorContext& mutable_context() { return ctx_; }

  /// "InvalidFormat[HeaderTooSmall]: message".
  std::string ToString() const {
    if (ok()) return "OK";
    std::string s = CodeName(code_);
    if (!reason_.empty() && reason_ != s) s += "[" + reason_ + "]";  // not "NotFound[NotFound]"
    s += ": ";
    s += message_;
    return s;
  }

  /// Returns a copy whose empty context fields are filled from `ctx` (fields
  /// already set are kept: the lowest layer that knew them wins). The message
  /// is unchanged. The one way to add context on the way up.
  Status Annotate(const ErrorContext& ctx) const {
    Status s = *this;
    ErrorContext& c = s.ctx_;
    auto fill = [](std::string& dst, const std::string& src) {
      if (dst.empty()) dst = src;
    };
    fill(c.repo_id, ctx.repo_id);
    fill(c.revision, ctx.revision);
    fill(c.file, ctx.file);
    fill(c.tensor, ctx.tensor);
    fill(c.url, ctx.url);
    if (c.http_status == 0) c.http_status = ctx.http_status;
    fill(c.request_id, ctx.request_id);
    fill(c.error_code, ctx.error_code);
    if (c.names.empty()) c.names = ctx.names;
    return s;
  }

  /// True when this status has reason `r` (compare against the named
  /// constants of reasons.h, never against a literal at a call site).
  bool Is(std::string_view r) const { return !ok() && reason_ == r; }

  /// Returns a copy whose message is prefixed with `prefix + ": "`.
  Status WithPrefix(const std::string& prefix) const {
    Status s = *this;
    s.message_ = prefix + ": " + message_;
    return s;
  }

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string reason_;
  ErrorContext ctx_;
};

/// A value or an error Status. `Result<T> r = value;` or `= Status(...)`.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(implicit)
  /// A Result made from an OK Status holds no value: it becomes a kInternal
  /// error (reason "OkStatusAsError") in every build, as abseil's StatusOr.
  Result(Status status)  // NOLINT(implicit)
      : v_(status.ok() ? Status(Code::kInternal, "a Result was constructed from an OK Status (no value)",
                                "OkStatusAsError")
                       : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  /// OK status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &std::get<T>(v_); }
  const T* operator->() const { return &std::get<T>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace hubload

#define HUBLOAD_CONCAT_INNER_(a, b) a##b
#define HUBLOAD_CONCAT_(a, b) HUBLOAD_CONCAT_INNER_(a, b)

/// Returns the Status from the enclosing function if `expr` is not OK.
#define HUBLOAD_RETURN_IF_ERROR(expr)              \
  do {                                             \
    ::hubload::Status hubload_st_ = (expr);        \
    if (!hubload_st_.ok()) return hubload_st_;     \
  } while (0)

/// `HUBLOAD_ASSIGN_OR_RETURN(auto x, ResultExpr());`
#define HUBLOAD_ASSIGN_OR_RETURN(lhs, rexpr)                                   \
  auto HUBLOAD_CONCAT_(hubload_res_, __LINE__) = (rexpr);                      \
  if (!HUBLOAD_CONCAT_(hubload_res_, __LINE__).ok())                           \
    return HUBLOAD_CONCAT_(hubload_res_, __LINE__).status();                   \
  lhs = std::move(HUBLOAD_CONCAT_(hubload_res_, __LINE__)).value()
