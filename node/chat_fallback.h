// Chat rendering on node 0: the model's own template (tokenizer.chat_template), or, for a file
// without one, its architecture's format (gemma) or else chatml, as llama.cpp's server falls
// back to.
//
// Contract: a pure function over the immutable LoadedModel; any thread (the API's).
#pragma once

#include <string>
#include <vector>

#include "node/engine.h"
#include "node/loaded_model.h"

namespace tpnode::node {

std::string renderChatOrFallback(const LoadedModel& model,
                                 const std::vector<ChatMessage>& messages);

}  // namespace tpnode::node
