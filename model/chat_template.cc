#include "model/chat_template.h"

#include <array>
#include <utility>

#include "common/error.h"

namespace tpnode::model {
namespace {

constexpr std::array<std::pair<ChatTemplate, std::string_view>, 13> kNames = {{
    {ChatTemplate::kChatml, "chatml"},
    {ChatTemplate::kLlama3, "llama3"},
    {ChatTemplate::kGemma, "gemma"},
    {ChatTemplate::kLlama2, "llama2"},
    {ChatTemplate::kLlama2Sys, "llama2-sys"},
    {ChatTemplate::kLlama2SysBos, "llama2-sys-bos"},
    {ChatTemplate::kLlama2SysStrip, "llama2-sys-strip"},
    {ChatTemplate::kMistralV1, "mistral-v1"},
    {ChatTemplate::kMistralV3, "mistral-v3"},
    {ChatTemplate::kMistralV3Tekken, "mistral-v3-tekken"},
    {ChatTemplate::kMistralV7, "mistral-v7"},
    {ChatTemplate::kPhi3, "phi3"},
    {ChatTemplate::kDeepseek3, "deepseek3"},
}};

constexpr std::string_view kDsUser = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";  // <｜User｜>
constexpr std::string_view kDsAssistant =
    "<\xEF\xBD\x9C"
    "Assistant\xEF\xBD\x9C>";  // <｜Assistant｜>
constexpr std::string_view kDsEnd =
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";  // <｜end▁of▁sentence｜>

bool isSpace(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && isSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && isSpace(s.back())) s.remove_suffix(1);
  return s;
}

void renderLlama2(ChatTemplate t, std::span<const ChatMsg> messages, std::string& out) {
  const bool system_support = t != ChatTemplate::kLlama2;
  const bool bos_inside = t == ChatTemplate::kLlama2SysBos;
  const bool strip = t == ChatTemplate::kLlama2SysStrip;
  bool inside_turn = true;  // the first [INST] needs no BOS: the tokenizer adds it
  out += "[INST] ";
  for (const ChatMsg& m : messages) {
    const std::string_view content = strip ? trim(m.content) : m.content;
    if (!inside_turn) {
      inside_turn = true;
      out += bos_inside ? "<s>[INST] " : "[INST] ";
    }
    if (m.role == "system") {
      if (system_support) {
        out.append("<<SYS>>\n").append(content).append("\n<</SYS>>\n\n");
      } else {
        out.append(content).append("\n");
      }
    } else if (m.role == "user") {
      out.append(content).append(" [/INST]");
    } else {
      out.append(content).append("</s>");
      inside_turn = false;
    }
  }
}

void renderMistral(ChatTemplate t, std::span<const ChatMsg> messages, std::string& out) {
  const std::string_view lead = t == ChatTemplate::kMistralV1 ? " " : "";
  const std::string_view trail = t == ChatTemplate::kMistralV3Tekken ? "" : " ";
  const bool trim_assistant = t == ChatTemplate::kMistralV3;
  bool inside_turn = false;
  for (const ChatMsg& m : messages) {
    if (!inside_turn) {
      out.append(lead).append("[INST]").append(trail);
      inside_turn = true;
    }
    if (m.role == "system") {
      out.append(m.content).append("\n\n");
    } else if (m.role == "user") {
      out.append(m.content).append(lead).append("[/INST]");
    } else {
      out.append(trail).append(trim_assistant ? trim(m.content) : m.content).append("</s>");
      inside_turn = false;
    }
  }
}

void renderGemma(std::span<const ChatMsg> messages, bool add_assistant, std::string& out) {
  std::string_view system;  // Gemma has no system turn: it goes into the next user turn
  for (const ChatMsg& m : messages) {
    if (m.role == "system") {
      system = trim(m.content);
      continue;
    }
    const std::string_view role = m.role == "assistant" ? "model" : m.role;
    out.append("<start_of_turn>").append(role).append("\n");
    if (!system.empty() && role != "model") {
      out.append(system).append("\n\n");
      system = {};
    }
    out.append(trim(m.content)).append("<end_of_turn>\n");
  }
  if (add_assistant) out += "<start_of_turn>model\n";
}

}  // namespace

std::string_view chatTemplateName(ChatTemplate t) {
  for (const auto& [tmpl, name] : kNames) {
    if (tmpl == t) return name;
  }
  return "?";
}

