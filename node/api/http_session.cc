#include "node/api/http_session.h"

#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>

#include <boost/beast/ssl.hpp>

#include "common/log.h"
#include "node/api/connection.h"
#include "node/api/router.h"

namespace tpnode::node::api {
namespace {

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

beast::tcp_stream& lowest(beast::tcp_stream& s) {
  return s;
}
beast::tcp_stream& lowest(TlsStream& s) {
  return s.next_layer();
}

template <class Stream>
class StreamConnection final : public Connection {
 public:
  StreamConnection(Stream& stream, const ApiOptions& options)
      : stream_(stream), options_(options) {}

  net::awaitable<bool> write(Response response) override {
    lowest(stream_).expires_after(millis(options_.write_timeout_s));
    beast::error_code ec;
    co_await http::async_write(stream_, response, net::redirect_error(net::use_awaitable, ec));
    co_return !ec;
  }

  net::awaitable<bool> writeStreamHeader(bool keep_alive) override {
    http::response<http::empty_body> head{http::status::ok, 11};
    head.set(http::field::server, "tpnode");
    head.set(http::field::content_type, "text/event-stream");
    head.set(http::field::cache_control, "no-cache");
    head.set("X-Accel-Buffering", "no");
    head.keep_alive(keep_alive);
    head.chunked(true);
    http::response_serializer<http::empty_body> sr{head};
    lowest(stream_).expires_after(millis(options_.write_timeout_s));
    beast::error_code ec;
    co_await http::async_write_header(stream_, sr, net::redirect_error(net::use_awaitable, ec));
    co_return !ec;
  }

  net::awaitable<bool> writeChunk(std::string_view data) override {
    if (data.empty()) co_return true;
    lowest(stream_).expires_after(millis(options_.write_timeout_s));
    beast::error_code ec;
    co_await net::async_write(stream_, http::make_chunk(net::buffer(data.data(), data.size())),
                              net::redirect_error(net::use_awaitable, ec));
    co_return !ec;
  }

  net::awaitable<bool> writeLastChunk() override {
    lowest(stream_).expires_after(millis(options_.write_timeout_s));
    beast::error_code ec;
    co_await net::async_write(stream_, http::make_chunk_last(),
                              net::redirect_error(net::use_awaitable, ec));
    co_return !ec;
  }

  void watchReadable(std::shared_ptr<GenerationEvents> events) override {
    lowest(stream_).socket().async_wait(tcp::socket::wait_read,
                                        [events = std::move(events)](beast::error_code ec) {
                                          if (ec != net::error::operation_aborted) {
                                            events->notifyReadable();
                                          }
                                        });
  }

  void cancelWatch() override {
    beast::error_code ec;
    lowest(stream_).socket().cancel(ec);
  }

  PeerState peerState() override {
    char byte = 0;
    ssize_t n = ::recv(lowest(stream_).socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return PeerState::kHasData;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      return PeerState::kOpen;
    }
    return PeerState::kClosed;
  }

 private:
  Stream& stream_;
  const ApiOptions& options_;
};

// Reads one request into `parser`. Returns the error (end_of_stream when the client closed
// cleanly between requests).
template <class Stream>
net::awaitable<beast::error_code> readRequest(Stream& stream, beast::flat_buffer& buffer,
                                              http::request_parser<http::string_body>& parser,
                                              const ApiOptions& options) {
  beast::error_code ec;
  lowest(stream).expires_after(millis(options.read_timeout_s));
  co_await http::async_read_header(stream, buffer, parser,
                                   net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return ec;
  const auto& head = parser.get();
  if (beast::iequals(head[http::field::expect], "100-continue")) {
    http::response<http::empty_body> cont{http::status::continue_, 11};
    co_await http::async_write(stream, cont, net::redirect_error(net::use_awaitable, ec));
    if (ec) co_return ec;
  }
  if (!parser.is_done()) {
    co_await http::async_read(stream, buffer, parser, net::redirect_error(net::use_awaitable, ec));
  }
  co_return ec;
}

// The 4xx answer for a request that could not be read, or none (just close) when the client
// went away or was too slow.
std::optional<ApiError> readFailure(const beast::error_code& ec) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::error::operation_aborted ||
      ec == http::error::partial_message || ec == net::ssl::error::stream_truncated) {
    return std::nullopt;
  }
  if (ec == http::error::body_limit) {
    return ApiError(413, "the request body is larger than the server accepts",
                    "invalid_request_error", "", "body_too_large");
  }
  if (ec == http::error::header_limit) {
    return ApiError(431, "the request headers are larger than the server accepts",
                    "invalid_request_error");
  }
  if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
    return ApiError(400, "malformed HTTP request: " + ec.message(), "invalid_request_error");
  }
  return std::nullopt;
}

