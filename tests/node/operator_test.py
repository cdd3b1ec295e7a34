#!/usr/bin/env python3
"""What an operator meets running tpnode, with real processes on loopback and a model the
build's make_test_model writes into a temporary folder:

- usage errors (an unknown flag, a --peers entry listed twice) exit 2 at once;
- node 0 that cannot listen on its mesh port, or whose peers never come within
  --connect-timeout while it serves, exits 1 with one clear message (not a retry storm);
- a 2-node cluster started with llama.cpp's spellings (-m -c -t -np --api-key --alias
  --host localhost) serves: the sampling flags are the defaults of requests that omit them
  (/props and the answers show it), /tokenize and /detokenize work, response_format json is
  400, /metrics parses with prometheus_client's parser (every family typed and documented)
  and counts the all-reduce traffic of the mesh link to node 1;
- SIGTERM stops node 0 (also while it forms the mesh) and its worker with status 0, no error
  line and no "re-forming";
- one-shot output ends with a newline and -n 0 reports a non-negative prefill time.

Needs TPNODE_BIN and TPNODE_MAKE_TEST_MODEL (ctest sets both). Exit 77 (skipped, with the
reason) when prometheus_client is missing (tools/install-deps.sh installs it).
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("skipped: the python package prometheus_client is missing (tools/install-deps.sh)")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from free_ports import free_port  # noqa: E402

BIN = os.environ["TPNODE_BIN"]
MAKE_MODEL = os.environ["TPNODE_MAKE_TEST_MODEL"]
TMP = tempfile.mkdtemp(prefix="tpnode-operator-")
MODEL = os.path.join(TMP, "tiny test model.gguf")  # spaces: the default id is a slug
SECRET = os.path.join(TMP, "secret")
KEY = "sk-operator-test"




def start(args, log_name):
    path = os.path.join(TMP, log_name)
    with open(path, "w") as log:
        return subprocess.Popen([BIN] + args, stdout=log, stderr=subprocess.STDOUT), path


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def http(port, method, path, body=None, key=KEY):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    if key:
        req.add_header("Authorization", "Bearer " + key)
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, data=data, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def error_lines(log):
    return [line for line in log.splitlines() if "[E]" in line or "[C]" in line]


class UsageErrors(unittest.TestCase):
    def run_tpnode(self, args):
        return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=30)

    def test_unknown_flag_exits_2(self):
        r = self.run_tpnode(["--no-such-flag"])
        self.assertEqual(r.returncode, 2, r.stderr)

    def test_repeated_peer_is_refused_before_loading(self):
        p = free_port()
        r = self.run_tpnode(["-m", MODEL, "--node-id", "0", "--peers",
                             f"127.0.0.1:{p},127.0.0.2:{p},127.0.0.1:{p}"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("repeats entry 0", r.stderr)
        self.assertNotIn("[model]", r.stderr)  # refused before the model is opened


class StartupFailures(unittest.TestCase):
    def test_taken_mesh_port_exits_1_with_one_message(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen(1)
            p0 = taken.getsockname()[1]
            proc, log = start(["-m", MODEL, "--node-id", "0", "--peers",
                               f"127.0.0.1:{p0},127.0.0.2:{free_port('127.0.0.2')}",
                               "--cluster-secret-file", SECRET, "--port", "0"], "taken.log")
            try:
                rc = proc.wait(timeout=60)
            finally:
                proc.kill()
        text = read(log)
        self.assertEqual(rc, 1, text)
        self.assertIn("cannot listen on 127.0.0.1:%d" % p0, text)
        self.assertLessEqual(text.count("cannot listen on"), 2, text)

    def test_connect_timeout_while_serving_exits_1_naming_the_missing_node(self):
        proc, log = start(["-m", MODEL, "--node-id", "0", "--peers",
                           f"127.0.0.1:{free_port()},127.0.0.2:{free_port('127.0.0.2')}",
                           "--cluster-secret-file", SECRET, "--connect-timeout", "2",
                           "--port", "0"], "timeout.log")
        try:
            rc = proc.wait(timeout=60)
        finally:
            proc.kill()
        text = read(log)
        self.assertEqual(rc, 1, text)
        self.assertIn("--connect-timeout", text)
        self.assertIn("node 1 at 127.0.0.2", text)
        self.assertNotIn("re-form", text)


    def test_sigterm_while_forming_is_quiet(self):
        proc, log = start(["-m", MODEL, "--node-id", "0", "--peers",
                           f"127.0.0.1:{free_port()},127.0.0.2:{free_port('127.0.0.2')}",
                           "--cluster-secret-file", SECRET, "--port", "0"], "forming.log")
        try:
            wait_for(lambda: "forming the mesh" in read(log), 60, "node 0 to form the mesh")
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=30)
        finally:
            proc.kill()
        text = read(log)
        self.assertEqual(rc, 0, text)
        self.assertEqual(error_lines(text), [], text)
        self.assertNotIn("re-form", text)


class Cluster(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        peers = f"127.0.0.1:{free_port()},127.0.0.2:{free_port('127.0.0.2')}"
        common = ["-m", MODEL, "--peers", peers, "--cluster-secret-file", SECRET,
                  "-c", "256", "-t", "1", "-np", "2", "--connect-timeout", "60"]
        cls.worker, cls.worker_log = start(common + ["--node-id", "1"], "worker.log")
        cls.driver, cls.driver_log = start(
            common + ["--node-id", "0", "--host", "localhost", "--port", "0",
                      "--api-key", KEY, "--alias", "tiny-alias", "--temp", "0", "-n", "5",
                      "--top-k", "1", "--seed", "3"], "driver.log")
        cls.port = int(wait_for(
            lambda: (re.findall(r"listening on http://localhost:(\d+)", read(cls.driver_log))
                     or [None])[0], 60, "the API to listen"))
        wait_for(lambda: http(cls.port, "GET", "/health")[0] == 200, 60, "the cluster")

    @classmethod
    def tearDownClass(cls):
        for p in (cls.driver, cls.worker):
            if p.poll() is None:
                p.kill()

    def test_a_served_model_id_is_the_alias(self):
        status, body = http(self.port, "GET", "/v1/models")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["data"][0]["id"], "tiny-alias")
        self.assertEqual(http(self.port, "GET", "/v1/models", key=None)[0], 401)

    def test_b_cli_defaults_reach_the_api(self):
        status, body = http(self.port, "GET", "/props")
        self.assertEqual(status, 200, body)
        props = json.loads(body)
        params = props["default_generation_settings"]["params"]
        self.assertEqual(params["temperature"], 0)
        self.assertEqual(params["n_predict"], 5)
        self.assertEqual(params["top_k"], 1)
        self.assertEqual(params["seed"], 3)
        self.assertEqual(props["default_generation_settings"]["n_ctx"], 256)
        self.assertEqual(props["total_slots"], 2)
        answers = []
        for _ in range(2):
            status, body = http(self.port, "POST", "/v1/completions",
                                {"prompt": "Hello", "ignore_eos": True})
            self.assertEqual(status, 200, body)
            answers.append(json.loads(body))
        self.assertEqual(answers[0]["usage"]["completion_tokens"], 5)  # -n 5
        # --temp 0 made both greedy, hence equal.
        self.assertEqual(answers[0]["choices"][0]["text"], answers[1]["choices"][0]["text"])

    def test_c_tokenize_detokenize(self):
        status, body = http(self.port, "POST", "/tokenize", {"content": "Hello world"})
        self.assertEqual(status, 200, body)
        ids = json.loads(body)["tokens"]
        self.assertTrue(ids and all(isinstance(i, int) for i in ids), body)
        status, body = http(self.port, "POST", "/tokenize",
                            {"content": "Hello world", "with_pieces": True})
        self.assertEqual([t["id"] for t in json.loads(body)["tokens"]], ids)
        status, body = http(self.port, "POST", "/detokenize", {"tokens": ids})
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["content"].strip(), "Hello world")

    def test_d_response_format_json_is_400(self):
        status, body = http(self.port, "POST", "/v1/chat/completions",
                            {"messages": [{"role": "user", "content": "hi"}],
                             "response_format": {"type": "json_object"}})
        self.assertEqual(status, 400, body)
        self.assertEqual(json.loads(body)["error"]["param"], "response_format")

    def test_e_metrics_parse_and_count_the_mesh_link(self):
        http(self.port, "POST", "/v1/completions", {"prompt": "Hi", "max_tokens": 3})
        status, text = http(self.port, "GET", "/metrics", key=None)
        self.assertEqual(status, 200)
        families = {f.name: f for f in text_string_to_metric_families(text)}
        for name, f in families.items():
            self.assertNotEqual(f.type, "unknown", name)
            self.assertTrue(f.documentation, name)
        # Every # TYPE line belongs to a family the parser saw.
        for declared in re.findall(r"^# TYPE (\S+)", text, re.M):
            base = re.sub(r"_total$", "", declared)
            self.assertTrue(declared in families or base in families, declared)

        def sample(family, **labels):
            for s in families[family].samples:
                if all(s.labels.get(k) == v for k, v in labels.items()) and \
                        not s.name.endswith("_created"):
                    return s.value
            self.fail(f"no sample {family}{labels}")

        self.assertGreater(sample("tpnode_link_bytes", peer="1", direction="sent"), 0)
        self.assertGreater(sample("tpnode_link_bytes", peer="1", direction="received"), 0)
        self.assertGreater(sample("tpnode_link_messages", peer="1"), 0)
        self.assertGreaterEqual(sample("tpnode_link_wait_seconds", peer="1"), 0)
        self.assertEqual(sample("tpnode_cluster_ready"), 1)
        self.assertGreater(sample("tpnode_api_requests", route="/v1/completions", status="200"), 0)

    def test_z_sigterm_stops_both_quietly(self):
        self.driver.send_signal(signal.SIGTERM)
        self.assertEqual(self.driver.wait(timeout=30), 0)
        self.assertEqual(self.worker.wait(timeout=30), 0)
        for log in (self.driver_log, self.worker_log):
            text = read(log)
            self.assertEqual(error_lines(text), [], log)
            self.assertNotIn("re-form", text, log)
            self.assertEqual(text.count("listening on"), 1 if log == self.driver_log else 0)
            # Each of the 2 ranks holds about half of the model, not "100 %" of itself.
            self.assertNotIn("(100.0%)", text, log)


class OneShot(unittest.TestCase):
    def test_output_ends_with_a_newline(self):
        r = subprocess.run([BIN, "-m", MODEL, "--prompt", "Hello", "-n", "4", "--ignore-eos"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.endswith("\n"), repr(r.stdout))

    def test_n_0_reports_a_non_negative_prefill_time(self):
        r = subprocess.run([BIN, "-m", MODEL, "--prompt", "Hello", "-n", "0"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        m = re.search(r"prefill: \d+ tokens in (-?[\d.]+) s", r.stderr)
        self.assertTrue(m, r.stderr)
        self.assertGreaterEqual(float(m.group(1)), 0)
        self.assertNotIn("(100.0%)", r.stderr)  # one rank holds the whole model, not 100 % of it


def main():
    subprocess.run([MAKE_MODEL, "--out", MODEL], check=True, capture_output=True)
    with open(SECRET, "wb") as f:
        f.write(os.urandom(32).hex().encode())
    os.chmod(SECRET, 0o600)
    result = unittest.main(exit=False, verbosity=2).result
    if result.wasSuccessful():
        subprocess.run(["rm", "-rf", TMP])
    else:
        print("logs kept in", TMP)
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
