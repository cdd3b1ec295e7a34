// ApiServer: the OpenAI-compatible HTTP API of node 0 (docs/api.md).
//
// Contract
// - Owns its io_context, a fixed pool of ApiOptions::io_threads I/O threads, the listening
//   socket and every connection; each connection runs as one coroutine on its own strand.
// - Talks to the model only through Engine (node/engine.h), which must outlive the server.
//   Engine callbacks only queue events and post to the connection's strand (never block).
// - start() binds and returns (throws Error(kIo) naming host:port when it cannot bind, or
//   Error(kInvalidArgument) for an unreadable TLS certificate or key); stop() cancels every
//   in-flight engine request, closes every connection and joins the threads (idempotent; the
//   destructor calls it). start/stop/port are called from one owner thread.
#pragma once

#include <cstdint>
#include <memory>

#include "node/api/api_options.h"
#include "node/engine.h"

namespace tpnode::node::api {

class ApiServer {
 public:
  ApiServer(Engine& engine, ApiOptions options);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  void start();
  void stop();
  // The bound port (the ephemeral one when ApiOptions::port is 0); valid after start().
  uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpnode::node::api
