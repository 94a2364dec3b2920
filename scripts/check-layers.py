#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the layering of include/inferkit: a header may include headers of its own folder and of
folders on lower floors (the FLOORS table), never of a higher floor, nor of another folder on its
own floor: the folders of one floor stand side by side (sched and model both stand on plan, and
neither on the other; so do sim and engine). No include cycle between folders either (it would
need such an include; it is reported as the cycle, too). scripts/test.sh runs it after
clang-format.

A header's folder is its directory under include/inferkit/ with any `detail/` part dropped (a
detail folder belongs to its parent: `sched/detail/page_store.hpp` is in `sched`, and
`attention/cuda/detail/device_ops.cuh` in `attention/cuda`), then matched to the longest entry
of FLOORS it starts with (`attention/cuda` is in `attention`; `kv/cuda` has an entry of its own).
Files directly in include/inferkit/ (the umbrella header) are the folder ".". A folder that no
entry covers, and an entry that covers no header, are errors too: a new folder gets a floor
here when it is created.

Prints each violation as `file:line: the include: folder (floor a) includes folder (floor b)`
and exits 1 if there is any; prints one summary line and exits 0 otherwise.

    python3 scripts/check-layers.py            # the check
    python3 scripts/check-layers.py --graph    # also lists the folder graph it found
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

# Floor of each folder: a folder includes only folders on lower floors. Derived from the includes
# as they are (run --graph) and DESIGN.md's picture of the step flow; move a folder, or add one,
# deliberately and in the same change as the code that needs it.
FLOORS = {
    # vocabulary every part names: dtypes, errors, token and request ids, shapes, RNG, backends
    "core": 0,
    # KV storage and its bookkeeping: blocks, block tables, paged views, quantization
    "kv": 1,
    # sampling, verifiers and drafters: they work on logits and tokens, not on KV
    "spec": 1,
    # hardware presets, roofline, memory planning: arithmetic over shapes
    "perf": 1,
    # the StepPlan / SequenceResult contract between whoever schedules and whoever executes:
    # stands on kv (BlockCopy, PageTableView), below the scheduler and every executor
    "plan": 2,
    # the radix prefix cache, bound to the block allocator
    "prefix": 2,
    # the attention kernels over paged KV views
    "attention": 2,
    # the schedulers, which produce plans, and the model, which executes them: side by side
    "sched": 3,
    "model": 3,
    # DevicePagedKVCache appends K/V with attention/cuda's append kernel, so it stands above
    # attention, not on the floor of the host-side kv folder it extends
    "kv/cuda": 3,
    # the top floor, side by side: predicted (a scheduler driven by a cost model) and measured
    # (scheduler -> model -> sampler/verifier -> commit)
    "sim": 4,
    "engine": 4,
    # the umbrella header includes everything
    ".": 5,
}

HEADER_SUFFIXES = (".hpp", ".cuh", ".h")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(rel: Path) -> str | None:
    """The FLOORS entry covering header `rel` (relative to include/inferkit), or None when no
    entry does."""
    parts = list(rel.parent.parts)
    if "detail" in parts:
        parts = parts[: parts.index("detail")]
    if not parts:
        return "."  # directly in include/inferkit (or in its detail/)
    while parts:
        key = "/".join(parts)
        if key in FLOORS:
            return key
        parts.pop()
    return None


def resolve(header: Path, bracket: str, target: str, root: Path) -> Path | None:
    """The included file relative to include/inferkit, or None when it is not inferkit's."""
    if bracket == "<":
        return Path(target[len("inferkit/"):]) if target.startswith("inferkit/") else None
    resolved = (header.parent / target).resolve()
    try:
        return resolved.relative_to(root.resolve())
    except ValueError:
        return None


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one folder (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return components


def shortest_cycle(start: str, edges: dict[str, set[str]], members: set[str]) -> list[str]:
    """A shortest path start -> ... -> start inside one strongly connected component."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(edges[node] & members):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start] + path[::-1][1:] + [start]
                if succ not in came_from:
                    came_from[succ] = node
                    following.append(succ)
        frontier = following
    return [start, start]  # unreachable: a component of two or more folders has a cycle


def main() -> int:
    repo = Path(__file__).resolve().parent.parent
    root = repo / "include" / "inferkit"
    headers = sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith(HEADER_SUFFIXES))
    problems: list[str] = []
    edges: dict[str, set[str]] = {}
    # (from folder, to folder) -> the first include that makes the edge, for the cycle report
    witness: dict[tuple[str, str], str] = {}
    used: set[str] = set()

    def show(path: Path) -> str:
        return str(path.relative_to(repo))

    for header in headers:
        rel = header.relative_to(root)
        src = folder_of(rel)
        if src is None:
            problems.append(f"{show(header)}: folder {rel.parent} has no floor in FLOORS "
                            f"(scripts/check-layers.py)")
            continue
        used.add(src)
        edges.setdefault(src, set())
        for number, line in enumerate(header.read_text(encoding="utf-8").splitlines(), 1):
            match = INCLUDE_RE.match(line)
            if not match:
                continue
            target = resolve(header, match.group(1), match.group(2), root)
            if target is None:
                continue
            where = f"{show(header)}:{number}: {line.strip()}"
            dst = folder_of(target)
            if dst is None:
                problems.append(f"{where}: {target.parent} has no floor in FLOORS")
                continue
            if dst == src:
                continue
            edges[src].add(dst)
            witness.setdefault((src, dst), where)
            if FLOORS[dst] >= FLOORS[src]:
                why = "a higher floor" if FLOORS[dst] > FLOORS[src] else "side by side on one floor"
                problems.append(f"{where}: {src} (floor {FLOORS[src]}) includes {dst} "
                                f"(floor {FLOORS[dst]}): {why}")

    for folder in sorted(set(FLOORS) - used):
        problems.append(f"scripts/check-layers.py: FLOORS lists {folder}, which has no header")

    for component in find_cycles(edges):
        cycle = shortest_cycle(component[0], edges, set(component))
        lines = [f"include cycle between folders {' -> '.join(cycle)}:"]
        for src, dst in zip(cycle, cycle[1:]):
            lines.append(f"  {witness[(src, dst)]}: {src} -> {dst}")
        problems.append("\n".join(lines))

    if "--graph" in sys.argv[1:]:
        for src in sorted(edges, key=lambda f: (FLOORS[f], f)):
            targets = sorted(edges[src], key=lambda f: (FLOORS[f], f))
            below = ", ".join(f"{d} ({FLOORS[d]})" for d in targets)
            print(f"{src} (floor {FLOORS[src]}) -> {below or 'nothing'}")

    if problems:
        print("\n".join(problems))
        print(f"layers: {len(problems)} violation(s) in {len(headers)} headers")
        return 1
    print(f"layers: {len(headers)} headers in {len(used)} folders on "
          f"{len(set(FLOORS.values()))} floors; every include goes to a lower floor, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
