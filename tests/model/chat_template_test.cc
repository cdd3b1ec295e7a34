#include <gtest/gtest.h>

#include "common/error.h"
#include "model/chat_template.h"

namespace tpnode::model {
namespace {

const std::vector<ChatMsg> kChat = {
    {"system", "Be brief."}, {"user", " Hi "}, {"assistant", "Hello!"}, {"user", "Why?"}};

// Abbreviated but characteristic tokenizer.chat_template texts of real models.
constexpr const char* kQwen2 =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' %}";
constexpr const char* kGemma =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\\n' + "
    "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}";
constexpr const char* kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set system_message = '<<SYS>>\\n' + "
    "messages[0]['content'] + '\\n<</SYS>>\\n\\n' %}{% endif %}{{ bos_token + '[INST] ' + "
    "content.strip() + ' [/INST]' }}";
constexpr const char* kMistralV7 = "{{ '[SYSTEM_PROMPT]' + m + '[/SYSTEM_PROMPT]' }}[INST]";

TEST(ChatTemplateTest, DetectsFamilies) {
  EXPECT_EQ(detectChatTemplate(kQwen2), ChatTemplate::kChatml);
  EXPECT_EQ(detectChatTemplate(kLlama3), ChatTemplate::kLlama3);
  EXPECT_EQ(detectChatTemplate(kGemma), ChatTemplate::kGemma);
  EXPECT_EQ(detectChatTemplate(kLlama2), ChatTemplate::kLlama2SysStrip);
  EXPECT_EQ(detectChatTemplate(kMistralV7), ChatTemplate::kMistralV7);
  EXPECT_EQ(detectChatTemplate("{{ '[INST] ' + m + ' [/INST]' }}"), ChatTemplate::kLlama2);
  EXPECT_EQ(detectChatTemplate("mistral-v3"), ChatTemplate::kMistralV3);
  EXPECT_EQ(chatTemplateName(ChatTemplate::kGemma), "gemma");
  EXPECT_EQ(detectChatTemplate("{{'<|' + m['role'] + '|>' + '\\n' + m['content'] + '<|end|>'}}"
                               "{{'<|assistant|>\\n'}}"),
            ChatTemplate::kPhi3);
  EXPECT_EQ(
      detectChatTemplate("{{'<｜User｜>' + c}}{{'<｜Assistant｜>' + c + '<｜end▁of▁sentence｜>'}}"),
      ChatTemplate::kDeepseek3);
}

TEST(ChatTemplateTest, RefusesUnknownTemplatesByName) {
  for (const std::string& text : {std::string(), std::string("{{ '<|user|>' + m + '<|end|>' }}")}) {
    try {
      detectChatTemplate(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      if (!text.empty()) {
        EXPECT_NE(std::string(e.what()).find("<|user|>"), std::string::npos);
      }
    }
  }
}

TEST(ChatTemplateTest, RendersChatml) {
  EXPECT_EQ(renderChat(ChatTemplate::kChatml, kChat, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n Hi <|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nWhy?<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, RendersLlama3) {
  EXPECT_EQ(renderChat(ChatTemplate::kLlama3, std::span(kChat).first(2), true),
            "<|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, RendersGemmaWithSystemInFirstUserTurn) {
  EXPECT_EQ(renderChat(ChatTemplate::kGemma, kChat, true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nWhy?<end_of_turn>\n<start_of_turn>model\n");
}

TEST(ChatTemplateTest, RendersLlama2AndMistral) {
  EXPECT_EQ(renderChat(ChatTemplate::kLlama2Sys, kChat, true),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi  [/INST]Hello!</s>[INST] Why? [/INST]");
  EXPECT_EQ(renderChat(ChatTemplate::kLlama2SysStrip, kChat, true),
            "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]Hello!</s>[INST] Why? [/INST]");
  EXPECT_EQ(renderChat(ChatTemplate::kMistralV1, kChat, true),
            " [INST] Be brief.\n\n Hi  [/INST] Hello!</s> [INST] Why? [/INST]");
  EXPECT_EQ(renderChat(ChatTemplate::kMistralV3Tekken, kChat, true),
            "[INST]Be brief.\n\n Hi [/INST]Hello!</s>[INST]Why?[/INST]");
  EXPECT_EQ(renderChat(ChatTemplate::kMistralV7, kChat, true),
            "[SYSTEM_PROMPT] Be brief.[/SYSTEM_PROMPT][INST]  Hi [/INST] Hello!</s>[INST] "
            "Why?[/INST]");
}

TEST(ChatTemplateTest, RendersPhi3AndDeepseek3) {
  EXPECT_EQ(renderChat(ChatTemplate::kPhi3, std::span(kChat).subspan(1, 2), true),
            "<|user|>\n Hi <|end|>\n<|assistant|>\nHello!<|end|>\n<|assistant|>\n");
  EXPECT_EQ(renderChat(ChatTemplate::kDeepseek3, kChat, true),
            "Be brief.\n\n<｜User｜> Hi <｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>Why?"
            "<｜Assistant｜>");
}

}  // namespace
}  // namespace tpnode::model
