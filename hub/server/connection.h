// Beast I/O of one connection (connection.cc) and the streaming LFS PUT
// (upload_put.cc). Only listener.cc, connection.cc and upload_put.cc include
// Asio/Beast.
#pragma once

#include <utility>  // before Asio (std::exchange with GCC 12 / C++20)

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <memory>

#include "hub/server/impl.h"

namespace hubload::server::internal {

using tcp = boost::asio::ip::tcp;
using HeaderParser = boost::beast::http::request_parser<boost::beast::http::empty_body>;

/// Serves requests on `sock` until the client closes, an answer closes the
/// connection, or the server stops. Never throws.
void ServeConnection(Server::Impl& impl, tcp::socket& sock, bool cdn);

/// PUT /_lfs/<folder>/<oid>/<size>[/part/<n>]?exp&sig: streams the body to a
/// file in the repo's blobs/ (verified against oid/size) or to a part file.
Response HandleUploadPut(Server::Impl& impl, tcp::socket& sock, boost::beast::flat_buffer& buf,
                         std::unique_ptr<HeaderParser>& hp, Request& r);

}  // namespace hubload::server::internal
