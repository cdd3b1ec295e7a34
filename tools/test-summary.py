#!/usr/bin/env python3
"""Prints the counts of a ctest run and, for every skipped test, why it skipped.

    tools/test-summary.py build/ctest-junit.xml

Reads the JUnit file that `ctest --output-junit` writes. The reason is the line of the test's
output that says "skipped" (GTEST_SKIP() << "skipped: ..." and the scripts that exit 77 print
one); a skip without such a line is listed as "(no reason printed)", which is a test bug.
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
            failed.append(name)
        else:
            passed += 1
    for name, why in skipped:
        print(f"[test] skipped {name}: {why}")
    for name in failed:
        print(f"[test] FAILED {name}")
    print(f"summary: {passed} passed, {len(failed)} failed, {len(skipped)} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
