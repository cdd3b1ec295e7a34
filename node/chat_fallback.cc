#include "node/chat_fallback.h"

#include <string_view>

#include "model/chat_template.h"

namespace tpnode::node {

std::string renderChatOrFallback(const LoadedModel& model,
                                 const std::vector<ChatMessage>& messages) {
  std::string_view text = model.chat_template;
  if (text.empty()) text = model.config.arch.rfind("gemma", 0) == 0 ? "gemma" : "chatml";
  model::ChatTemplate t = model::detectChatTemplate(text);
  std::vector<model::ChatMsg> msgs;
  for (const auto& m : messages) msgs.push_back({m.role, m.content});
  return model::renderChat(t, msgs, /*add_assistant=*/true);
}

}  // namespace tpnode::node
