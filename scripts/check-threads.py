#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Checks DESIGN.md's "Threads" convention (issue 33): every public header says, in one sentence
# of its top comment, which of its calls may run concurrently. Standard library only; run from
# anywhere:
#   python3 scripts/check-threads.py
# Public headers: include/inferkit/**/*.hpp and *.cuh, except those under a detail/ folder and
# the *-inl.hpp parts. The top comment is the run of `//` lines after the SPDX line; it must hold
# exactly one line that starts "// Threads:" (the sentence may go on over the next lines).
# PENDING lists headers allowed to lack it for now; an entry that no longer exists or now has its
# sentence fails too, so the list can only shrink.
# Prints one line per problem, "path: what", and exits 1 if there was any.
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = os.path.join(ROOT, "include", "inferkit")
MARK = "// Threads:"

# Headers another change is moving; whoever moves them gives them their sentence.
PENDING: set = set()


def public_headers():
    """Repository-relative paths of the public headers, sorted."""
    found = []
    for folder, dirs, files in os.walk(INCLUDE):
        dirs[:] = sorted(d for d in dirs if d != "detail")
        for name in files:
            if name.endswith("-inl.hpp") or not name.endswith((".hpp", ".cuh")):
                continue
            found.append(os.path.relpath(os.path.join(folder, name), ROOT).replace(os.sep, "/"))
    return sorted(found)


def top_comment(path):
    """The `//` lines after the SPDX line (None if the file does not start with one)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")
    if not lines or not lines[0].startswith("// SPDX-License-Identifier:"):
        return None
    block = []
    for line in lines[1:]:
        if not line.startswith("//"):
            break
        block.append(line)
    return block


def problem(path):
    """What is wrong with `path`'s Threads sentence, or None."""
    block = top_comment(path)
    if block is None:
        return "no SPDX line, so no top comment to hold the Threads: sentence"
    marks = sum(1 for line in block if line.startswith(MARK))
    if marks == 0:
        return 'no "Threads:" sentence in the top comment'
    if marks > 1:
        return f'{marks} "Threads:" sentences in the top comment (one, please)'
    return None


def main():
    headers = public_headers()
    problems = []
    pending_seen = []
    for path in headers:
        what = problem(path)
        if path in PENDING:
            if what is None:
                problems.append(f"{path}: has its Threads: sentence now; remove it from PENDING")
            else:
                pending_seen.append(path)
        elif what is not None:
            problems.append(f"{path}: {what}")
    for path in sorted(PENDING - set(headers)):
        problems.append(f"{path}: listed in PENDING but not a public header; remove it from PENDING")
    for line in problems:
        print(line)
    if problems:
        print(f"check-threads: {len(problems)} problem(s) in {len(headers)} public headers "
              "(DESIGN.md, Conventions, Threads)")
        return 1
    note = f", {len(pending_seen)} pending ({', '.join(pending_seen)})" if pending_seen else ""
    print(f"check-threads: {len(headers) - len(pending_seen)} public headers say Threads:{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
