#include "node/api/openai_request.h"

#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "node/api/api_error.h"
#include "node/api/openai_response.h"
#include "tests/node/api/deep_json.h"
#include "tests/node/api/fake_engine.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;
using testing::everyFieldTemplate;
using testing::nested;
using testing::withValue;

// Expects parsing `body` to fail with `status`, naming `param`.
void expectRefused(Endpoint ep, const json& body, const std::string& param, int status = 400) {
  try {
    parseOpenAiRequest(ep, body.dump());
    ADD_FAILURE() << "accepted: " << body.dump();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), status) << body.dump();
    EXPECT_EQ(e.body()["error"]["param"], param) << e.what();
    EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
  }
}

TEST(OpenAiRequestTest, ParsesEveryCompletionsField) {
  auto r =
      parseOpenAiRequest(Endpoint::kCompletions, json{{"model", "m"},
                                                      {"prompt", "hi"},
                                                      {"max_tokens", 7},
                                                      {"temperature", 0.5},
                                                      {"top_p", 0.9},
                                                      {"top_k", 40},
                                                      {"min_p", 0.05},
                                                      {"seed", 7},
                                                      {"stop", {"a", "b"}},
                                                      {"n", 1},
                                                      {"stream", true},
                                                      {"stream_options", {{"include_usage", true}}},
                                                      {"logprobs", 3},
                                                      {"presence_penalty", 0.5},
                                                      {"frequency_penalty", -0.5},
                                                      {"repeat_penalty", 1.1},
                                                      {"unknown_field", {1, 2}}}
                                                     .dump());
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_DOUBLE_EQ(r.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(r.sampling.top_p, 0.9);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_DOUBLE_EQ(r.sampling.min_p, 0.05);
  EXPECT_EQ(r.sampling.seed, 7u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_DOUBLE_EQ(r.sampling.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(r.sampling.frequency_penalty, -0.5);
  EXPECT_DOUBLE_EQ(r.sampling.repeat_penalty, 1.1);
}

TEST(OpenAiRequestTest, ParsesChatMessagesAndContentParts) {
  auto r = parseOpenAiRequest(
      Endpoint::kChat,
      json{{"messages",
            {{{"role", "system"}, {"content", "be brief"}},
             {{"role", "user"},
              {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
             {{"role", "assistant"}, {"content", nullptr}}}},
           {"max_completion_tokens", 9},
           {"logprobs", true},
           {"top_logprobs", 2}}
          .dump());
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 2);
}

TEST(OpenAiRequestTest, RefusesBadFieldsNamingThem) {
  const Endpoint c = Endpoint::kCompletions, ch = Endpoint::kChat;
  expectRefused(c, json::object(), "prompt");
  expectRefused(c, {{"prompt", 5}}, "prompt");
  expectRefused(c, {{"prompt", {"a", "b"}}}, "prompt");
  expectRefused(c, {{"prompt", json::array()}}, "prompt");
  expectRefused(c, {{"prompt", {1, -2}}}, "prompt");
  expectRefused(c, {{"prompt", "x"}, {"temperature", "hot"}}, "temperature");
  expectRefused(c, {{"prompt", "x"}, {"temperature", 3}}, "temperature");
  expectRefused(c, {{"prompt", "x"}, {"top_p", 1.5}}, "top_p");
  expectRefused(c, {{"prompt", "x"}, {"top_k", 1.5}}, "top_k");
  expectRefused(c, {{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens");
  expectRefused(c, {{"prompt", "x"}, {"max_tokens", "10"}}, "max_tokens");
  expectRefused(c, {{"prompt", "x"}, {"n", 2}}, "n");
  expectRefused(c, {{"prompt", "x"}, {"stream", "yes"}}, "stream");
  expectRefused(c, {{"prompt", "x"}, {"stop", 5}}, "stop");
  expectRefused(c, {{"prompt", "x"}, {"stop", {"a", 1}}}, "stop");
  expectRefused(c, {{"prompt", "x"}, {"seed", "s"}}, "seed");
  expectRefused(c, {{"prompt", "x"}, {"logprobs", 21}}, "logprobs");
  expectRefused(c, {{"prompt", "x"}, {"echo", true}}, "echo");
  expectRefused(c, {{"prompt", "x"}, {"model", 3}}, "model");
  expectRefused(c, {{"prompt", "x"}, {"stream_options", true}}, "stream_options");
  expectRefused(ch, json::object(), "messages");
  expectRefused(ch, {{"messages", json::array()}}, "messages");
  expectRefused(ch, {{"messages", {"hi"}}}, "messages[0]");
  expectRefused(ch, {{"messages", {{{"content", "hi"}}}}}, "messages[0].role");
  expectRefused(ch, {{"messages", {{{"role", "user"}, {"content", 5}}}}}, "messages[0].content");
  expectRefused(ch, {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"logprobs", 3}},
                "logprobs");
  expectRefused(ch, {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"top_logprobs", 2}},
                "top_logprobs");
  expectRefused(ch, {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", {1}}},
                "tools");
}

TEST(OpenAiRequestTest, RefusesBodiesThatAreNotJsonObjects) {
  for (const char* body : {"", "{", "[1,2]", "\"text\"", "{\"prompt\": \"\xFF\"}"}) {
    try {
      parseOpenAiRequest(Endpoint::kCompletions, body);
      ADD_FAILURE() << "accepted " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
    }
  }
}

TEST(OpenAiRequestTest, TapsAreParsedAndCheckedNamingTheField) {
  const Endpoint c = Endpoint::kCompletions;
  OpenAiRequest r = parseOpenAiRequest(
      c,
      json{{"prompt", "x"}, {"taps", {{{"layer", 1}, {"point", "mlp_out"}}, {{"point", "logits"}}}}}
          .dump());
  ASSERT_EQ(r.taps.size(), 2u);
  EXPECT_EQ(r.taps[0].layer, 1);
  EXPECT_EQ(r.taps[0].point, model::TapPoint::kMlpOut);
  EXPECT_EQ(r.taps[1].point, model::TapPoint::kLogits);
  expectRefused(c, {{"prompt", "x"}, {"taps", 3}}, "taps");
  expectRefused(c, {{"prompt", "x"}, {"taps", {7}}}, "taps[0]");
  expectRefused(c, {{"prompt", "x"}, {"taps", {{{"layer", 0}, {"point", "qkv"}}}}},
                "taps[0].point");
  expectRefused(c, {{"prompt", "x"}, {"taps", {{{"point", "residual"}}}}}, "taps[0].layer");
  expectRefused(c, {{"prompt", "x"}, {"taps", {{{"layer", -1}, {"point", "residual"}}}}},
                "taps[0].layer");
  expectRefused(c, {{"prompt", "x"}, {"taps", {{{"layer", "0"}, {"point", "residual"}}}}},
                "taps[0].layer");
  expectRefused(c, {{"prompt", "x"}, {"stream", true}, {"taps", {{{"point", "logits"}}}}}, "taps");
  json many = json::array();
  for (int i = 0; i < 65; ++i) many.push_back({{"layer", 0}, {"point", "residual"}});
  expectRefused(c, {{"prompt", "x"}, {"taps", many}}, "taps");
  // The layer is checked against the model when the request is prepared.
  testing::FakeEngine engine({"fake", 32, {}});
  ModelInfo info = engine.modelInfo();
  info.n_layer = 2;
  info.n_embd = 8;
  auto prepared = [&](const json& taps) {
    return prepareGeneration(
        parseOpenAiRequest(c, json{{"prompt", "Hello"}, {"taps", taps}}.dump()), engine, info);
  };
  EXPECT_EQ(prepared({{{"layer", 1}, {"point", "residual"}}}).taps.size(), 1u);
  try {
    prepared({{{"layer", 2}, {"point", "residual"}}});
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.body()["error"]["param"], "taps[0].layer");
  }
}

TEST(OpenAiRequestTest, TapsAreAnsweredAsJsonNumbersOrBase64F32) {
  TapResult t;
  t.spec = {3, model::TapPoint::kResidual};
  t.rows = 2;
  t.cols = 3;
  t.data = {1.5f, -2.25f, 3.0e-7f, 0.1f, 1e30f, -0.0f};
  json j = tapsJson({t});
  EXPECT_EQ(j[0]["layer"], 3);
  EXPECT_EQ(j[0]["point"], "residual");
  EXPECT_EQ(j[0]["shape"], json({2, 3}));
  // Parsed back, every float is bit-identical (printed to round-trip).
  json back = json::parse(j.dump());
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      float v = back[0]["data"][r][c].get<float>();
      EXPECT_EQ(std::memcmp(&v, &t.data[static_cast<size_t>(r * 3 + c)], 4), 0) << r << c;
    }
  }
  t.spec = {-1, model::TapPoint::kLogits};
  json b = tapsJson({t}, /*base64=*/true);
  EXPECT_TRUE(b[0]["layer"].is_null());
  EXPECT_EQ(b[0]["encoding"], "base64");
  EXPECT_EQ(b[0]["dtype"], "<f4");
  const std::string text = b[0]["data"];
  std::vector<unsigned char> raw(text.size());
  int n = EVP_DecodeBlock(raw.data(), reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  ASSERT_GE(n, 24);  // padding decodes to extra zero bytes
  EXPECT_EQ(std::memcmp(raw.data(), t.data.data(), 24), 0);
  OpenAiRequest r = parseOpenAiRequest(
      Endpoint::kCompletions,
      json{{"prompt", "x"}, {"taps", {{{"point", "logits"}}}}, {"tap_encoding", "base64"}}.dump());
  EXPECT_TRUE(r.taps_base64);
  expectRefused(Endpoint::kCompletions, {{"prompt", "x"}, {"tap_encoding", "npy"}}, "tap_encoding");
}

TEST(OpenAiRequestTest, PrepareChecksModelContextAndVocabulary) {
  testing::FakeEngine engine({"fake", 32, {}});
  ModelInfo info = engine.modelInfo();
  auto prepare = [&](const json& body) {
    return prepareGeneration(parseOpenAiRequest(Endpoint::kCompletions, body.dump()), engine, info);
  };
  GenerationRequest g = prepare({{"prompt", "Hello"}, {"model", "fake"}});
  EXPECT_EQ(g.prompt_ids, engine.tokenize("Hello", true));
  EXPECT_EQ(g.max_tokens, 16);
  try {
    prepare({{"prompt", "Hello"}, {"model", "other"}});
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 404);
    EXPECT_EQ(e.body()["error"]["code"], "model_not_found");
  }
  for (const json& body :
       {json{{"prompt", std::string(40, 'x')}}, json{{"prompt", "Hello"}, {"max_tokens", 31}}}) {
    try {
      prepare(body);
      ADD_FAILURE() << body.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.body()["error"]["code"], "context_length_exceeded");
    }
  }
  try {
    prepare({{"prompt", {1, 600}}});
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("600"), std::string::npos);
  }
  // Chat defaults to 1024 tokens, cut to the room the context has left (less, here).
  auto chat = prepareGeneration(
      parseOpenAiRequest(Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}]})"),
      engine, info);
  EXPECT_EQ(chat.max_tokens, 32 - static_cast<int>(chat.prompt_ids.size()));
}

