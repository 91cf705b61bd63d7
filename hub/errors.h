// hub/errors.h (internal): HTTP error answers -> Status.
#pragma once

#include <string>

#include "hubload/status.h"
#include "hubload/transport.h"

namespace hubload {

/// Maps an HTTP error answer to a Status the way huggingface_hub
/// hf_raise_for_status does (X-Error-Code first, then status). `ctx` is
/// completed with http_status, request_id, error_code. For 2xx/3xx returns OK.
/// `body` is untrusted (read through util::JsonIn). Pure; thread-safe.
Status StatusFromHttp(int http_status, const HttpHeaders& headers, const std::string& body, ErrorContext ctx);

}  // namespace hubload
