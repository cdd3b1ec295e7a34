// The HTTP API over real loopback connections, in front of the FakeEngine test double.
#include "node/api/api_server.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "node/api/utf8_assembler.h"
#include "tests/node/api/deep_json.h"
#include "tests/node/api/fake_engine.h"
#include "tests/node/api/http_test_client.h"

namespace tpnode::node::api {
namespace {

using nlohmann::json;
using testing::FakeEngine;
using testing::HttpReply;
using testing::RawConnection;
using namespace std::chrono_literals;

const std::string kKey = "sk-test-123";

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }

  void start(ApiOptions options) {
    server_.reset();
    options.host = "127.0.0.1";
    options.port = 0;
    options.api_keys = {"sk-other", kKey};
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
  // Streams `body` and returns the parsed data events (without "[DONE]") and the raw body.
  std::vector<json> stream(const std::string& path, json body, std::string* raw = nullptr) {
    body["stream"] = true;
    HttpReply r = post(path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.headers["content-type"], "text/event-stream");
    if (raw) *raw = r.body;
    std::vector<json> out;
    for (const auto& d : testing::sseData(r.body)) {
      if (d != "[DONE]") out.push_back(json::parse(d));
    }
    return out;
  }
  // Waits until the fake engine has no active request.
  void expectEngineIdle() { EXPECT_TRUE(engine_.waitIdle(5s)) << engine_.activeCount(); }

  static void expectOpenAiError(const HttpReply& r, int status, const std::string& param = {}) {
    EXPECT_EQ(r.status, status) << r.body;
    json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    const json& e = j["error"];
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["type"].is_string());
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << r.body;
    if (!param.empty()) {
      EXPECT_EQ(e["param"], param) << r.body;
    }
  }

  FakeEngine engine_;
  std::unique_ptr<ApiServer> server_;
  uint16_t port_ = 0;
};

TEST_F(ApiServerTest, HealthFollowsEngineReadiness) {
  HttpReply r = testing::httpRequest(port_, "GET", "/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.json(), (json{{"status", "ok"}}));
  engine_.setReady(false, "node 2 is missing");
  r = testing::httpRequest(port_, "GET", "/health");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.json()["reason"], "node 2 is missing");
}