template <class Stream>
net::awaitable<void> serveRequests(ServerContext& ctx, Stream& stream,
                                   ConnectionLimit::Slot& slot) {
  StreamConnection<Stream> conn(stream, ctx.options);
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(ctx.options.max_header_bytes));
    parser.body_limit(ctx.options.max_body_bytes);
    // Until a whole request has arrived the connection may be closed to make room under
    // --max-connections (idle keep-alive connections and slow senders go first, oldest first).
    slot.setIdle(true);
    beast::error_code ec = co_await readRequest(stream, buffer, parser, ctx.options);
    // A connection whose read failed stays idle: it is closing (at most an error answer is
    // left to send), so it never makes a new connection wait or get 503.
    if (ec) {
      if (auto failure = readFailure(ec)) {
        ctx.metrics.requestFinished("other", failure->status(), 0);
        co_await conn.write(errorResponse(*failure, false));
      }
      co_return;
    }
    slot.setIdle(false);
    Request request = parser.release();
    bool keep_open = co_await handleRequest(ctx, conn, request);
    if (!keep_open || !request.keep_alive()) co_return;
  }
}

net::awaitable<void> servePlain(ServerContext& ctx, tcp::socket socket,
                                std::unique_ptr<ConnectionLimit::Slot> slot_in) {
  beast::tcp_stream stream(std::move(socket));
  // Declared after the stream: released before the socket is closed.
  std::unique_ptr<ConnectionLimit::Slot> slot = std::move(slot_in);
  co_await serveRequests(ctx, stream, *slot);
  slot->setIdle(true);  // closing: may be closed at once to make room
  // Lingering close: stop sending, then drain what the client still sends (for a short while),
  // so that closing with unread bytes does not reset the connection before the client has
  // read our last answer (a 4xx sent before its whole request was read).
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  stream.expires_after(std::chrono::seconds(1));
  std::array<char, 4096> sink;
  for (size_t drained = 0; drained < (1u << 20);) {
    drained += co_await stream.async_read_some(net::buffer(sink),
                                               net::redirect_error(net::use_awaitable, ec));
    if (ec) break;
  }
}

net::awaitable<void> serveTls(ServerContext& ctx, tcp::socket socket,
                              std::unique_ptr<ConnectionLimit::Slot> slot_in,
                              net::ssl::context& tls) {
  TlsStream stream(std::move(socket), tls);
  // Declared after the stream: released before the socket is closed.
  std::unique_ptr<ConnectionLimit::Slot> slot = std::move(slot_in);
  beast::error_code ec;
  stream.next_layer().expires_after(millis(ctx.options.read_timeout_s));
  slot->setIdle(true);  // a connection that never finishes its handshake may be closed for room
  co_await stream.async_handshake(net::ssl::stream_base::server,
                                  net::redirect_error(net::use_awaitable, ec));
  slot->setIdle(false);
  if (ec) {
    spdlog::debug("[api] TLS handshake failed: {}", ec.message());
    co_return;
  }
  co_await serveRequests(ctx, stream, *slot);
  slot->setIdle(true);  // closing: may be closed at once to make room
  stream.next_layer().expires_after(std::chrono::seconds(2));
  co_await stream.async_shutdown(net::redirect_error(net::use_awaitable, ec));
}

}  // namespace

net::awaitable<void> serveConnection(ServerContext& ctx, tcp::socket socket,
                                     std::unique_ptr<ConnectionLimit::Slot> slot,
                                     net::ssl::context* tls) {
  ctx.metrics.connectionOpened();
  try {
    beast::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
    if (tls) {
      co_await serveTls(ctx, std::move(socket), std::move(slot), *tls);
    } else {
      co_await servePlain(ctx, std::move(socket), std::move(slot));
    }
  } catch (const std::exception& e) {
    spdlog::warn("[api] connection closed after an unexpected error: {}", e.what());
  }
  ctx.metrics.connectionClosed();
}

}  // namespace tpnode::node::api
