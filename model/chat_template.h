// Chat templates: render a conversation into the prompt text a model was trained on, for the
// common template families, detected from the GGUF's tokenizer.chat_template text the way
// llama.cpp's llm_chat_detect_template does (c392e50) and rendered as its
// llm_chat_apply_template does. No Jinja is interpreted.
//
// Contract
// - Pure functions, thread-safe.
// - The rendered text contains special-token texts ("<|im_start|>"): tokenize it with
//   parse_special = true. BOS is not part of the text; the tokenizer adds it (add_special).
// - A template that is not recognised is Error(kUnsupported) naming its start; so is an
//   empty one (the model has no chat template).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tpnode::model {

enum class ChatTemplate {
  kChatml,           // <|im_start|>role\n...<|im_end|>\n (Qwen, many others)
  kLlama3,           // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  kGemma,            // <start_of_turn>user\n...<end_of_turn>\n, "assistant" -> "model"
  kLlama2,           // [INST] ... [/INST] without system support
  kLlama2Sys,        // with <<SYS>>
  kLlama2SysBos,     // with <s> inside the history
  kLlama2SysStrip,   // with stripped contents
  kMistralV1,        // " [INST] ... [/INST]"
  kMistralV3,        // "[INST] ... [/INST]", assistant trimmed
  kMistralV3Tekken,  // "[INST]...[/INST]"
  kMistralV7,        // [SYSTEM_PROMPT] ... [/SYSTEM_PROMPT][INST] ... [/INST]
  kPhi3,             // <|role|>\n...<|end|>\n
  kDeepseek3,  // <｜User｜>...<｜Assistant｜>...<｜end▁of▁sentence｜> (V3, R1 distills)
};

struct ChatMsg {
  std::string_view role;  // "system", "user", "assistant" (others are passed through)
  std::string_view content;
};

// Recognises a tokenizer.chat_template text, or a name: chatml, llama3, gemma, llama2,
// llama2-sys, llama2-sys-bos, llama2-sys-strip, mistral-v1, mistral-v3, mistral-v3-tekken,
// mistral-v7, phi3, deepseek3. Throws Error(kUnsupported) naming the template. (llama.cpp
// falls back to chatml for a model without a template; callers may pass "chatml" for that.)
ChatTemplate detectChatTemplate(std::string_view template_text);

std::string_view chatTemplateName(ChatTemplate t);

// Renders the messages; add_assistant appends the header that starts the assistant's turn
// (where the template has one).
std::string renderChat(ChatTemplate t, std::span<const ChatMsg> messages, bool add_assistant);

}  // namespace tpnode::model