TEST_F(ApiServerTest, ModelsListsTheServedModel) {
  HttpReply r = get("/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "tpnode-fake");
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_EQ(j["data"][0]["max_model_len"], 256);
}

TEST_F(ApiServerTest, ServesTheChatPage) {
  HttpReply r = testing::httpRequest(port_, "GET", "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("/v1/chat/completions"), std::string::npos);
  EXPECT_NE(r.body.find("getReader"), std::string::npos);
}

TEST_F(ApiServerTest, CompletionAnswersWithUsageAndFinishReason) {
  HttpReply r =
      post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 5}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tpnode-fake");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(j["choices"].size(), 1u);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(j["choices"][0]["text"].get<std::string>().empty());
  const int prompt = static_cast<int>(engine_.tokenize("Hello", true).size());
  EXPECT_EQ(j["usage"], (json{{"prompt_tokens", prompt},
                              {"completion_tokens", 5},
                              {"total_tokens", prompt + 5},
                              {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  // Greedy is deterministic.
  HttpReply again =
      post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 5}, {"temperature", 0}});
  EXPECT_EQ(again.json()["choices"][0]["text"], j["choices"][0]["text"]);
}

TEST_F(ApiServerTest, EverySamplingFieldReachesTheEngine) {
  HttpReply r = post("/v1/completions", {{"prompt", {256, 257}},
                                         {"max_tokens", 3},
                                         {"temperature", 0.5},
                                         {"top_p", 0.9},
                                         {"top_k", 40},
                                         {"min_p", 0.05},
                                         {"seed", 7},
                                         {"presence_penalty", 0.25},
                                         {"frequency_penalty", 0.5},
                                         {"repeat_penalty", 1.1},
                                         {"logprobs", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  GenerationRequest g = engine_.lastRequest();
  EXPECT_EQ(g.prompt_ids, (std::vector<int32_t>{256, 257}));
  EXPECT_EQ(g.max_tokens, 3);
  EXPECT_DOUBLE_EQ(g.sampling.temperature, 0.5);
  EXPECT_DOUBLE_EQ(g.sampling.top_p, 0.9);
  EXPECT_EQ(g.sampling.top_k, 40);
  EXPECT_DOUBLE_EQ(g.sampling.min_p, 0.05);
  EXPECT_EQ(g.sampling.seed, 7u);
  EXPECT_DOUBLE_EQ(g.sampling.presence_penalty, 0.25);
  EXPECT_DOUBLE_EQ(g.sampling.frequency_penalty, 0.5);
  EXPECT_DOUBLE_EQ(g.sampling.repeat_penalty, 1.1);
  EXPECT_EQ(g.top_logprobs, 2);
  json j = r.json();
  EXPECT_EQ(j["usage"]["prompt_tokens"], 2);
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 3u);
  EXPECT_EQ(lp["token_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["text_offset"][0], 0);
}

TEST_F(ApiServerTest, SeedReproducesSampledOutput) {
  auto text = [&](int seed) {
    HttpReply r = post("/v1/completions",
                       {{"prompt", "Hi"}, {"max_tokens", 12}, {"temperature", 1}, {"seed", seed}});
    EXPECT_EQ(r.status, 200);
    return r.json()["choices"][0]["text"].get<std::string>();
  };
  EXPECT_EQ(text(42), text(42));
  EXPECT_NE(text(42), text(43));
}

TEST_F(ApiServerTest, ChatAnswersAsAssistant) {
  HttpReply r = post(
      "/v1/chat/completions",
      {{"messages",
        {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "Hello"}}}},
       {"max_completion_tokens", 4},
       {"logprobs", true},
       {"top_logprobs", 1}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(j["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  std::string rendered = engine_.renderChat({{"system", "be brief"}, {"user", "Hello"}});
  EXPECT_EQ(engine_.lastRequest().prompt_ids, engine_.tokenize(rendered, true));
  const json& content = j["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 4u);
  EXPECT_TRUE(content[0]["bytes"].is_array());
  EXPECT_EQ(content[0]["top_logprobs"].size(), 1u);
}

TEST_F(ApiServerTest, CompletionStreamIsFramedLikeOpenAi) {
  std::string raw;
  auto chunks = stream("/v1/completions",
                       {{"prompt", "Hello"},
                        {"max_tokens", 6},
                        {"temperature", 0},
                        {"stream_options", {{"include_usage", true}}}},
                       &raw);
  // Every event is "data: <json>\n\n" and the stream ends with [DONE].
  ASSERT_GE(raw.size(), 14u);
  EXPECT_EQ(raw.substr(raw.size() - 14), "data: [DONE]\n\n");
  for (size_t pos = 0; pos < raw.size();) {
    size_t end = raw.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos) << "unterminated event at " << pos;
    EXPECT_EQ(raw.compare(pos, 6, "data: "), 0) << raw.substr(pos, end - pos);
    pos = end + 2;
  }
  ASSERT_GE(chunks.size(), 3u);
  std::string text;
  for (size_t i = 0; i + 1 < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i]["object"], "text_completion");
    EXPECT_TRUE(chunks[i].contains("usage") && chunks[i]["usage"].is_null());
    text += chunks[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(chunks[chunks.size() - 2]["choices"][0]["finish_reason"], "length");
  const json& last = chunks.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["completion_tokens"], 6);
  HttpReply whole =
      post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 6}, {"temperature", 0}});
  EXPECT_EQ(text, whole.json()["choices"][0]["text"]);
}

TEST_F(ApiServerTest, ChatStreamSendsRoleThenContent) {
  auto chunks =
      stream("/v1/chat/completions",
             {{"messages", {{{"role", "user"}, {"content", "Hello"}}}}, {"max_tokens", 5}});
  ASSERT_GE(chunks.size(), 3u);
  EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (size_t i = 1; i < chunks.size(); ++i) {
    EXPECT_FALSE(chunks[i].contains("usage"));
    EXPECT_FALSE(chunks[i]["choices"][0]["delta"].contains("role"));
    text += chunks[i]["choices"][0]["delta"].value("content", "");
  }
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(chunks.back()["choices"][0]["delta"].empty());
}

TEST_F(ApiServerTest, StopSequenceAcrossTokensEndsTheGeneration) {
  // Slow and long enough that the stop is seen while the engine still generates.
  std::vector<std::string> script = {"Hel", "lo", " wo", "rld", "!"};
  script.resize(200, " more");
  engine_.setScript(script);
  engine_.setTokenDelay(2ms);
  HttpReply r = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 200}, {"stop", "lo w"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"][0]["text"], "Hel");
  EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop");
  expectEngineIdle();
  EXPECT_EQ(engine_.cancelledCount(), 1u);  // the engine request was cancelled

  auto chunks = stream("/v1/completions",
                       {{"prompt", "x"}, {"max_tokens", 200}, {"stop", {"nothing", "rld!"}}});
  std::string text;
  for (const auto& c : chunks) text += c["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "Hello wo");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "stop");
}

TEST_F(ApiServerTest, HeldBackStopPrefixIsReleasedWhenItDiverges) {
  engine_.setScript({"ab", "c", "abd", "ab"});
  auto chunks = stream("/v1/completions", {{"prompt", "x"}, {"stop", "abc!"}});
  std::string text;
  for (const auto& c : chunks) text += c["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "abcabdab");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "stop");  // EOS
}

TEST_F(ApiServerTest, StreamsOnlyCompleteUtf8) {
  engine_.setScript(
      {"caf", "\xC3", "\xA9", " \xE2\x82", "\xAC", " \xF0\x9F", "\x98", "\x80", "\xFF"});
  std::string raw;
  auto chunks =
      stream("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}}, &raw);
  std::string text;
  for (const auto& c : chunks) {
    std::string piece = c["choices"][0]["delta"].value("content", "");
    EXPECT_TRUE(isValidUtf8(piece));
    text += piece;
  }
  // Split characters arrive whole (no U+FFFD for them); the invalid byte becomes one U+FFFD.
  EXPECT_EQ(text, "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\xEF\xBF\xBD");
  EXPECT_TRUE(isValidUtf8(raw));
  HttpReply whole =
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  EXPECT_EQ(whole.json()["choices"][0]["message"]["content"],
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\xEF\xBF\xBD");
}

TEST_F(ApiServerTest, ApiKeyIsRequiredOnV1Routes) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/models"}, {"POST", "/v1/completions"}, {"POST", "/v1/chat/completions"}}) {
    for (const testing::Headers& h :
         std::vector<testing::Headers>{{},
                                       {{"Authorization", "Bearer wrong"}},
                                       {{"Authorization", kKey}},
                                       {{"Authorization", "Bearer " + kKey + "x"}}}) {
      HttpReply r = testing::httpRequest(port_, method, path, R"({"prompt":"x"})", h);
      expectOpenAiError(r, 401);
      EXPECT_EQ(r.json()["error"]["code"], "invalid_api_key");
      EXPECT_EQ(r.headers["www-authenticate"], "Bearer");
    }
  }
  EXPECT_EQ(engine_.submittedCount(), 0u);
  EXPECT_EQ(
      testing::httpRequest(port_, "GET", "/v1/models", {}, {{"Authorization", "bearer sk-other"}})
          .status,
      200);
  EXPECT_EQ(testing::httpRequest(port_, "GET", "/health").status, 200);
  EXPECT_EQ(testing::httpRequest(port_, "GET", "/metrics").status, 200);
}

TEST_F(ApiServerTest, BadRequestsGetOpenAiErrors) {
  struct Case {
    std::string path;
    std::string body;
    int status;
    std::string param;
  };
  const std::string c = "/v1/completions", ch = "/v1/chat/completions";
  const std::string long_prompt(300, 'q');
  std::vector<Case> cases = {
      {c, "{not json", 400, ""},
      {c, "[1]", 400, ""},
      {c, R"({"max_tokens": 3})", 400, "prompt"},
      {c, R"({"prompt": 3})", 400, "prompt"},
      {c, R"({"prompt": "x", "temperature": "hot"})", 400, "temperature"},
      {c, R"({"prompt": "x", "max_tokens": -1})", 400, "max_tokens"},
      {c, R"({"prompt": "x", "n": 2})", 400, "n"},
      {c, R"({"prompt": "x", "stream": 1})", 400, "stream"},
      {c, R"({"prompt": "x", "stop": {"a": 1}})", 400, "stop"},
      {c, R"({"prompt": "x", "model": "gpt-4"})", 404, "model"},
      {c, R"({"prompt": [1, 99999]})", 400, "prompt"},
      {c, R"({"prompt": ")" + long_prompt + R"("})", 400, "prompt"},
      {c, R"({"prompt": "x", "max_tokens": 1000})", 400, "prompt"},
      {ch, R"({"prompt": "x"})", 400, "messages"},
      {ch, R"({"messages": [{"role": "user"}], "n": 3})", 400, "n"},
      {ch, R"({"messages": [{"role": 1, "content": "x"}]})", 400, "messages[0].role"},
      {ch,
       R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 99, "logprobs": true})",
       400, "top_logprobs"},
  };
  for (const auto& k : cases) {
    HttpReply r =
        testing::httpRequest(port_, "POST", k.path, k.body, {{"Authorization", "Bearer " + kKey}});
    SCOPED_TRACE(k.body);
    expectOpenAiError(r, k.status, k.param);
  }
  HttpReply bad_value = post(c, {{"prompt", "x"}, {"temperature", "hot"}});
  EXPECT_NE(bad_value.json()["error"]["message"].get<std::string>().find("\"hot\""),
            std::string::npos);
  EXPECT_EQ(post(c, {{"prompt", long_prompt}}).json()["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(engine_.submittedCount(), 0u);
}

TEST_F(ApiServerTest, UnknownRoutesAndMethods) {
  expectOpenAiError(get("/v2/nothing"), 404);
  HttpReply r = get("/v1/completions");
  expectOpenAiError(r, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
  EXPECT_EQ(get("/health?verbose=1").status, 200);
}

TEST_F(ApiServerTest, ClusterFaultsAre503) {
  const json body = {{"prompt", "x"}, {"max_tokens", 2}};
  engine_.setReady(false, "node 1 is missing");
  HttpReply r = post("/v1/completions", body);
  expectOpenAiError(r, 503);
  EXPECT_NE(r.body.find("node 1 is missing"), std::string::npos);
  engine_.setReady(true);
  engine_.setSubmitError(ErrorCode::kPeerLost);
  expectOpenAiError(post("/v1/completions", body), 503);
  engine_.setSubmitError(ErrorCode::kAborted);
  expectOpenAiError(
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}}), 503);
  engine_.setSubmitError(ErrorCode::kInvalidArgument);
  expectOpenAiError(post("/v1/completions", body), 400);
  engine_.setSubmitError(std::nullopt);
  EXPECT_EQ(post("/v1/completions", body).status, 200);
}

TEST_F(ApiServerTest, FailureDuringGenerationIsReported) {
  engine_.setFailAfter(2);
  HttpReply r = post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}});
  expectOpenAiError(r, 503);
  EXPECT_NE(r.body.find("lost"), std::string::npos);
  std::string raw;
  auto chunks = stream("/v1/completions", {{"prompt", "x"}, {"max_tokens", 10}}, &raw);
  ASSERT_FALSE(chunks.empty());
  EXPECT_TRUE(chunks.back().contains("error")) << raw;
  EXPECT_EQ(raw.find("[DONE]"), std::string::npos);
}

TEST_F(ApiServerTest, UnrenderableChatTemplateIsAClearError) {
  engine_.setChatTemplateSupported(false);
  HttpReply r =
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
  expectOpenAiError(r, 400, "messages");
  EXPECT_EQ(r.json()["error"]["code"], "unsupported");
  EXPECT_NE(r.body.find("fake-jinja"), std::string::npos);
}

TEST_F(ApiServerTest, BodyTooLargeIs413) {
  ApiOptions small;
  small.max_body_bytes = 1024;
  start(small);
  HttpReply r = post("/v1/completions", {{"prompt", std::string(2000, 'x')}});
  expectOpenAiError(r, 413);
  // Announced but never sent: answered from the header alone.
  RawConnection conn(port_);
  conn.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n");
  std::string reply = conn.readAll(5000);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  EXPECT_EQ(get("/health").status, 200);
}

TEST_F(ApiServerTest, MalformedHttpGets400AndTheServerLivesOn) {
  const std::vector<std::string> inputs = {
      "GARBAGE\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
      "POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nabcde",
      "GET / HTTP/9.9\r\n\r\n",
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + std::string(64, '\0') +
          "\r\n\r\n",
  };
  for (const auto& input : inputs) {
    RawConnection conn(port_);
    conn.send(input);
    std::string reply = conn.readAll(5000);
    EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << "input: " << input << "\nreply: " << reply;
  }
  RawConnection big(port_);
  big.send("GET / HTTP/1.1\r\nX-Big: " + std::string(40000, 'a') + "\r\n\r\n");
  EXPECT_EQ(big.readAll(5000).rfind("HTTP/1.1 431", 0), 0u);
  EXPECT_EQ(get("/health").status, 200);
}

TEST_F(ApiServerTest, SlowClientsAreDisconnected) {
  ApiOptions quick;
  quick.read_timeout_s = 0.3;
  start(quick);
  RawConnection conn(port_);
  conn.send("GET /health HTTP/1.1\r\nHost: x\r\n");  // never finishes the header
  EXPECT_TRUE(conn.closedByPeer(5000));
}

TEST_F(ApiServerTest, KeepAliveAndPipelining) {
  RawConnection conn(port_);
  const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string ok = "{\"status\":\"ok\"}";
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t p = s.find(ok); p != std::string::npos; p = s.find(ok, p + 1)) ++n;
    return n;
  };
  conn.send(req);
  EXPECT_NE(conn.readUntil(ok).find("200 OK"), std::string::npos);
  conn.send(req + req);  // pipelined
  std::string two;
  for (int i = 0; i < 50 && count(two) < 2; ++i) two += conn.readUntil(ok, 100);
  EXPECT_EQ(count(two), 2u) << two;
}

