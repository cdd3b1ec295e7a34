#include "node/api/api_server.h"

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ssl.hpp>

#include "common/check.h"
#include "common/error.h"
#include "common/log.h"
#include "node/api/http_session.h"
#include "node/api/http_types.h"
#include "node/api/server_context.h"

namespace tpnode::node::api {

namespace {

// An IP address as it is; a host name ("localhost") through the resolver: its first IPv4
// address, else its first address.
tcp::endpoint resolveListenAddress(net::io_context& io, const std::string& host, uint16_t port) {
  boost::system::error_code ec;
  auto address = net::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(address, port);
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--host {}: not an IP address and not a name this host resolves ({})", host,
         ec ? ec.message() : "no address");
  }
  for (const auto& r : results) {
    if (r.endpoint().address().is_v4()) return r.endpoint();
  }
  return results.begin()->endpoint();
}

}  // namespace

struct ApiServer::Impl {
  Impl(Engine& engine, ApiOptions options) : ctx(engine, std::move(options)) {}

  net::awaitable<void> acceptLoop();
  LogLimiter accept_log;
  void loadTls();
  // A connection over --max-connections with none idle to close: 503 (plain HTTP) and close.
  void refuse(tcp::socket& socket);
  void warnIfExposed() const;

  // Declared first: destroyed after the io_context (connection frames refer to them).
  ServerContext ctx;
  std::optional<net::ssl::context> tls;
  std::unique_ptr<net::io_context> io;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  uint16_t port = 0;
  bool started = false;
  std::chrono::steady_clock::time_point last_refusal_log{};  // accept loop only
  uint64_t refusals = 0, refusals_logged = 0;                // accept loop only
};

void ApiServer::Impl::refuse(tcp::socket& socket) {
  ctx.metrics.connectionRefused();
  ++refusals;
  boost::system::error_code ec;
  if (!tls) {
    static const std::string kAnswer = [] {
      const std::string body =
          R"({"error":{"message":"the server has too many open connections (--max-connections); )"
          R"(retry later","type":"service_unavailable","param":null,"code":"too_many_connections"}})";
      return "HTTP/1.1 503 Service Unavailable\r\nServer: tpnode\r\nContent-Type: "
             "application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body;
    }();
    socket.non_blocking(true, ec);
    if (!ec) socket.send(net::buffer(kAnswer), 0, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }
  socket.close(ec);
  // Once per interval, with counts (a flood must not flood the log).
  const auto now = std::chrono::steady_clock::now();
  if (now - last_refusal_log > std::chrono::seconds(10)) {
    const uint64_t refused = refusals;
    spdlog::warn(
        "[api] --max-connections {} reached with every connection busy: {} connection(s) "
        "refused with 503 since the last report ({} in all, {} idle ones closed to make room)",
        ctx.connections.max(), refused - refusals_logged, refused, ctx.connections.evicted());
    refusals_logged = refused;
    last_refusal_log = now;
  }
}

void ApiServer::Impl::warnIfExposed() const {
  const ApiOptions& o = ctx.options;
  if (!exposedWithoutKey(o)) return;
  spdlog::warn(
      "[api] listening on {} (not loopback) without an API key: anyone who can reach port {} can "
      "generate, read tensors and use the server's resources; give --api-key-file (docs/"
      "security.md)",
      o.host, port);
}

void ApiServer::Impl::loadTls() {
  const ApiOptions& o = ctx.options;
  if (o.tls_cert_file.empty() && o.tls_key_file.empty()) return;
  tls.emplace(net::ssl::context::tls_server);
  tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                   net::ssl::context::no_tlsv1_1 | net::ssl::context::single_dh_use);
  boost::system::error_code ec;
  tls->use_certificate_chain_file(o.tls_cert_file, ec);
  if (ec) {
    fail(ErrorCode::kInvalidArgument, "--api-tls-cert {}: {}", o.tls_cert_file, ec.message());
  }
  tls->use_private_key_file(o.tls_key_file, net::ssl::context::pem, ec);
  if (ec) fail(ErrorCode::kInvalidArgument, "--api-tls-key {}: {}", o.tls_key_file, ec.message());
}

