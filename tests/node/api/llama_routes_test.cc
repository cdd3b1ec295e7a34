// What llama.cpp's server users expect of the API, over real loopback connections in front of
// the FakeEngine: /tokenize, /detokenize, /props (node/api/llama_handler.h), the server's
// request defaults (--temp, -n, ... as RequestDefaults) reaching the engine, and a
// response_format other than text refused with 400.
#include <gtest/gtest.h>

#include "node/api/api_server.h"
#include "tests/node/api/fake_engine.h"
#include "tests/node/api/http_test_client.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;
using testing::FakeEngine;
using testing::HttpReply;

const std::string kKey = "sk-llama";

class LlamaRoutesTest : public ::testing::Test {
 protected:
  void start(ApiOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.api_keys = {kKey};
    server_ = std::make_unique<ApiServer>(engine_, options);
    server_->start();
    port_ = server_->port();
  }
  HttpReply post(const std::string& path, const json& body) {
    return testing::postJson(port_, path, body, {{"Authorization", "Bearer " + kKey}});
  }
  HttpReply get(const std::string& path) {
    return testing::httpRequest(port_, "GET", path, {}, {{"Authorization", "Bearer " + kKey}});
  }

  FakeEngine engine_;
  std::unique_ptr<ApiServer> server_;
  uint16_t port_ = 0;
};