TEST_F(ApiServerTest, ExpectContinueIsHonoured) {
  RawConnection conn(port_);
  std::string body = R"({"prompt": "x", "max_tokens": 2})";
  conn.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey +
            "\r\nExpect: 100-continue\r\nContent-Length: " + std::to_string(body.size()) +
            "\r\n\r\n");
  EXPECT_EQ(conn.readUntil("\r\n\r\n", 5000).rfind("HTTP/1.1 100", 0), 0u);
  conn.send(body);
  EXPECT_NE(conn.readUntil("}}", 5000).find("HTTP/1.1 200"), std::string::npos);
}

TEST_F(ApiServerTest, ClientDisconnectCancelsAStream) {
  engine_.setTokenDelay(20ms);
  {
    RawConnection conn(port_);
    std::string body = R"({"prompt": "x", "max_tokens": 200, "stream": true})";
    conn.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey +
              "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_NE(conn.readUntil("\"text\"", 5000).find("data: "), std::string::npos);
  }  // closed mid-stream
  expectEngineIdle();
  EXPECT_EQ(engine_.cancelledCount(), 1u);
  EXPECT_NE(get("/metrics").body.find("tpnode_api_client_cancels_total 1"), std::string::npos);
}

TEST_F(ApiServerTest, ClientDisconnectCancelsAWholeAnswer) {
  engine_.setTokenDelay(20ms);
  {
    RawConnection conn(port_);
    std::string body = R"({"prompt": "x", "max_tokens": 200})";
    conn.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey +
              "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
    for (int i = 0; i < 100 && engine_.activeCount() == 0; ++i) std::this_thread::sleep_for(10ms);
    EXPECT_EQ(engine_.activeCount(), 1u);
  }
  expectEngineIdle();
  EXPECT_EQ(engine_.cancelledCount(), 1u);
}

