// The routes llama.cpp's server offers next to the OpenAI ones, with its JSON shapes:
//
//   POST /tokenize    {"content": str, "add_special": bool = false, "with_pieces": bool = false}
//                     -> {"tokens": [id, ...]} or, with_pieces, {"tokens": [{"id", "piece"}]}
//                     (a piece that is not valid UTF-8 is an array of its byte values)
//   POST /detokenize  {"tokens": [id, ...]} -> {"content": str}
//   GET  /props       {"default_generation_settings": {"n_ctx", "params": {...}},
//                      "total_slots", "model_alias", "model_path", "chat_template",
//                      "modalities": {"vision": false}, "build_info"}
//
// Contract: pure functions of the request and the engine (tokenization never enters the step
// loop); they throw ApiError (400 naming the field) for a bad body.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "node/api/api_options.h"
#include "node/engine.h"

namespace tpnode::node::api {

nlohmann::json tokenizeAnswer(const Engine& engine, const std::string& body);
nlohmann::json detokenizeAnswer(const Engine& engine, const std::string& body);
nlohmann::json propsAnswer(const Engine& engine, const RequestDefaults& defaults);

}  // namespace tpnode::node::api