net::awaitable<void> ApiServer::Impl::acceptLoop() {
  for (;;) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor->async_accept(
        net::make_strand(*io), net::redirect_error(net::use_awaitable, ec));
    if (ec == net::error::operation_aborted || !acceptor->is_open()) co_return;
    if (ec) {
      // Out of file descriptors and the like: wait a little instead of spinning.
      if (auto held = accept_log.pass()) {
        spdlog::warn("[api] accept failed: {}{}", ec.message(), heldBackNote(*held));
      }
      net::steady_timer pause(co_await net::this_coro::executor, std::chrono::milliseconds(100));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    bool retry = false;
    std::unique_ptr<ConnectionLimit::Slot> slot =
        ctx.connections.admit(socket.native_handle(), &retry);
    // Connections closed to make room are still closing: give them a moment (bounded).
    for (int i = 0; !slot && retry && i < 200; ++i) {
      net::steady_timer pause(co_await net::this_coro::executor, std::chrono::milliseconds(1));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      slot = ctx.connections.admit(socket.native_handle(), &retry);
    }
    if (!slot) {
      refuse(socket);
      continue;
    }
    auto executor = socket.get_executor();
    net::co_spawn(executor,
                  serveConnection(ctx, std::move(socket), std::move(slot), tls ? &*tls : nullptr),
                  net::detached);
  }
}

ApiServer::ApiServer(Engine& engine, ApiOptions options)
    : impl_(std::make_unique<Impl>(engine, std::move(options))) {}

ApiServer::~ApiServer() {
  stop();
}

void ApiServer::start() {
  Impl& m = *impl_;
  TP_CHECK(!m.started, "ApiServer::start called twice");
  const ApiOptions& o = m.ctx.options;
  m.loadTls();
  m.io = std::make_unique<net::io_context>(o.io_threads);
  boost::system::error_code ec;
  tcp::endpoint endpoint = resolveListenAddress(*m.io, o.host, o.port);
  m.acceptor.emplace(*m.io);
  m.acceptor->open(endpoint.protocol(), ec);
  if (!ec) m.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor->bind(endpoint, ec);
  if (!ec) m.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    fail(ErrorCode::kIo, "the API cannot listen on {}:{}: {} (is another server there? use --port)",
         o.host, o.port, ec.message());
  }
  m.port = m.acceptor->local_endpoint().port();
  net::co_spawn(*m.io, m.acceptLoop(), net::detached);
  for (int i = 0; i < std::max(1, o.io_threads); ++i) {
    m.threads.emplace_back([&io = *m.io] {
      for (;;) {
        try {
          io.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("[api] I/O thread caught: {}", e.what());
        }
      }
    });
  }
  m.started = true;
  m.warnIfExposed();
  spdlog::info("[api] listening on {}://{}:{} ({} I/O threads, at most {} connections{})",
               m.tls ? "https" : "http", o.host, m.port, std::max(1, o.io_threads),
               o.max_connections, o.api_keys.empty() ? ", no API key" : ", API keys");
}

void ApiServer::stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  m.started = false;
  for (uint64_t id : m.ctx.in_flight.all()) m.ctx.engine.cancel(id);
  m.io->stop();
  for (auto& t : m.threads) t.join();
  m.threads.clear();
  // Before the io_context goes: a store call in progress completes onto it.
  m.ctx.responses.stop();
  boost::system::error_code ec;
  m.acceptor->close(ec);
  // Destroys every connection coroutine; their Submissions detach their event queues.
  m.acceptor.reset();
  m.io.reset();
  spdlog::info("[api] stopped");
}

uint16_t ApiServer::port() const {
  return impl_->port;
}

}  // namespace tpnode::node::api