TEST(OpenAiRequestTest, DeepJsonOnEveryFieldIsRefusedWithoutRecursion) {
  // ~200 KB nested 100,000 levels deep: once crashed the API (a recursive dump of the value).
  for (bool objects : {false, true}) {
    const std::string deep = nested(100'000, objects);
    for (const auto& [ep, body] : everyFieldTemplate()) {
      try {
        parseOpenAiRequest(ep, withValue(body, deep));
        ADD_FAILURE() << "accepted: " << body;
      } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        EXPECT_EQ(e.body()["error"]["code"], "json_too_deep") << body << ": " << e.what();
      }
    }
  }
}

TEST(OpenAiRequestTest, ErrorsShowScalarsOrATypeNameNeverAContainer) {
  // Just under the depth limit: parsed, and every error is short and echoes no container.
  for (bool objects : {false, true}) {
    const std::string value = nested(kMaxJsonDepth - 6, objects);
    for (const auto& [ep, body] : everyFieldTemplate()) {
      try {
        parseOpenAiRequest(ep, withValue(body, value));
      } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        const std::string message = e.what();
        EXPECT_LT(message.size(), 400u) << body << ": " << message;
        EXPECT_EQ(message.find("[["), std::string::npos) << body << ": " << message;
        EXPECT_EQ(message.find("{\"a\""), std::string::npos) << body << ": " << message;
      }
    }
  }
  try {
    parseOpenAiRequest(Endpoint::kCompletions, R"({"prompt": "hi", "temperature": [1, 2, 3]})");
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("an array of 3 items"), std::string::npos) << e.what();
  }
  try {
    parseOpenAiRequest(Endpoint::kCompletions, R"({"prompt": "hi", "temperature": "warm"})");
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("\"warm\""), std::string::npos) << e.what();
  }
}