ChatTemplate detectChatTemplate(std::string_view text) {
  for (const auto& [tmpl, name] : kNames) {
    if (text == name) return tmpl;
  }
  const auto has = [&](std::string_view needle) { return text.find(needle) != text.npos; };
  if (has("<|im_start|>") && !has("<|im_sep|>")) return ChatTemplate::kChatml;
  if (text.starts_with("mistral") || has("[INST]")) {
    if (has("[SYSTEM_PROMPT]")) return ChatTemplate::kMistralV7;
    if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
      if (has(" [INST]")) return ChatTemplate::kMistralV1;
      if (has("\"[INST]\"")) return ChatTemplate::kMistralV3Tekken;
      return ChatTemplate::kMistralV3;
    }
    if (has("content.strip()")) return ChatTemplate::kLlama2SysStrip;
    if (has("bos_token + '[INST]")) return ChatTemplate::kLlama2SysBos;
    if (has("<<SYS>>")) return ChatTemplate::kLlama2Sys;
    return ChatTemplate::kLlama2;
  }
  if (has("<|assistant|>") && has("<|end|>")) return ChatTemplate::kPhi3;
  if (has("<start_of_turn>")) return ChatTemplate::kGemma;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatTemplate::kLlama3;
  if (has(kDsAssistant) && has(kDsUser) && has(kDsEnd)) return ChatTemplate::kDeepseek3;
  if (text.empty()) {
    fail(ErrorCode::kUnsupported, "the model has no chat template (tokenizer.chat_template)");
  }
  std::string head(text.substr(0, 80));
  for (char& c : head) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  fail(ErrorCode::kUnsupported,
       "chat template not supported (known: chatml, llama3, gemma, llama2, mistral, phi3, "
       "deepseek3): '{}{}'",
       head, text.size() > 80 ? "..." : "");
}

std::string renderChat(ChatTemplate t, std::span<const ChatMsg> messages, bool add_assistant) {
  std::string out;
  switch (t) {
    case ChatTemplate::kChatml:
      for (const ChatMsg& m : messages) {
        out.append("<|im_start|>").append(m.role).append("\n").append(m.content);
        out.append("<|im_end|>\n");
      }
      if (add_assistant) out += "<|im_start|>assistant\n";
      break;
    case ChatTemplate::kLlama3:
      for (const ChatMsg& m : messages) {
        out.append("<|start_header_id|>").append(m.role).append("<|end_header_id|>\n\n");
        out.append(trim(m.content)).append("<|eot_id|>");
      }
      if (add_assistant) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplate::kGemma:
      renderGemma(messages, add_assistant, out);
      break;
    case ChatTemplate::kLlama2:
    case ChatTemplate::kLlama2Sys:
    case ChatTemplate::kLlama2SysBos:
    case ChatTemplate::kLlama2SysStrip:
      renderLlama2(t, messages, out);
      break;
    case ChatTemplate::kMistralV1:
    case ChatTemplate::kMistralV3:
    case ChatTemplate::kMistralV3Tekken:
      renderMistral(t, messages, out);
      break;
    case ChatTemplate::kPhi3:
      for (const ChatMsg& m : messages) {
        out.append("<|").append(m.role).append("|>\n").append(m.content).append("<|end|>\n");
      }
      if (add_assistant) out += "<|assistant|>\n";
      break;
    case ChatTemplate::kDeepseek3:
      for (const ChatMsg& m : messages) {
        if (m.role == "system") {
          out.append(m.content).append("\n\n");
        } else if (m.role == "user") {
          out.append(kDsUser).append(m.content);
        } else if (m.role == "assistant") {
          out.append(kDsAssistant).append(m.content).append(kDsEnd);
        }
      }
      if (add_assistant) out.append(kDsAssistant);
      break;
    case ChatTemplate::kMistralV7:
      for (const ChatMsg& m : messages) {
        if (m.role == "system") {
          out.append("[SYSTEM_PROMPT] ").append(m.content).append("[/SYSTEM_PROMPT]");
        } else if (m.role == "user") {
          out.append("[INST] ").append(m.content).append("[/INST]");
        } else {
          out.append(" ").append(m.content).append("</s>");
        }
      }
      break;
  }
  return out;
}

}  // namespace tpnode::model
