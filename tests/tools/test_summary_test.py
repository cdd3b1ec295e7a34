#!/usr/bin/env python3
"""tools/test-summary.py (what tools/test.sh prints after ctest): counts, skip reasons and, for
a failed test, the GoogleTest failures with their values (or a script's last lines), read from a
JUnit file written here in ctest's shape."""
import importlib.util
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "test_summary", os.path.join(HERE, "..", "..", "tools", "test-summary.py"))
ts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ts)

GTEST_FAILED = """Running main()
[ RUN      ] A.B
/src/a_test.cc:10: Failure
Value of: n0.waitForLog("cannot accept")
  Actual: false
Expected: true
/src/a_test.cc:12: Failure
Expected equality of these values:
  n0.wait(seconds(40))
    Which is: 1
  0
[  FAILED  ] A.B (5 ms)
"""

JUNIT = f"""<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="x" tests="4" failures="2" skipped="1">
<testcase name="A.B  # GetParam() = 3" status="fail"><failure message="Failed"/>
<system-out>{GTEST_FAILED.replace('"', '&quot;')}</system-out></testcase>
<testcase name="script_test" status="fail"><failure message="Failed"/>
<system-out>{chr(10).join(f"line {i}" for i in range(30))}</system-out></testcase>
<testcase name="C.D" status="notrun"><skipped message="Skipped"/>
<system-out>/src/c.cc:3: Skipped
skipped: no CUDA device
</system-out></testcase>
<testcase name="E.F" status="run"><system-out>ok</system-out></testcase>
</testsuite>
"""


class TestSummary(unittest.TestCase):
    def run_on(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(text)
        try:
            sys.argv = ["test-summary.py", f.name]
            out = io.StringIO()
            with redirect_stdout(out):
                rc = ts.main()
            return rc, out.getvalue().splitlines()
        finally:
            os.unlink(f.name)

    def test_counts_skips_and_failures(self):
        rc, lines = self.run_on(JUNIT)
        self.assertEqual(rc, 0)
        self.assertEqual(lines[-1], "summary: 1 passed, 2 failed, 1 skipped")
        self.assertIn("[test] skipped C.D: skipped: no CUDA device", lines)
        self.assertIn("[test] FAILED A.B", lines)
        self.assertIn("[test] FAILED script_test", lines)

    def test_a_gtest_failure_shows_both_failures_with_their_values(self):
        _, lines = self.run_on(JUNIT)
        start = lines.index("[test] FAILED A.B")
        block = lines[start + 1:lines.index("[test] FAILED script_test")]
        self.assertEqual(block[0], "[test]   | /src/a_test.cc:10: Failure")
        self.assertIn("[test]   |   Actual: false", block)
        self.assertIn("[test]   | /src/a_test.cc:12: Failure", block)
        self.assertIn("[test]   |     Which is: 1", block)
        self.assertFalse(any("FAILED  ]" in l for l in block))

    def test_a_script_failure_shows_its_last_lines(self):
        _, lines = self.run_on(JUNIT)
        start = lines.index("[test] FAILED script_test")
        block = [l for l in lines[start + 1:] if l.startswith("[test]   | ")]
        self.assertEqual(block, [f"[test]   | line {i}" for i in range(18, 30)])

    def test_many_failures_are_capped(self):
        out = "\n".join(f"/s.cc:{i}: Failure\nExpected: {i}" for i in range(5))
        excerpt = ts.failure_excerpt(out)
        self.assertEqual(sum(l.endswith(": Failure") for l in excerpt), 3)
        self.assertEqual(excerpt[-1], "(2 more failures)")

    def test_a_missing_file_is_exit_1(self):
        sys.argv = ["test-summary.py", "/nonexistent/ctest-junit.xml"]
        self.assertEqual(ts.main(), 1)


if __name__ == "__main__":
    unittest.main()