TEST_F(ApiServerTest, StopCancelsInFlightRequests) {
  engine_.setTokenDelay(20ms);
  RawConnection conn(port_);
  std::string body = R"({"prompt": "x", "max_tokens": 200, "stream": true})";
  conn.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + kKey +
            "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
  conn.readUntil("\"text\"", 5000);
  server_->stop();
  expectEngineIdle();
  EXPECT_EQ(engine_.cancelledCount(), 1u);
  EXPECT_TRUE(conn.closedByPeer(5000));
}

TEST_F(ApiServerTest, ManyConcurrentStreams) {
  engine_.setTokenDelay(2ms);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      HttpReply r = testing::postJson(port_, "/v1/completions",
                                      {{"prompt", "x"}, {"max_tokens", 20}, {"stream", i % 2 == 0}},
                                      {{"Authorization", "Bearer " + kKey}});
      if (r.status == 200) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 16);
  expectEngineIdle();
}

TEST_F(ApiServerTest, MetricsCountRequestsTokensAndLatency) {
  ASSERT_EQ(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 3}}).status, 200);
  post("/v1/completions", {{"prompt", "x"}, {"n", 2}});
  std::string m = testing::httpRequest(port_, "GET", "/metrics").body;
  for (const char* needle :
       {"tpnode_api_requests_total{route=\"/v1/completions\",status=\"200\"} 1",
        "tpnode_api_requests_total{route=\"/v1/completions\",status=\"400\"} 1",
        "tpnode_api_generated_tokens_total 3", "tpnode_api_prompt_tokens_total 2",
        "tpnode_api_tokens_per_second", "tpnode_api_active_requests 0", "tpnode_api_queue_depth 0",
        "tpnode_api_request_duration_seconds_bucket{route=\"/v1/completions\",le=\"+Inf\"} 2",
        "tpnode_api_time_to_first_token_seconds_count 1", "fake_engine_steps_total"}) {
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\n" << m;
  }
}

}  // namespace
}  // namespace tpnode::node::api

