#!/usr/bin/env python3
"""Prints the counts of a ctest run, for every skipped test why it skipped, and for every failed
test what failed.

    tools/test-summary.py build/ctest-junit.xml

Reads the JUnit file that `ctest --output-junit` writes. The reason is the line of the test's
output that says "skipped" (GTEST_SKIP() << "skipped: ..." and the scripts that exit 77 print
one); a skip without such a line is listed as "(no reason printed)", which is a test bug.
For a failed test it prints each GoogleTest "file:line: Failure" with the lines that follow it
(the expectation and its values), at most 3 failures of 12 lines each, else the last 12 lines of
its output: CI keeps only the tail of the log, where ctest's own output of the test is cut off.
Exit status: 0, or 1 when the file is missing or unreadable.
"""
import sys
import xml.etree.ElementTree as ET


def reason(output: str) -> str:
    lines = [l.strip() for l in output.splitlines()]
    # GoogleTest prints "file:line: Skipped", then the message given to GTEST_SKIP().
    for i, l in enumerate(lines):
        if l.endswith(": Skipped"):
            rest = [m for m in lines[i + 1:i + 4] if m and not m.startswith("[  ")]
            if rest:
                return rest[0][:240]
    for l in lines:
        if "skipped" in l.lower() and "[  SKIPPED ]" not in l and not l.startswith("[  "):
            return l[:240]
    return "(no reason printed)"


def failure_excerpt(output: str, failures: int = 3, lines_each: int = 12) -> list:
    lines = output.splitlines()
    starts = [i for i, l in enumerate(lines) if l.rstrip().endswith(": Failure")]
    if not starts:
        return [l[:240] for l in lines[-lines_each:]]
    out = []
    for i in starts[:failures]:
        block = []
        for l in lines[i:i + lines_each]:
            if block and (l.startswith("[  ") or l.rstrip().endswith(": Failure")):
                break
            block.append(l[:240])
        out += block
    if len(starts) > failures:
        out.append(f"({len(starts) - failures} more failures)")
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 1
    try:
        root = ET.parse(sys.argv[1]).getroot()
    except (OSError, ET.ParseError) as e:
        print(f"[test] no test summary: {e}", file=sys.stderr)
        return 1
    passed, failed, skipped = 0, [], []
    for case in root.iter("testcase"):
        name = case.get("name", "?").split("  # GetParam()")[0]
        out = "".join(e.text or "" for e in case.iter("system-out"))
        if case.find("skipped") is not None or case.get("status") == "notrun":
            skipped.append((name, reason(out)))
        elif case.find("failure") is not None or case.find("error") is not None:
            failed.append((name, failure_excerpt(out)))
        else:
            passed += 1
    for name, why in skipped:
        print(f"[test] skipped {name}: {why}")
    for name, excerpt in failed:
        print(f"[test] FAILED {name}")
        for line in excerpt:
            print(f"[test]   | {line}")
    print(f"summary: {passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
