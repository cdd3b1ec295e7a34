// Connection: what request handlers need from one HTTP connection (plain TCP or TLS), so that
// they are written once. Implemented in http_session.cc for both stream types.
//
// Contract
// - Everything runs on the connection's strand, from its one coroutine: no two writes overlap.
// - The write functions return false when the client is gone or the write timed out; the
//   connection is then closed by the caller.
// - watchReadable() arms a one-shot wait for the socket to become readable (the client closed
//   it, or sent more bytes) and calls events->notifyReadable() then; cancelWatch() disarms it
//   (only when no read or write is pending). peerState() looks without consuming anything.
#pragma once

#include <memory>
#include <string_view>

#include "node/api/generation_events.h"
#include "node/api/http_types.h"

namespace tpnode::node::api {

enum class PeerState { kOpen, kHasData, kClosed };

class Connection {
 public:
  virtual ~Connection() = default;

  virtual net::awaitable<bool> write(Response response) = 0;
  // Server-sent events: a chunked 200 header, chunks, then the last chunk.
  virtual net::awaitable<bool> writeStreamHeader(bool keep_alive) = 0;
  virtual net::awaitable<bool> writeChunk(std::string_view data) = 0;
  virtual net::awaitable<bool> writeLastChunk() = 0;

  virtual void watchReadable(std::shared_ptr<GenerationEvents> events) = 0;
  virtual void cancelWatch() = 0;
  virtual PeerState peerState() = 0;
};

}  // namespace tpnode::node::api