namespace tpnode::node::api {
namespace {

// ~200-600 KB bodies nested 100,000 levels deep in every field of both endpoints: each gets
// 400 "json_too_deep" and the server keeps serving (once, one such body crashed it).
TEST_F(ApiServerTest, DeepJsonOnEveryFieldGets400AndTheServerStaysUp) {
  const std::vector<std::string> deep = {testing::nested(100'000, false),
                                         testing::nested(100'000, true)};
  for (const std::string& value : deep) {
    for (const auto& [ep, body] : testing::everyFieldTemplate()) {
      HttpReply r = testing::httpRequest(port_, "POST", testing::endpointPath(ep),
                                         testing::withValue(body, value),
                                         {{"Authorization", "Bearer " + kKey}});
      ASSERT_EQ(r.status, 400) << body;
      EXPECT_EQ(r.json()["error"]["code"], "json_too_deep") << r.body;
    }
  }
  EXPECT_EQ(testing::httpRequest(port_, "GET", "/health").status, 200);
  EXPECT_EQ(post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 2}}).status, 200);
}

// At --max-connections the connection idle longest is closed to make room, so idle
// connections never lock the server out; when every connection is busy, a new one gets 503.
TEST_F(ApiServerTest, MaxConnectionsClosesIdleOnesThenAnswers503) {
  ApiOptions o;
  o.max_connections = 4;
  start(o);
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 4; ++i) idle.push_back(std::make_unique<RawConnection>(port_));
  std::this_thread::sleep_for(100ms);  // let the server see them before the next arrives
  HttpReply health = testing::httpRequest(port_, "GET", "/health");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_TRUE(idle[0]->closedByPeer(5000)) << "the oldest idle connection was not closed";

