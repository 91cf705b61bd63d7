// Streaming LFS PUT bodies (basic upload and multipart parts) to files.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>

#include "hub/server/connection.h"

namespace hubload::server::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace fs = std::filesystem;

Response HandleUploadPut(Server::Impl& impl, tcp::socket& sock, beast::flat_buffer& buf,
                         std::unique_ptr<HeaderParser>& hp, Request& r) {
  std::vector<std::string> seg = SplitRaw(r.route_path);
  auto fail = [&](int status, const std::string& msg) {
    Response e = ErrorResponse(status, "", msg);
    if (!hp->is_done()) e.close = true;  // body not read
    return e;
  };
  if (impl.opt.read_only) return fail(403, "This server is a read-only mirror; writes are disabled.");
  auto verdict = impl.signer.Check(r.route_path, r.query);
  if (verdict != Signer::Verdict::kOk)
    return fail(403, verdict == Signer::Verdict::kExpired ? "Signed upload URL has expired"
                                                          : "Invalid signed upload URL");
  if (seg.size() != 4 && seg.size() != 6) return fail(404, "Not found");
  const std::string folder = seg[1], oid = seg[2];
  if (folder.empty() || folder[0] == '.' || folder.find('%') != std::string::npos || !IsHexOf(oid, 64, 64))
    return fail(404, "Not found");
  auto size_n = ParseDecimal(seg[3]);
  if (!size_n) return fail(400, "bad size '" + seg[3] + "' in upload URL");
  uint64_t size = *size_n;
  fs::path repo_dir = impl.root / folder;
  std::error_code ec;
  if (!fs::is_directory(repo_dir / "blobs", ec)) return fail(404, "Repository not found");
  uint64_t expect = size;
  fs::path target;
  uint64_t part = 0;
  if (seg.size() == 6) {
    if (seg[4] != "part") return fail(404, "Not found");
    auto part_n = ParseDecimal(seg[5]);
    if (!part_n) return fail(400, "bad part number");
    part = *part_n;
    uint64_t chunk = std::max<uint64_t>(1, impl.opt.multipart_chunk_size);
    uint64_t parts = (size + chunk - 1) / chunk;
    if (part < 1 || part > parts) return fail(400, "part number out of range");
    expect = std::min(chunk, size - (part - 1) * chunk);
    fs::path dir = impl.root / ".hubload-uploads" / (folder + "-" + oid);
    fs::create_directories(dir, ec);
    target = dir / ("part-" + std::to_string(part));
  }
  auto cl = hp->content_length();
  if (cl && *cl != expect)
    return fail(400, "Upload size mismatch: got Content-Length " + std::to_string(*cl) + ", expected " +
                         std::to_string(expect));
  // Unique per request: parallel parts of one object must never share a temp file.
  static std::atomic<uint64_t> upload_seq{0};
  fs::path tmp = repo_dir / "blobs" /
                 (".upload-" + oid.substr(0, 16) + "-" + std::to_string(::getpid()) + "-" +
                  std::to_string(upload_seq.fetch_add(1)));
  beast::error_code bec;
  if (beast::iequals(r.Header("expect"), "100-continue"))
    asio::write(sock, asio::buffer(std::string("HTTP/1.1 100 Continue\r\n\r\n")), bec);
  http::request_parser<http::file_body> fp{std::move(*hp)};
  fp.body_limit(expect);
  fp.get().body().open(tmp.c_str(), beast::file_mode::write, bec);
  if (bec) {
    Response e = ErrorResponse(500, "", "cannot open upload file: " + bec.message());
    e.close = true;
    return e;
  }
  http::read(sock, buf, fp, bec);
  fp.get().body().close();
  if (bec) {
    fs::remove(tmp, ec);
    Response e = ErrorResponse(bec == http::error::body_limit ? 413 : 400, "", "Upload failed: " + bec.message());
    e.close = true;
    return e;
  }
  uint64_t got = fs::file_size(tmp, ec);
  if (ec || got != expect) {
    fs::remove(tmp, ec);
    return ErrorResponse(400, "", "Upload size mismatch: got " + std::to_string(got) + " bytes, expected " +
                                      std::to_string(expect));
  }
  if (part) {
    std::string sha256;
    HashFile(tmp, &sha256, nullptr, nullptr);
    fs::rename(tmp, target, ec);
    if (ec) return ErrorResponse(500, "", "cannot store part");
    Response resp;
    resp.Set("ETag", Quote(sha256.substr(0, 32)));
    return resp;
  }
  std::string sha256;
  if (!HashFile(tmp, &sha256, nullptr, nullptr) || sha256 != oid) {
    fs::remove(tmp, ec);
    return ErrorResponse(400, "", "Uploaded content does not match its oid: sha256 is " + sha256 + ", expected " + oid);
  }
  Status st = InstallBlob(repo_dir, tmp, oid);
  if (!st.ok()) return StatusResponse(st);
  return JsonResponse(200, nlohmann::json::object());
}

}  // namespace hubload::server::internal
