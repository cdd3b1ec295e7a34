#!/usr/bin/env python3
"""tools/prefixload.py (the client of tools/bench-prefix.sh):

- its parsing of streamed chunks (tpnode's usage, llama-server's timings), nearest-rank
  percentiles, the cached / uncached split and the report's tables, on fixed inputs;
- its commands against a real single-node tpnode on loopback serving the tiny reference model
  with the prefix cache on: make-prompt, probe (the second request of a prefix reports cached
  tokens), shared and chat print JSON with every field tools/bench-prefix.sh reads.

Needs TPNODE_BIN and TPNODE_TEST_MODEL_DIR (ctest sets both; the model comes from the target
reference_models).
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import shutil
import tempfile
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import prefixload as pl  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from free_ports import free_port  # noqa: E402


def sse(*chunks):
    return [f"data: {json.dumps(c)}\n".encode() for c in chunks] + [b"\n", b"data: [DONE]\n"]


class Clock:
    def __init__(self):
        self.t = 10.0

    def __call__(self):
        self.t += 0.25
        return self.t


class ParseTest(unittest.TestCase):
    def test_tpnode_chat_stream(self):
        lines = sse({"choices": [{"delta": {"role": "assistant"}}]},
                    {"choices": [{"delta": {"content": "Hi"}}]},
                    {"choices": [{"delta": {"content": " there"}}]},
                    {"choices": [], "usage": {"prompt_tokens": 1040, "completion_tokens": 2,
                                              "prompt_tokens_details": {"cached_tokens": 1024}}})
        r = pl.parse_stream(lines, 10.0, Clock())
        self.assertEqual(r["ttft"], 0.25)  # the role-only chunk is not a token
        self.assertEqual(r["text"], "Hi there")
        self.assertEqual((r["prompt_tokens"], r["cached_tokens"], r["completion_tokens"]),
                         (1040, 1024, 2))
        self.assertTrue(r["done"])
        self.assertIsNone(r["error"])

    def test_llama_server_timings_without_usage(self):
        lines = sse({"choices": [{"delta": {"content": "a"}}]},
                    {"choices": [{"delta": {"content": "b"}}]},
                    {"choices": [{"delta": {}, "finish_reason": "length"}],
                     "timings": {"cache_n": 900, "prompt_n": 40}})
        r = pl.parse_stream(lines, 10.0, Clock())
        self.assertEqual((r["prompt_tokens"], r["cached_tokens"]), (940, 900))
        self.assertEqual(r["completion_tokens"], 2)  # counted chunks

    def test_errors(self):
        r = pl.parse_stream([b'data: {"error": {"message": "boom"}}\n'], 0, Clock())
        self.assertIn("boom", r["error"])
        r = pl.parse_stream([b'data: {"choices": [{"delta": {"content": "x"}}]}\n'], 0, Clock())
        self.assertEqual(r["error"], "stream ended without [DONE]")

    def test_percentile_nearest_rank(self):
        self.assertIsNone(pl.percentile([], 50))
        self.assertEqual(pl.percentile([3, 1, 2], 50), 2)
        self.assertEqual(pl.percentile(list(range(1, 101)), 99), 99)
        self.assertEqual(pl.percentile(list(range(1, 101)), 50), 50)
        self.assertEqual(pl.percentile([7], 99), 7)

    def test_summary_splits_cached_and_uncached(self):
        recs = [{"ttft": 2.0, "completion_tokens": 4, "prompt_tokens": 1000, "cached_tokens": 0},
                {"ttft": 0.1, "completion_tokens": 4, "prompt_tokens": 1000, "cached_tokens": 992},
                {"ttft": 0.3, "completion_tokens": 4, "prompt_tokens": 1000, "cached_tokens": 400},
                {"ttft": 0.2, "completion_tokens": 4, "prompt_tokens": None, "cached_tokens": None,
                 "turn": 2}]
        s = pl.summarize(recs, ["HTTP 503"], 2.0, 0.5)
        self.assertEqual((s["requests"], s["errors"], s["tokens"], s["tokens_per_s"]),
                         (4, 1, 16, 8.0))
        t = s["ttft_ms"]
        self.assertEqual((t["cached"]["n"], t["uncached"]["n"], t["unclassified"]["n"]), (1, 2, 1))
        self.assertEqual(t["cached"]["p50"], 100.0)
        self.assertEqual((t["uncached"]["p50"], t["uncached"]["p99"]), (300.0, 2000.0))
        self.assertEqual(s["cached_share"], round(1392 / 3000, 3))
        self.assertEqual(s["ttft_ms_by_turn"], {"2": {"n": 1, "p50": 200.0, "p99": 200.0}})

    def test_report_tables_and_ratios(self):
        d = tempfile.mkdtemp(prefix="prefixload-report-")
        self.addCleanup(shutil.rmtree, d, ignore_errors=True)

        def put(name, obj):
            with open(os.path.join(d, name), "w") as f:
                json.dump(obj, f)

        def run(tps, p50, cached_p50):
            return {"requests": 10, "errors": 0, "tokens_per_s": tps, "cached_share": 0.9,
                    "ttft_ms": {"all": {"n": 10, "p50": p50, "p99": p50},
                                "cached": {"n": 9, "p50": cached_p50, "p99": cached_p50},
                                "uncached": {"n": 1, "p50": p50, "p99": p50}}}

        put("facts.json", {"modes": [["off", "tpnode off"], ["local", "tpnode local"],
                                     ["redis-a", "redis A"], ["redis", "redis B"],
                                     ["llama", "llama-server"]],
                           "cpu": "test cpu", "notes": ["a note"]})
        put("off.shared.json", run(10.0, 1000.0, None))
        put("local.shared.json", run(40.0, 200.0, 100.0))
        put("llama.shared.json", run(20.0, 300.0, 150.0))
        put("local.probe.json", {"steps": [{"ttft_ms_p50": 500.0, "cached_tokens": [0]},
                                           {"ttft_ms_p50": 50.0, "cached_tokens": [1024]}]})
        put("redis-a.probe.json", {"steps": [{"ttft_ms_p50": 400.0, "cached_tokens": [0]}]})
        put("redis.probe.json", {"steps": [{"ttft_ms_p50": 80.0, "cached_tokens": [1024]},
                                           {"ttft_ms_p50": 40.0, "cached_tokens": [1024]}]})
        with open(os.path.join(d, "local.metrics.txt"), "w") as f:
            f.write("tpnode_prefix_cache_hits_total 23\ntpnode_kv_blocks_free 100\n")
        md = pl.report(d)
        self.assertIn("- tpnode local: `tpnode_prefix_cache_hits_total 23`\n", md)
        self.assertIn("| tpnode local | 10 | 0 | 40 | 0.9 | 200 | 200 | 9 | 100 / 100 | 1 |", md)
        self.assertIn("| redis A | not run |", md)  # no redis-a.shared.json
        self.assertIn("| tpnode local | 500 | 50 | 0.1x | [1024] |", md)
        self.assertIn("| redis B (first request on the second cluster) | 400 | 80 | 0.2x |", md)
        self.assertIn("| redis A | 400 | - | - | - |", md)
        self.assertIn("under load: 0.1x (goal <= 0.2x)", md)
        self.assertIn("tpnode local / llama-server: 2x (goal >= 1.0x)", md)
        self.assertIn("- a note", md)
        self.assertIn("- cpu: test cpu", md)




class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        model = os.path.join(os.environ["TPNODE_TEST_MODEL_DIR"], "llama-tiny-q8_0.gguf")
        if not os.path.exists(model):
            raise RuntimeError(f"{model} not found (build the target reference_models)")
        cls.tmp = tempfile.mkdtemp(prefix="prefixload-test-")
        port = free_port()
        cls.base = f"http://127.0.0.1:{port}"
        cls.log = open(os.path.join(cls.tmp, "node0.log"), "w")
        cls.proc = subprocess.Popen(
            [os.environ["TPNODE_BIN"], "--model", model, "--port", str(port), "--parallel", "2",
             "--ctx-size", "512", "--prefix-cache", "on", "--log-level", "warn"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(cls.base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if cls.proc.poll() is not None or time.monotonic() > deadline:
                cls.tearDownClass()
                raise RuntimeError("tpnode did not become healthy")
            time.sleep(0.1)
        cls.prompt = os.path.join(cls.tmp, "prompt.json")
        pl.main(["make-prompt", "--base", cls.base, "--tokens", "64", "--out", cls.prompt])

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        try:
            cls.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()
        cls.log.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_cmd(self, *args):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = pl.main(list(args) + ["--base", self.base, "--prompt-file", self.prompt,
                                       "--max-tokens", "4"])
        out = json.loads(buf.getvalue())
        self.assertEqual(rc, 0, out.get("first_errors"))
        return out

    def test_prompt_is_sized_by_tokenize(self):
        with open(self.prompt) as f:
            p = json.load(f)
        self.assertEqual(p["counted_by"], "tokenize")
        self.assertGreaterEqual(p["tokens"], 64)

    def test_probe_second_request_finds_the_prefix_cached(self):
        out = self.run_cmd("probe", "--tag", "t1", "--prefixes", "1", "--requests-per-prefix", "2")
        self.assertEqual(out["errors"], 0)
        first, second = out["steps"]
        self.assertEqual(first["cached_tokens"], [0])
        self.assertGreater(second["cached_tokens"][0], 0)
        self.assertIsNotNone(second["ttft_ms_p50"])

    def check_summary(self, out, requests):
        self.assertEqual((out["requests"], out["errors"]), (requests, 0))
        self.assertEqual(out["tokens"], 4 * requests)
        self.assertGreater(out["tokens_per_s"], 0)
        for k in ("all", "cached", "uncached", "unclassified"):
            self.assertIn(k, out["ttft_ms"])
        self.assertEqual(out["ttft_ms"]["all"]["n"], requests)
        self.assertEqual(out["ttft_ms"]["unclassified"]["n"], 0)  # tpnode reports cached tokens

    def test_shared(self):
        out = self.run_cmd("shared", "--clients", "2", "--requests", "2")
        self.check_summary(out, 4)
        self.assertGreater(out["cached_share"], 0)

    def test_chat(self):
        out = self.run_cmd("chat", "--clients", "2", "--turns", "2", "--open-tokens", "30")
        self.check_summary(out, 4)
        self.assertEqual(sorted(out["ttft_ms_by_turn"]), ["1", "2"])


if __name__ == "__main__":
    unittest.main()