  // Four busy streams (slow tokens), then a fifth connection: 503, too_many_connections.
  engine_.setTokenDelay(50ms);
  idle.clear();
  std::vector<std::unique_ptr<RawConnection>> busy;
  const std::string body = R"({"prompt": "Hello", "max_tokens": 100, "stream": true})";
  for (int i = 0; i < 4; ++i) {
    busy.push_back(std::make_unique<RawConnection>(port_));
    ASSERT_TRUE(busy.back()->send(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: "
        "Bearer " +
        kKey + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    EXPECT_NE(busy.back()->readUntil("data: ").find("200 OK"), std::string::npos);
  }
  HttpReply refused = testing::httpRequest(port_, "GET", "/health");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("too_many_connections"), std::string::npos) << refused.body;
  EXPECT_EQ(refused.headers["retry-after"], "1");
  busy.clear();
  expectEngineIdle();
  engine_.setTokenDelay(0ms);
  // The busy ones gone, the server answers again.
  HttpReply later;
  for (int i = 0; i < 50 && later.status != 200; ++i) {
    std::this_thread::sleep_for(50ms);
    later = testing::httpRequest(port_, "GET", "/health");
  }
  EXPECT_EQ(later.status, 200);
  EXPECT_NE(get("/metrics").body.find("tpnode_api_refused_connections_total 1"), std::string::npos);
}

// Slow senders (slowloris: a request begun and never finished) are closed for room like idle
// connections, oldest first, so they cannot hold every connection for the read timeout.
TEST_F(ApiServerTest, MaxConnectionsClosesSlowSendersForRoom) {
  ApiOptions o;
  o.max_connections = 4;
  start(o);
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<RawConnection>(port_));
    ASSERT_TRUE(slow.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le"));
  }
  std::this_thread::sleep_for(100ms);
  for (int i = 0; i < 3; ++i) {
    HttpReply health = testing::httpRequest(port_, "GET", "/health");
    EXPECT_EQ(health.status, 200) << health.body;
  }
  EXPECT_TRUE(slow[0]->closedByPeer(5000)) << "the oldest slow sender was not closed";
}

// Activation taps are bounded across connections: beyond --max-tap-requests in flight a tap
// request gets 429; beyond --max-tap-bytes on its own, 400.
TEST_F(ApiServerTest, TapsBeyondTheBudgetGet429) {
  ApiOptions o;
  o.max_tap_requests = 1;
  o.max_tap_bytes = 1 << 20;
  start(o);
  engine_.setTokenDelay(20ms);
  const json tap_request = {
      {"prompt", "Hello"}, {"max_tokens", 100}, {"taps", {{{"layer", 0}, {"point", "residual"}}}}};
  HttpReply first;
  std::thread holder([&] { first = post("/v1/completions", tap_request); });
  for (int i = 0; i < 200 && engine_.activeCount() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(engine_.activeCount(), 1u);
  std::vector<HttpReply> others(3);
  std::vector<std::thread> clients;
  for (auto& r : others) {
    clients.emplace_back([&] {
      json small = tap_request;
      small["max_tokens"] = 1;
      r = post("/v1/completions", small);
    });
  }
  for (auto& t : clients) t.join();
  for (const HttpReply& r : others) {
    expectOpenAiError(r, 429, "taps");
    EXPECT_EQ(r.json()["error"]["code"], "tap_budget_exhausted") << r.body;
    EXPECT_NE(r.body.find("--max-tap-requests"), std::string::npos) << r.body;
  }
  // Requests without taps are not limited by the tap budget.
  EXPECT_EQ(post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 1}}).status, 200);
  holder.join();
  EXPECT_EQ(first.status, 200) << first.body;
  engine_.setTokenDelay(0ms);
  json again = tap_request;
  again["max_tokens"] = 1;
  EXPECT_EQ(post("/v1/completions", again).status, 200);
  // One request larger than the whole byte budget can never fit: 400.
  json huge = {{"prompt", std::string(200, 'x')},
               {"max_tokens", 1},
               {"taps", {{{"point", "logits"}}, {{"point", "logits"}}, {{"point", "logits"}}}}};
  HttpReply too_big = post("/v1/completions", huge);
  expectOpenAiError(too_big, 400, "taps");
  EXPECT_EQ(too_big.json()["error"]["code"], "tap_budget_exceeded") << too_big.body;
}