TEST(OpenAiRequestTest, NestingDepthCountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(jsonNestingDepth(R"({"a": [1, [2]]})", 64), 3);
  EXPECT_EQ(jsonNestingDepth(R"({"a": "[[[[{{{{", "b": "\"[[["})", 64), 1);
  EXPECT_EQ(jsonNestingDepth(R"("\\" [[[)", 64), 3);
  EXPECT_EQ(jsonNestingDepth(nested(10, false), 4), 5);
  EXPECT_EQ(jsonNestingDepth(nested(kMaxJsonDepth, true), kMaxJsonDepth), kMaxJsonDepth);
  // The limit itself is accepted; one level more is refused.
  std::string at_limit =
      withValue(R"({"prompt": "hi", "unknown_field": @})", nested(kMaxJsonDepth - 1, false));
  EXPECT_NO_THROW(parseOpenAiRequest(Endpoint::kCompletions, at_limit));
  std::string over =
      withValue(R"({"prompt": "hi", "unknown_field": @})", nested(kMaxJsonDepth, false));
  EXPECT_THROW(parseOpenAiRequest(Endpoint::kCompletions, over), ApiError);
}

// Found by openai_request_fuzz: the JSON library's message quotes the bad token with control
// characters spelled out (<U+000A>, 8 bytes each): the answer must not grow with the body.
TEST(OpenAiRequestTest, InvalidJsonMessageIsShort) {
  const std::string body = "{\"prompt\": \"" + std::string(5000, '\n') + "\"}";
  try {
    parseOpenAiRequest(Endpoint::kCompletions, body);
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_EQ(e.body()["error"]["code"], "invalid_json");
    EXPECT_LT(std::string(e.what()).size(), 300u) << e.what();
  }
}

// Found by openai_request_fuzz: a number too large for a double (1e400) made the JSON library
// throw out_of_range, which escaped as a 500 instead of a 400.
TEST(OpenAiRequestTest, NumberOverflowIsInvalidJson) {
  for (const char* body :
       {R"({"prompt": "hi", "temperature": 1e400})", "161e308.0\t", R"({"prompt": [1e999]})"}) {
    try {
      parseOpenAiRequest(Endpoint::kCompletions, body);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      EXPECT_EQ(e.body()["error"]["code"], "invalid_json") << body << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace tpnode::node::api
