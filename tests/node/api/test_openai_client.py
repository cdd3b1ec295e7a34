#!/usr/bin/env python3
"""tpnode's OpenAI-compatible API through the official `openai` client (PyPI).

By default it starts api-fake-server (the API in front of a deterministic fake engine). Set
TPNODE_API_BASE_URL (and TPNODE_API_KEY, TPNODE_API_MODEL) to run the same checks against a
real server, e.g. a tpnode cluster:
  TPNODE_API_BASE_URL=http://127.0.0.1:8080/v1 TPNODE_API_KEY=sk-... \
      tools/venv-python.sh tests/node/api/test_openai_client.py
Exit code 77 (skipped) when the openai package is missing (tools/install-deps.sh installs it).
"""
import json
import os
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from api_test_server import ApiUnderTest  # noqa: E402

try:
    import openai
except ImportError:
    print("SKIP: the openai package is missing (run tools/install-deps.sh)")
    sys.exit(77)

SERVER = None


def client(api_key=None):
    return openai.OpenAI(base_url=SERVER.base_url, api_key=api_key or SERVER.api_key or "none",
                         max_retries=0, timeout=60)


class OpenAiClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = client()
        models = cls.client.models.list().data
        cls.model = os.environ.get("TPNODE_API_MODEL") or models[0].id
        cls.context = getattr(models[0], "max_model_len", None) or 4096

    def chat(self, **kw):
        """chat.completions.create; skips the test when the model has no usable chat template
        (a 400 with code "unsupported", as for the random-weight reference models)."""
        kw.setdefault("model", self.model)
        try:
            return self.client.chat.completions.create(**kw)
        except openai.BadRequestError as e:
            if e.code == "unsupported":
                self.skipTest("the server cannot render chat: %s" % e.message)
            raise

    def complete(self, **kw):
        kw.setdefault("model", self.model)
        return self.client.completions.create(**kw)

    def test_models(self):
        ids = [m.id for m in self.client.models.list().data]
        self.assertIn(self.model, ids)

    def test_completion(self):
        r = self.complete(prompt="Hello", max_tokens=8, temperature=0)
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(len(r.choices), 1)
        self.assertIn(r.choices[0].finish_reason, ("length", "stop"))
        self.assertGreater(r.usage.prompt_tokens, 0)
        self.assertLessEqual(r.usage.completion_tokens, 8)
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens)
        again = self.complete(prompt="Hello", max_tokens=8, temperature=0)
        self.assertEqual(r.choices[0].text, again.choices[0].text)

    def test_chat(self):
        r = self.chat(
            max_tokens=8, temperature=0,
            messages=[{"role": "system", "content": "You are brief."},
                      {"role": "user", "content": "Say hello."}])
        self.assertEqual(r.object, "chat.completion")
        self.assertEqual(r.choices[0].message.role, "assistant")
        self.assertIsInstance(r.choices[0].message.content, str)
        self.assertGreater(r.usage.completion_tokens, 0)

    def test_completion_streaming_matches_whole(self):
        whole = self.complete(prompt="Once upon", max_tokens=10, temperature=0)
        parts, finish = [], None
        for chunk in self.complete(prompt="Once upon", max_tokens=10, temperature=0, stream=True):
            self.assertEqual(chunk.object, "text_completion")
            if chunk.choices:
                parts.append(chunk.choices[0].text)
                finish = chunk.choices[0].finish_reason or finish
        self.assertEqual("".join(parts), whole.choices[0].text)
        self.assertEqual(finish, whole.choices[0].finish_reason)

    def test_chat_streaming_with_usage(self):
        stream = self.chat(
            max_tokens=6, temperature=0, stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "user", "content": "Count to three."}])
        chunks = list(stream)
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        self.assertIsInstance(text, str)
        self.assertIsNotNone(chunks[-1].usage)
        self.assertEqual(chunks[-1].choices, [])
        self.assertGreater(chunks[-1].usage.completion_tokens, 0)

    def test_stop_sequence(self):
        base = self.complete(prompt="The", max_tokens=16, temperature=0).choices[0].text
        if len(base) < 4:
            self.skipTest("output too short to pick a stop sequence: %r" % base)
        cut = len(base) // 2
        stop = base[cut:cut + 2]
        expected = base[: base.find(stop)]
        r = self.complete(prompt="The", max_tokens=16, temperature=0, stop=[stop])
        self.assertEqual(r.choices[0].text, expected)
        self.assertEqual(r.choices[0].finish_reason, "stop")
        streamed = "".join(c.choices[0].text for c in self.complete(
            prompt="The", max_tokens=16, temperature=0, stop=stop, stream=True) if c.choices)
        self.assertEqual(streamed, expected)

    def test_seed_reproducibility(self):
        a = self.complete(prompt="Pick words", max_tokens=12, temperature=1.0, seed=1234)
        b = self.complete(prompt="Pick words", max_tokens=12, temperature=1.0, seed=1234)
        self.assertEqual(a.choices[0].text, b.choices[0].text)

    def test_logprobs(self):
        r = self.complete(prompt="Hi", max_tokens=3, temperature=0, logprobs=2)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), r.usage.completion_tokens)
        self.assertEqual(len(lp.token_logprobs), r.usage.completion_tokens)

    def test_wrong_api_key_is_401(self):
        if not SERVER.api_key:
            self.skipTest("the server under test has no API key")
        with self.assertRaises(openai.AuthenticationError):
            client("sk-wrong").models.list()
        with self.assertRaises(openai.AuthenticationError):
            client("sk-wrong").completions.create(model=self.model, prompt="x", max_tokens=1)

    def test_bad_requests_are_4xx(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(prompt="x", max_tokens=2, n=2)
        self.assertEqual(e.exception.status_code, 400)
        self.assertEqual(e.exception.body["param"], "n")
        with self.assertRaises(openai.BadRequestError):
            self.complete(prompt="x", max_tokens=2, temperature="hot")
        with self.assertRaises(openai.NotFoundError):
            self.complete(model="no-such-model", prompt="x", max_tokens=2)
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(prompt="word " * (self.context + 16), max_tokens=2)
        self.assertEqual(e.exception.code, "context_length_exceeded")
        with self.assertRaises(openai.BadRequestError):
            self.client.chat.completions.create(model=self.model, messages=[])

    def responses(self):
        if not hasattr(self.client, "responses"):
            self.skipTest("skipped: openai %s has no Responses API (1.66 or later: "
                          "tools/install-deps.sh)" % openai.__version__)
        return self.client.responses

    def respond(self, **kw):
        kw.setdefault("model", self.model)
        try:
            return self.responses().create(**kw)
        except openai.BadRequestError as e:
            if e.code == "unsupported":
                self.skipTest("the server cannot render chat: %s" % e.message)
            raise

    def test_responses_conversation(self):
        first = self.respond(input="Name a colour.", instructions="Be brief.",
                             max_output_tokens=8, temperature=0)
        self.assertEqual(first.object, "response")
        self.assertTrue(first.id.startswith("resp_"))
        self.assertIn(first.status, ("completed", "incomplete"))
        self.assertEqual(first.output[0].type, "message")
        self.assertEqual(first.output[0].content[0].type, "output_text")
        self.assertEqual(first.output_text, first.output[0].content[0].text)
        self.assertGreater(first.usage.input_tokens, 0)
        self.assertLessEqual(first.usage.output_tokens, 8)
        self.assertEqual(first.usage.input_tokens_details.cached_tokens, 0)
        second = self.respond(input=[{"role": "user", "content": "Another one."}],
                              previous_response_id=first.id, max_output_tokens=8,
                              temperature=0)
        self.assertEqual(second.previous_response_id, first.id)
        # The second prompt carries the first turn: more input tokens.
        self.assertGreater(second.usage.input_tokens, first.usage.input_tokens)
        got = self.responses().retrieve(second.id)
        self.assertEqual(got.output_text, second.output_text)
        # The input items the second response was generated from: the first turn, then its own.
        items = self.responses().input_items.list(second.id, order="asc")
        self.assertEqual([i.role for i in items.data], ["user", "assistant", "user"])
        self.assertEqual([i.content[0].text for i in items.data],
                         ["Name a colour.", first.output_text, "Another one."])
        self.assertFalse(items.has_more)
        newest = self.responses().input_items.list(second.id, limit=1)  # desc by default
        self.assertEqual(newest.data[0].content[0].text, "Another one.")
        self.assertTrue(newest.has_more)
        # The SDK's auto-pagination follows `after` page by page.
        ids = [i.id for i in self.responses().input_items.list(second.id, limit=1)]
        self.assertEqual(ids, [i.id for i in reversed(items.data)])
        with self.assertRaises(openai.NotFoundError):
            self.responses().input_items.list("resp_unknown")
        self.responses().delete(first.id)
        with self.assertRaises(openai.NotFoundError):
            self.responses().retrieve(first.id)
        with self.assertRaises(openai.NotFoundError):
            self.respond(input="x", previous_response_id=first.id, max_output_tokens=2)

    def test_responses_streaming(self):
        whole = self.respond(input="Count to three.", max_output_tokens=8, temperature=0)
        stream = self.respond(input="Count to three.", max_output_tokens=8, temperature=0,
                              stream=True)
        types, text, final = [], "", None
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                text += event.delta
            if event.type in ("response.completed", "response.incomplete"):
                final = event.response
        self.assertEqual(types[0], "response.created")
        self.assertIsNotNone(final, types)
        self.assertEqual(text, whole.output_text)
        self.assertEqual(final.output_text, whole.output_text)

    def test_health_and_metrics(self):
        with urllib.request.urlopen(SERVER.root + "/health", timeout=10) as r:
            self.assertEqual(json.load(r)["status"], "ok")
        with urllib.request.urlopen(SERVER.root + "/metrics", timeout=10) as r:
            self.assertIn("tpnode_api_requests_total", r.read().decode())


def main():
    global SERVER
    SERVER = ApiUnderTest()
    try:
        SERVER.wait_healthy()
        print("testing", SERVER.base_url, "(fake engine)" if SERVER.is_fake else "")
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        SERVER.close()
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