// Mutations of valid requests (bytes flipped, inserted, cut) at the HTTP and at the JSON level:
// the server answers each with a 2xx/4xx (never a 5xx) or closes, and keeps serving.
TEST_F(ApiServerTest, RandomInputsNeverBreakTheServer) {
  ApiOptions quick;
  quick.read_timeout_s = 0.2;  // mutated lengths leave requests unfinished
  start(quick);
  std::mt19937 rng(1234);
  const std::string body = R"({"prompt": "Hello", "max_tokens": 4, "temperature": 0.5,)"
                           R"( "stop": ["x"], "stream": false, "logprobs": 1})";
  const std::string head = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                           kKey + "\r\nConnection: close\r\nContent-Length: ";
  auto mutate = [&](std::string s) {
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < edits && !s.empty(); ++i) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0:
          s[pos] = static_cast<char>(rng() % 256);
          break;
        case 1:
          s.insert(pos, 1, "{}[]\",:0e-\\\xC3"[rng() % 13]);
          break;
        default:
          s.erase(pos, 1 + rng() % 8);
          break;
      }
    }
    return s;
  };
  int answered = 0;
  for (int i = 0; i < 300; ++i) {
    std::string request;
    if (i % 2 == 0) {
      std::string b = mutate(body);
      request = head + std::to_string(b.size()) + "\r\n\r\n" + b;
    } else {
      request = mutate(head + std::to_string(body.size()) + "\r\n\r\n" + body);
    }
    RawConnection conn(port_);
    conn.send(request);
    std::string reply = conn.readAll(5000);
    if (reply.empty()) continue;
    ++answered;
    ASSERT_EQ(reply.rfind("HTTP/1.1 ", 0), 0u) << reply;
    EXPECT_NE(reply[9], '5') << "request:\n" << request << "\nreply:\n" << reply;
  }
  EXPECT_GT(answered, 150);
  EXPECT_EQ(testing::httpRequest(port_, "GET", "/health").status, 200);
  expectEngineIdle();
}

}  // namespace
}  // namespace tpnode::node::api
