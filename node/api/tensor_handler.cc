#include "node/api/tensor_handler.h"

// GCC 12 reports -Wmismatched-new-delete inside Asio's awaitable frame allocator when a
// coroutine frame grows past an inlining threshold: a false positive (the frame is allocated
// and freed by the same awaitable_frame_base operators).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

#include <mutex>
#include <optional>

#include "model/npy.h"
#include "model/tensor_read.h"
#include "model/tensor_type.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

constexpr std::string_view kPrefix = "/v1/tensors/";

json listingJson(const TensorListing& t) {
  return {{"name", t.name},     {"type", t.type},         {"ne", t.ne},
          {"shape", t.shape},   {"sharding", t.sharding}, {"numpy_axis", t.numpy_axis},
          {"pieces", t.pieces}, {"ranks", t.ranks},       {"bytes", t.bytes}};
}

// Hands the engine's one TensorReadResult to the waiting coroutine (the shape of
// GenerationEvents for a single value). done() may run on any thread; wait()/take() run on
// the strand; detach() (strand) makes a late done() harmless after the connection is gone.
class ReadWaiter : public std::enable_shared_from_this<ReadWaiter> {
 public:
  explicit ReadWaiter(net::any_io_executor strand) : strand_(std::move(strand)) {}

  void done(TensorReadResult result) {
    std::lock_guard lock(mu_);
    if (!strand_) return;
    result_ = std::move(result);
    net::post(*strand_, [self = shared_from_this()] {
      if (self->waiting_) self->waiting_->cancel();
    });
  }

  net::awaitable<TensorReadResult> wait(net::steady_timer& timer) {
    for (;;) {
      {
        std::lock_guard lock(mu_);
        if (result_) co_return std::move(*result_);
      }
      waiting_ = &timer;  // no yield since the check: a wake-up cancels this wait
      timer.expires_at(net::steady_timer::time_point::max());
      boost::system::error_code ec;
      co_await timer.async_wait(net::redirect_error(net::use_awaitable, ec));
      waiting_ = nullptr;
    }
  }

  void detach() {
    std::lock_guard lock(mu_);
    strand_.reset();
    waiting_ = nullptr;
  }

 private:
  std::mutex mu_;
  std::optional<TensorReadResult> result_;      // guarded by mu_
  std::optional<net::any_io_executor> strand_;  // guarded by mu_
  net::steady_timer* waiting_ = nullptr;        // strand only
};

struct Detach {
  std::shared_ptr<ReadWaiter> waiter;
  ~Detach() { waiter->detach(); }
};

Response tensorBody(const TensorReadResult& r, bool npy, bool keep_alive) {
  const TensorListing& t = r.info;
  std::string body;
  if (npy) {
    const model::TensorType type = t.type_id;
    uint64_t cols = t.ne.empty() ? 1 : t.ne[0], rows = 1;
    for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
    std::vector<float> f = model::dequantizeTensor(type, r.raw.data(), rows, cols);
    body = model::npyBytes(f.data(), t.shape);
  } else {
    body.assign(reinterpret_cast<const char*>(r.raw.data()), r.raw.size());
  }
  Response res = makeResponse(200, "application/octet-stream", std::move(body), keep_alive);
  std::string shape, ne;
  for (uint64_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
  for (uint64_t d : t.ne) ne += (ne.empty() ? "" : ",") + std::to_string(d);
  res.set("X-Tensor-Name", t.name);
  res.set("X-Tensor-Type", npy ? "F32" : t.type);
  res.set("X-Tensor-Source-Type", t.type);
  res.set("X-Tensor-Shape", shape);
  res.set("X-Tensor-Ne", ne);
  res.set("X-Tensor-Sharding", t.sharding);
  return res;
}

}  // namespace

std::optional<std::string> percentDecode(std::string_view in, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return std::nullopt;
      int hi = hex(in[i + 1]), lo = hex(in[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      c = ' ';
    }
    if (c == '\0') return std::nullopt;
    out += c;
  }
  return out;
}

std::optional<std::string> queryValue(std::string_view query, std::string_view key) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) != key) continue;
    std::string_view raw = eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    std::optional<std::string> v = percentDecode(raw, /*plus_is_space=*/true);
    if (!v) badRequest(std::string(key), fmt::format("'{}' is not a valid URL-encoded value", key));
    return v;
  }
  return std::nullopt;
}

net::awaitable<GenerationResult> handleTensors(ServerContext& ctx, Connection& conn,
                                               const Request& request, std::string_view path,
                                               std::string_view query) {
  const bool keep_alive = request.keep_alive();
  std::vector<TensorListing> all;
  try {
    all = ctx.engine.listTensors();
  } catch (const Error& e) {
    throw fromEngineError(e);
  }
  if (path.size() <= kPrefix.size()) {  // the listing
    json data = json::array();
    for (const TensorListing& t : all) data.push_back(listingJson(t));
    json body = {{"object", "list"}, {"n_layer", ctx.engine.layerCount()}, {"data", data}};
    co_return GenerationResult{co_await conn.write(jsonResponse(200, body, keep_alive)), 200};
  }
  std::optional<std::string> name = percentDecode(path.substr(kPrefix.size()));
  if (!name || name->size() > 256) {
    throw ApiError(400, "the tensor name in the path is not a valid URL-encoded name",
                   "invalid_request_error", "name");
  }
  std::string format = queryValue(query, "format").value_or("npy");
  if (format != "npy" && format != "raw") {
    badRequest("format", fmt::format("'format' must be npy or raw, got '{}'", format));
  }
  bool known = false;
  for (const TensorListing& t : all) known |= t.name == *name;
  if (!known) {
    throw ApiError(
        404, fmt::format("the model has no tensor named '{}'; GET /v1/tensors lists them", *name),
        "not_found_error", "name");
  }
  if (!ctx.engine.ready()) {
    throw ApiError(503, "the cluster is not ready: " + ctx.engine.notReadyReason(),
                   "service_unavailable", "", "not_ready");
  }
  auto waiter = std::make_shared<ReadWaiter>(co_await net::this_coro::executor);
  Detach detach{waiter};
  try {
    ctx.engine.readTensor(*name, [waiter](TensorReadResult r) { waiter->done(std::move(r)); });
  } catch (const Error& e) {
    throw fromEngineError(e);
  }
  net::steady_timer timer(co_await net::this_coro::executor);
  TensorReadResult result = co_await waiter->wait(timer);
  if (!result.ok) {
    throw fromEngineError(Error(static_cast<ErrorCode>(result.error_code), result.error));
  }
  co_return GenerationResult{co_await conn.write(tensorBody(result, format == "npy", keep_alive)),
                             200};
}

}  // namespace tpnode::node::api
