// GET /v1/responses/{id}/input_items as OpenAI defines it: the input items a stored response was
// generated from, as a cursor-paginated list. Pure functions of their arguments.
//
// Items: the stored conversation before the response's own output (the earlier turns of a
// previous_response_id chain, then this request's input; instructions are not items), each
// {"id", "type": "message", "role", "status": "completed", "content": [part]} with an
// "input_text" part ({"type", "text"}) for user and system messages (a "developer" message is
// kept as "system") and an "output_text" part ({"type", "text", "annotations": []}) for the
// assistant's. Item ids are "msg_" + the response id's hex digits + "_" + the item's index
// (from 0, oldest first): stable for as long as the response is stored, and unique to it (an
// earlier turn listed under a later response has that response's id).
//
// List: {"object": "list", "data": [...], "first_id", "last_id" (null when data is empty),
// "has_more"}. Query: limit (1..100, default 20), order ("asc" oldest first, or "desc", the
// default), after (an item id of this list: the page starts after it in that order); include
// is accepted and adds nothing (no item has more to include). Anything else is ignored.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "node/api/response_store.h"

namespace tpnode::node::api {

struct InputItemsPage {
  int limit = 20;
  bool ascending = false;  // order=asc
  std::optional<std::string> after;
};

// The query of the request (what follows '?'); throws ApiError(400) naming a malformed limit,
// order or after.
InputItemsPage parseInputItemsPage(std::string_view query);

// The page of `stored`'s input items; throws ApiError(400, param "after") when `after` is not an
// item of this list.
nlohmann::json inputItemsList(const StoredResponse& stored, const InputItemsPage& page);

// The id of item `index` of the response `response_id` ("resp_<hex>").
std::string inputItemId(std::string_view response_id, size_t index);

}  // namespace tpnode::node::api
