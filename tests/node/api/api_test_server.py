"""Starts tools' api-fake-server (the HTTP API in front of the FakeEngine test double) for the
Python tests, or points them at a running server when TPNODE_API_BASE_URL is set.

Environment:
  TPNODE_API_BASE_URL   e.g. http://127.0.0.1:8080/v1 : test that server instead of the fake
  TPNODE_API_KEY        the key to send (required there when the server has --api-key-file)
  TPNODE_API_MODEL      the model name (default: the first one /v1/models lists)
  TPNODE_API_FAKE_SERVER  path of api-fake-server (ctest sets it)
"""
import os
import subprocess
import tempfile
import time
import urllib.request


class ApiUnderTest:
    def __init__(self, token_delay_ms=0, with_key=True):
        self.proc = None
        self.base_url = os.environ.get("TPNODE_API_BASE_URL", "")
        self.api_key = os.environ.get("TPNODE_API_KEY", "")
        self.is_fake = not self.base_url
        if self.is_fake:
            self._start_fake(token_delay_ms, with_key)

    def _start_fake(self, token_delay_ms, with_key):
        exe = os.environ.get("TPNODE_API_FAKE_SERVER")
        if not exe or not os.path.exists(exe):
            raise SystemExit("TPNODE_API_FAKE_SERVER is not set to api-fake-server's path")
        self.tmp = tempfile.TemporaryDirectory()
        args = [exe, "--port", "0", "--token-delay-ms", str(token_delay_ms)]
        if with_key:
            self.api_key = "sk-python-test"
            key_file = os.path.join(self.tmp.name, "keys")
            with open(key_file, "w") as f:
                f.write("# test keys\n" + self.api_key + "\n")
            args += ["--api-key-file", key_file]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # "listening on port N"
        if not line.startswith("listening on port "):
            self.proc.kill()
            raise SystemExit("api-fake-server did not start: " + line)
        port = int(line.split()[-1])
        self.root_url = "http://127.0.0.1:%d" % port
        self.base_url = self.root_url + "/v1"

    @property
    def root(self):
        return self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url

    def wait_healthy(self, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(self.root + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                time.sleep(0.1)
        raise SystemExit("the server at %s is not healthy" % self.root)

    def close(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