TEST_F(LlamaRoutesTest, TokenizeAndDetokenizeRoundTrip) {
  start();
  HttpReply r = post("/tokenize", {{"content", "Hello x"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json ids = r.json()["tokens"];
  ASSERT_TRUE(ids.is_array());
  EXPECT_EQ(ids.get<std::vector<int32_t>>(), engine_.tokenize("Hello x", false));

  HttpReply with_bos = post("/tokenize", {{"content", "Hello x"}, {"add_special", true}});
  EXPECT_EQ(with_bos.json()["tokens"][0], FakeEngine::kBos);

  HttpReply pieces = post("/tokenize", {{"content", "x"}, {"with_pieces", true}});
  ASSERT_EQ(pieces.status, 200) << pieces.body;
  EXPECT_EQ(pieces.json()["tokens"][0]["id"], static_cast<int>('x'));
  EXPECT_EQ(pieces.json()["tokens"][0]["piece"], "x");
  // A piece that is not valid UTF-8 comes as its bytes.
  HttpReply bytes = post("/tokenize", {{"content", "\xc3\xa9"}, {"with_pieces", true}});
  ASSERT_EQ(bytes.status, 200) << bytes.body;
  EXPECT_EQ(bytes.json()["tokens"][0]["piece"], json::array({0xc3}));

  HttpReply text = post("/detokenize", {{"tokens", ids}});
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(text.json()["content"], "Hello x");
}

TEST_F(LlamaRoutesTest, BadBodiesAre400AndKeysAreChecked) {
  start();
  EXPECT_EQ(post("/tokenize", {{"content", 5}}).status, 400);
  EXPECT_EQ(post("/tokenize", {{"text", "x"}}).status, 400);
  EXPECT_EQ(post("/tokenize", {{"content", "x"}, {"add_special", "yes"}}).status, 400);
  EXPECT_EQ(post("/detokenize", {{"tokens", {1, -1}}}).status, 400);
  EXPECT_EQ(post("/detokenize", {{"tokens", {FakeEngine::kVocab}}}).status, 400);
  EXPECT_EQ(post("/detokenize", {{"tokens", "1 2"}}).status, 400);
  EXPECT_EQ(testing::httpRequest(port_, "POST", "/tokenize", "{not json").status, 401);
  EXPECT_EQ(testing::httpRequest(port_, "GET", "/props").status, 401);
  EXPECT_EQ(
      testing::httpRequest(port_, "GET", "/tokenize", {}, {{"Authorization", "Bearer " + kKey}})
          .status,
      405);
}

TEST_F(LlamaRoutesTest, PropsShowTheServerDefaults) {
  ApiOptions o;
  o.defaults.sampling.temperature = 0.25;
  o.defaults.sampling.top_k = 9;
  o.defaults.sampling.seed = 1234;
  o.defaults.max_tokens = 21;
  start(o);
  HttpReply r = get("/props");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  const json& params = j["default_generation_settings"]["params"];
  EXPECT_EQ(params["temperature"], 0.25);
  EXPECT_EQ(params["top_k"], 9);
  EXPECT_EQ(params["seed"], 1234);
  EXPECT_EQ(params["n_predict"], 21);
  EXPECT_EQ(j["default_generation_settings"]["n_ctx"], engine_.modelInfo().context_length);
  EXPECT_EQ(j["model_alias"], engine_.modelInfo().id);
  EXPECT_TRUE(j.contains("total_slots"));
  EXPECT_TRUE(j.contains("chat_template"));
  EXPECT_TRUE(j["build_info"].is_string());
}

TEST_F(LlamaRoutesTest, ServerDefaultsReachTheEngineWhenTheRequestOmitsThem) {
  ApiOptions o;
  o.defaults.sampling.temperature = 0.3;
  o.defaults.sampling.top_k = 7;
  o.defaults.sampling.top_p = 0.85;
  o.defaults.sampling.seed = 99;
  o.defaults.max_tokens = 5;
  start(o);
  ASSERT_EQ(post("/v1/completions", {{"prompt", "Hi"}}).status, 200);
  GenerationRequest g = engine_.lastRequest();
  EXPECT_DOUBLE_EQ(g.sampling.temperature, 0.3);
  EXPECT_EQ(g.sampling.top_k, 7);
  EXPECT_DOUBLE_EQ(g.sampling.top_p, 0.85);
  EXPECT_EQ(g.sampling.seed, 99u);
  EXPECT_EQ(g.max_tokens, 5);
  // The request's own fields win.
  ASSERT_EQ(post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                                          {"temperature", 0.9},
                                          {"max_tokens", 2}})
                .status,
            200);
  g = engine_.lastRequest();
  EXPECT_DOUBLE_EQ(g.sampling.temperature, 0.9);
  EXPECT_EQ(g.sampling.top_k, 7);
  EXPECT_EQ(g.max_tokens, 2);
}

TEST_F(LlamaRoutesTest, OmittedMaxTokensNeverRunsToTheEndOfTheContext) {
  start();
  ASSERT_EQ(post("/v1/completions", {{"prompt", "Hi"}}).status, 200);
  EXPECT_EQ(engine_.lastRequest().max_tokens, RequestDefaults::kCompletionsMaxTokens);
  ASSERT_EQ(
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}}).status,
      200);
  const int room = engine_.modelInfo().context_length -
                   static_cast<int>(engine_.lastRequest().prompt_ids.size());
  EXPECT_EQ(engine_.lastRequest().max_tokens, std::min(RequestDefaults::kChatMaxTokens, room));
}

TEST_F(LlamaRoutesTest, ResponseFormatOtherThanTextIs400) {
  start();
  for (const json& format :
       {json{{"type", "json_object"}},
        json{{"type", "json_schema"}, {"json_schema", {{"name", "x"}, {"schema", json::object()}}}},
        json("json"), json{{"schema", 1}}}) {
    HttpReply r =
        post("/v1/chat/completions",
             {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"response_format", format}});
    EXPECT_EQ(r.status, 400) << format.dump();
    EXPECT_EQ(r.json()["error"]["param"], "response_format") << r.body;
  }
  HttpReply text =
      post("/v1/completions",
           {{"prompt", "Hi"}, {"max_tokens", 2}, {"response_format", {{"type", "text"}}}});
  EXPECT_EQ(text.status, 200) << text.body;
}

}  // namespace
}  // namespace tpnode::node::api
