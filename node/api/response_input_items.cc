#include "node/api/response_input_items.h"

#include <charconv>

#include <fmt/format.h>

#include "node/api/api_error.h"
#include "node/api/tensor_handler.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;

constexpr int kMaxLimit = 100;
constexpr size_t kMaxAfterLength = 256;

json item(const std::string& id, const ChatMessage& m) {
  const bool output = m.role == "assistant";
  json part = {{"type", output ? "output_text" : "input_text"}, {"text", m.content}};
  if (output) part["annotations"] = json::array();
  return {{"id", id},
          {"type", "message"},
          {"role", m.role},
          {"status", "completed"},
          {"content", json::array({part})}};
}

}  // namespace

std::string inputItemId(std::string_view response_id, size_t index) {
  std::string_view hex = response_id.substr(0, 5) == "resp_" ? response_id.substr(5) : response_id;
  return fmt::format("msg_{}_{}", hex, index);
}

InputItemsPage parseInputItemsPage(std::string_view query) {
  InputItemsPage page;
  if (std::optional<std::string> v = queryValue(query, "limit")) {
    int n = 0;
    const char* end = v->data() + v->size();
    auto [ptr, ec] = std::from_chars(v->data(), end, n);
    if (ec != std::errc() || ptr != end || n < 1 || n > kMaxLimit) {
      badRequest("limit", fmt::format("limit must be an integer from 1 to {}, got {}", kMaxLimit,
                                      describeValue(json(*v))));
    }
    page.limit = n;
  }
  if (std::optional<std::string> v = queryValue(query, "order")) {
    if (*v != "asc" && *v != "desc") {
      badRequest("order",
                 fmt::format("order must be 'asc' or 'desc', got {}", describeValue(json(*v))));
    }
    page.ascending = *v == "asc";
  }
  if (std::optional<std::string> v = queryValue(query, "after")) {
    if (v->empty() || v->size() > kMaxAfterLength) {
      badRequest("after", "after must be the id of an item of this list");
    }
    page.after = std::move(*v);
  }
  return page;
}

json inputItemsList(const StoredResponse& stored, const InputItemsPage& page) {
  // The last message of the conversation is the response's own output.
  const size_t n = stored.conversation.empty() ? 0 : stored.conversation.size() - 1;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = page.ascending ? i : n - 1 - i;
  size_t begin = 0;
  if (page.after) {
    while (begin < n && inputItemId(stored.id, order[begin]) != *page.after) ++begin;
    if (begin == n) {
      badRequest("after", fmt::format("no input item of response {} has the id {}", stored.id,
                                      describeValue(json(*page.after))));
    }
    ++begin;
  }
  json data = json::array();
  size_t at = begin;
  for (; at < n && data.size() < static_cast<size_t>(page.limit); ++at) {
    data.push_back(item(inputItemId(stored.id, order[at]), stored.conversation[order[at]]));
  }
  json first = data.empty() ? json(nullptr) : data.front()["id"];
  json last = data.empty() ? json(nullptr) : data.back()["id"];
  return {{"object", "list"},
          {"data", std::move(data)},
          {"first_id", std::move(first)},
          {"last_id", std::move(last)},
          {"has_more", at < n}};
}

}  // namespace tpnode::node::api
