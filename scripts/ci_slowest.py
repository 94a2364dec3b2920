#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The slowest compiles and tests of a scripts/test.sh run, so CI's time stays visible.

Usage: ci_slowest.py [-n N] BUILD_DIR...

Reads each build directory's .ninja_log (a translation unit's last build: its wall seconds,
which include waiting for a core when two compile at once) and Testing/Temporary/LastTest.log
(each test's "Test time" in its last ctest run), and prints the N slowest of each (default 10),
with the build directory, so a phase that grows shows up without re-running anything.
"""
import argparse
import os
import re
import sys


def compiles(build):
    """(seconds, build, output) of each output's last build in build/.ninja_log."""
    path = os.path.join(build, ".ninja_log")
    if not os.path.exists(path):
        return []
    last = {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 4:
                continue
            start, end, output = int(parts[0]), int(parts[1]), parts[3]
            if output.endswith((".o", ".obj")):
                last[output] = (end - start) / 1000.0
    return [(s, build, out) for out, s in last.items()]


def tests(build):
    """(seconds, build, name) of each test in build's last ctest run."""
    path = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(path):
        return []
    out, name = [], None
    with open(path, errors="replace") as f:
        for line in f:
            m = re.match(r"^\d+/\d+ Test: (.*)$", line)
            if m:
                name = m.group(1)
                continue
            m = re.match(r"^Test time =\s*([0-9.]+) sec", line)
            if m and name is not None:
                out.append((float(m.group(1)), build, name))
                name = None
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=10, help="rows per table (default 10)")
    ap.add_argument("builds", nargs="+", help="build directories (build/dev, build/asan, …)")
    args = ap.parse_args()
    if args.n < 1:
        sys.exit(f"ci_slowest.py: -n {args.n} must be >= 1")
    for title, rows in (("compiles", [r for b in args.builds for r in compiles(b)]),
                        ("tests", [r for b in args.builds for r in tests(b)])):
        rows.sort(key=lambda r: -r[0])
        print(f"slowest {min(args.n, len(rows))} {title} (seconds, wall):")
        for seconds, build, what in rows[:args.n]:
            print(f"  {seconds:8.1f}  {os.path.basename(os.path.normpath(build)):5}  {what}")


if __name__ == "__main__":
    main()
