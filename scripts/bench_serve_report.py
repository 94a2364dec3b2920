#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Helper of scripts/bench-serve.sh (standard library only; not run by CI).

  prompts --out-dir DIR --counts 16,40,96 --output-tokens 128
      writes DIR/{shared,unrelated}-c{C}.jsonl, one GuideLLM row
      {"prompt": ..., "output_tokens_count": N} per line, deterministic. "shared": one
      ~200-token system prompt, then a short question that no other row asks; "unrelated":
      distinct ~100-200 token prompts with nothing in common at their start. The rows of
      each concurrency are disjoint, so no run reuses another run's prompts.
  warmup --url URL --model NAME [--requests 4]
      a few completions (two at once) before the timed runs
  report --runs DIR --out FILE --meta FILE
      reads the GuideLLM JSON files DIR/<server>-<dataset>-c<C>-r<round>.json, writes FILE
      (one entry per server x dataset x concurrency x round, and the medians over rounds)
      and prints a markdown table with both servers side by side
  soak --url URL --model NAME --pid PID --seconds S --out FILE [--clients 32]
      S seconds of --clients streaming clients against one server, a quarter of whose
      requests are cancelled on purpose (the client closes the connection mid-stream); counts
      failures (a non-200 answer, or a stream that breaks or ends without [DONE] when the
      client did not cancel it) and samples the server's VmRSS every 10 s
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse
from pathlib import Path

# ---- prompts ------------------------------------------------------------------------------------

SYSTEM_PROMPT = (
    "You are the support assistant of Northwind Outfitters, a company that sells hiking, "
    "camping and climbing equipment in twelve countries. Answer the customer's question in "
    "plain, friendly English, in at most three short paragraphs. Our policies: orders over "
    "fifty euros ship free within the European Union and arrive in three to five working "
    "days; express shipping costs nine euros and arrives the next working day when the order "
    "is placed before two in the afternoon. Unused items can be returned within sixty days "
    "for a full refund; worn footwear can be returned within thirty days if it is clean. "
    "Every tent, backpack and sleeping bag has a five-year warranty that covers seams, zips "
    "and buckles but not damage from fire or sharp rocks. Repairs are free during the "
    "warranty and take about two weeks. Members of the Trail Club collect one point per euro "
    "and get a voucher of ten euros for every five hundred points. Never promise a delivery "
    "date, never ask for a full card number, and suggest the repair service before a "
    "replacement when an item can be fixed."
)

QUESTION_SUBJECTS = [
    "my two-person tent", "the blue rain jacket", "a pair of trail runners", "the 40-litre "
    "backpack", "my sleeping bag", "the camping stove", "a climbing harness", "the trekking "
    "poles", "the headlamp", "a water filter", "the down vest", "my hiking boots", "the "
    "sleeping mat", "a carabiner set", "the kids' fleece", "the cooking pot set",
]
QUESTION_FORMS = [
    "Can I still return {s} that I bought {n} days ago?",
    "How long does a repair of {s} take if the zip broke after {n} weeks?",
    "Is express shipping available for {s} if I order at {n} in the afternoon?",
    "How many Trail Club points do I get for {s} that costs {n}0 euros?",
    "Does the warranty cover {s} if a seam opened after {n} months?",
    "What should I do if {s} arrived damaged after {n} days in transit?",
    "Can I swap {s} for a larger size after {n} days?",
    "Why was I charged for shipping on {s} when my order was {n}5 euros?",
]

OPENINGS = [
    "Explain to a curious teenager", "Write a short story about", "Summarise for a busy manager",
    "Describe in the style of a travel guide", "List the main arguments for and against",
    "Draft a polite email about", "Compose a limerick and then explain",
    "Give step-by-step advice on",
    "Tell the history of", "Compare two approaches to", "Write a product review of",
    "Prepare interview questions about", "Outline a lesson plan on", "Translate into simple words",
    "Argue as a sceptical scientist about", "Plan a weekend around",
]
TOPICS = [
    "lighthouse keepers", "bread fermentation", "glacier retreat", "medieval bridges",
    "urban beekeeping", "solar sailing", "chess openings", "deep-sea vents", "jazz harmony",
    "volcanic soils", "paper money", "desert cities", "migratory birds", "railway timetables",
    "ancient dyes", "coral reefs", "quantum dots", "tea ceremonies", "public libraries",
    "wind tunnels", "fungal networks", "river deltas", "typewriter repair", "sea shanties",
    "mountain rescue", "glass blowing", "satellite orbits", "clock towers", "salt marshes",
    "folk medicine", "steam engines", "origami design",
]
FILLER = [
    "Mention at least one surprising fact about {t} that most people have never heard.",
    "Keep the tone light, but make sure every claim about {t} could be checked in a library.",
    "Assume the reader has walked past {t} many times without ever asking how it works.",
    "Include a short example involving a small town, a rainy afternoon and {t}.",
    "Say what changed about {t} during the last hundred years and why it mattered.",
    "Avoid jargon, and when a technical word about {t} is unavoidable, define it right away.",
    "End with an open question about {t} that could start a conversation at dinner.",
    "Point out one common misunderstanding about {t} and correct it gently.",
    "Use a comparison with everyday kitchen objects to make {t} easier to picture.",
    "Add a sentence on how {t} might look fifty years from now.",
    "Name the kind of person who would enjoy working with {t} every day, and explain why.",
    "Note one risk connected with {t} and one simple way to reduce it.",
]


def shared_rows(count: int, first: int, out_tokens: int) -> list[dict]:
    rows = []
    for i in range(first, first + count):
        s = QUESTION_SUBJECTS[i % len(QUESTION_SUBJECTS)]
        form = QUESTION_FORMS[(i // len(QUESTION_SUBJECTS)) % len(QUESTION_FORMS)]
        q = form.format(s=s, n=2 + i)
        prompt = f"{SYSTEM_PROMPT}\n\nCustomer (ticket {1000 + i}): {q}\nAssistant:"
        rows.append({"prompt": prompt, "output_tokens_count": out_tokens})
    return rows


def unrelated_rows(count: int, first: int, out_tokens: int) -> list[dict]:
    rows = []
    for i in range(first, first + count):
        rng = random.Random(7919 * i + 17)
        # A number first, then the opening: no two rows share more than a token or two.
        t = TOPICS[i % len(TOPICS)]
        t2 = TOPICS[(i * 7 + 3) % len(TOPICS)]
        head = f"Task {i * 37 % 1009}. {OPENINGS[(i // len(TOPICS)) % len(OPENINGS)]} {t}."
        n = rng.randint(5, 9)  # about 100-200 tokens in all
        body = [f.format(t=rng.choice([t, t2])) for f in rng.sample(FILLER, n)]
        prompt = " ".join([head, *body]) + "\n\nAnswer:"
        rows.append({"prompt": prompt, "output_tokens_count": out_tokens})
    return rows


def cmd_prompts(a: argparse.Namespace) -> None:
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts = [int(c) for c in a.counts.split(",")]
    concurrencies = [int(c) for c in a.concurrency.split(",")]
    first = 0
    for c, n in zip(concurrencies, counts):
        for name, make in (("shared", shared_rows), ("unrelated", unrelated_rows)):
            with open(out / f"{name}-c{c}.jsonl", "w", encoding="utf-8") as f:
                for row in make(n, first, a.output_tokens):
                    f.write(json.dumps(row) + "\n")
        first += n


# ---- HTTP ---------------------------------------------------------------------------------------


def connect(url: str, timeout: float) -> http.client.HTTPConnection:
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)


def complete(url: str, body: dict, timeout: float = 300.0) -> tuple[int, str]:
    c = connect(url, timeout)
    try:
        c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def cmd_warmup(a: argparse.Namespace) -> None:
    bodies = [
        {"model": a.model, "prompt": row["prompt"], "max_tokens": 16, "temperature": 0}
        for row in shared_rows(2, 10_000, 16) + unrelated_rows(2, 10_000, 16)
    ][: a.requests]
    errors: list[str] = []

    def one(body: dict) -> None:
        status, text = complete(a.url, body)
        if status != 200:
            errors.append(f"{status} {text[:200]}")

    for i in range(0, len(bodies), 2):
        threads = [threading.Thread(target=one, args=(b,)) for b in bodies[i : i + 2]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if errors:
        sys.exit("warm-up failed: " + "; ".join(errors))


# ---- report -------------------------------------------------------------------------------------


def stat(metrics: dict, name: str) -> dict:
    return metrics[name]["successful"]


def summarise(path: Path) -> dict:
    doc = json.loads(path.read_text())
    b = doc["benchmarks"][0]
    m = b["metrics"]
    totals = m["request_totals"]
    ttft = stat(m, "time_to_first_token_ms")
    itl = stat(m, "inter_token_latency_ms")
    out_tok = stat(m, "output_token_count")
    return {
        # GuideLLM's own figures (the ones its console table prints): the mean rates over the
        # benchmark, and percentiles over successful requests.
        "output_tokens_per_s": stat(m, "output_tokens_per_second")["mean"],
        "requests_per_s": stat(m, "requests_per_second")["mean"],
        "ttft_ms_p50": ttft["percentiles"]["p50"],
        "ttft_ms_p99": ttft["percentiles"]["p99"],
        "itl_ms_p50": itl["percentiles"]["p50"],
        "itl_ms_p99": itl["percentiles"]["p99"],
        "output_tokens_per_request_mean": out_tok["mean"],
        "output_tokens_per_request_min": out_tok["min"],
        "successful_requests": int(totals["successful"]),
        "failed_requests": int(totals["errored"]) + int(totals["incomplete"]),
        "duration_s": b["duration"],
    }


DEFINITIONS = {
    "output_tokens_per_s": "GuideLLM's output tokens per second over the benchmark (mean rate)",
    "requests_per_s": "GuideLLM's successful requests per second over the benchmark (mean rate)",
    "ttft_ms": "time to first token, from sending the request to the first streamed token",
    "itl_ms": "inter-token latency: per request (last token - first token) / (output tokens - 1);"
              " percentiles over requests, weighted by their tokens",
    "failed_requests": "errored + incomplete requests as GuideLLM counts them",
    "results": "per server x dataset x concurrency: the median over rounds (failures summed)",
}


def median_of(entries: list[dict]) -> dict:
    keys = entries[0].keys()
    med = {k: statistics.median(e[k] for e in entries) for k in keys if k != "failed_requests"}
    med["failed_requests"] = sum(e["failed_requests"] for e in entries)
    med["rounds"] = len(entries)
    return med


def fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def cmd_report(a: argparse.Namespace) -> None:
    meta = json.loads(Path(a.meta).read_text())
    runs: dict[tuple[str, str, int], list[dict]] = {}
    raw = []
    for p in sorted(Path(a.runs).glob("*-c*-r*.json")):
        server, dataset, c, r = p.stem.rsplit("-", 3)
        entry = summarise(p)
        raw.append({"server": server, "dataset": dataset, "concurrency": int(c[1:]),
                    "round": int(r[1:]), **entry})
        runs.setdefault((server, dataset, int(c[1:])), []).append(entry)
    if not runs:
        sys.exit(f"no GuideLLM results in {a.runs}")
    results = [
        {"server": s, "dataset": d, "concurrency": c, **median_of(e)}
        for (s, d, c), e in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0]))
    ]
    doc = {**meta, "definitions": DEFINITIONS, "results": results, "runs": raw}
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")

    servers = meta["servers"]
    label = {"inferkit": "inferkit", "llamacpp": "llama.cpp"}
    print(f"\n## inferkit serve vs llama.cpp llama-server ({meta['host']['cpu']}, "
          f"{meta['threads']} threads, {meta['model_file']})\n")
    print(f"Host: {meta['host']['cpu']}; avx512f: {meta['host']['avx512f']}, "
          f"amx: {meta['host']['amx']}; {meta['host']['cpus']} CPUs; load average before "
          f"{meta['host']['loadavg_before']}. GuideLLM {meta['guidellm_version']}, llama.cpp "
          f"{meta['llamacpp_version']}, inferkit {meta['inferkit_commit']}. "
          f"{meta['output_tokens']} output tokens per request (ignore_eos), temperature "
          f"{meta['temperature']}; medians of {meta['rounds']} round(s).\n")
    by_key = {(r["server"], r["dataset"], r["concurrency"]): r for r in results}
    both = "inferkit" in servers and "llamacpp" in servers
    names = [label.get(s, s) for s in servers]

    def cells(d: str, c: int, f) -> list[str]:
        return [f(by_key[(s, d, c)]) if (s, d, c) in by_key else "–" for s in servers]

    # One group of columns per figure, the servers side by side inside each group.
    head = ["dataset", "conc."]
    head += [f"out tok/s {n}" for n in names] + (["ratio inferkit / llama.cpp"] if both else [])
    head += [f"req/s {n}" for n in names]
    head += [f"TTFT p50/p99 ms {n}" for n in names]
    head += [f"ITL p50/p99 ms {n}" for n in names]
    head += [f"out tok/req ({' / '.join(names)})", f"failed ({' / '.join(names)})"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for d in ("shared", "unrelated"):
        for c in meta["concurrency"]:
            row = [d, str(c)]
            row += cells(d, c, lambda r: fmt(r["output_tokens_per_s"]))
            if both:
                ik, ll = by_key.get(("inferkit", d, c)), by_key.get(("llamacpp", d, c))
                ok = ik and ll and ll["output_tokens_per_s"] > 0
                row.append(fmt(ik["output_tokens_per_s"] / ll["output_tokens_per_s"], 2)
                           if ok else "–")
            row += cells(d, c, lambda r: fmt(r["requests_per_s"], 2))
            row += cells(d, c, lambda r: f"{fmt(r['ttft_ms_p50'], 0)} / {fmt(r['ttft_ms_p99'], 0)}")
            row += cells(d, c, lambda r: f"{fmt(r['itl_ms_p50'])} / {fmt(r['itl_ms_p99'])}")
            row.append(" / ".join(cells(d, c, lambda r: fmt(r["output_tokens_per_request_mean"]))))
            row.append(" / ".join(cells(d, c, lambda r: str(r["failed_requests"]))))
            print("| " + " | ".join(row) + " |")
    print(f"\nwrote {a.out}")


# ---- soak ---------------------------------------------------------------------------------------


def vm_rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Soak:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.lock = threading.Lock()
        self.stop_at = time.monotonic() + a.seconds
        self.completed = 0
        self.cancelled = 0
        self.output_chunks = 0
        self.failures: list[str] = []
        rows = shared_rows(256, 20_000, 0) + unrelated_rows(256, 20_000, 0)
        self.prompts = [r["prompt"] for r in rows]

    def fail(self, what: str) -> None:
        with self.lock:
            self.failures.append(what[:300])

    def client(self, index: int) -> None:
        rng = random.Random(1000 + index)
        while time.monotonic() < self.stop_at:
            cancel_after = rng.randint(1, 24) if rng.random() < 0.25 else None
            body = {"model": self.a.model, "prompt": rng.choice(self.prompts),
                    "max_tokens": rng.randint(16, 128), "stream": True,
                    "temperature": rng.choice([0.0, 0.7, 1.0]), "ignore_eos": True}
            try:
                self.one(body, cancel_after)
            except Exception as e:  # noqa: BLE001 - every broken request counts as a failure
                self.fail(f"{type(e).__name__}: {e}")

    def one(self, body: dict, cancel_after: int | None) -> None:
        c = connect(self.a.url, 120.0)
        try:
            c.request("POST", "/v1/completions", json.dumps(body),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            if r.status != 200:
                self.fail(f"HTTP {r.status}: {r.read()[:200]!r}")
                return
            chunks = 0
            done = False
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    self.fail(f"error event: {data[:200]!r}")
                    return
                chunks += 1
                if cancel_after is not None and chunks >= cancel_after:
                    with self.lock:
                        self.cancelled += 1
                        self.output_chunks += chunks
                    return  # closing the connection below is the cancel
            if not done:
                self.fail(f"stream ended without [DONE] after {chunks} chunks")
                return
            with self.lock:
                self.completed += 1
                self.output_chunks += chunks
        finally:
            c.close()


def cmd_soak(a: argparse.Namespace) -> None:
    s = Soak(a)
    threads = [threading.Thread(target=s.client, args=(i,), daemon=True) for i in range(a.clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    samples = []
    while True:
        now = time.monotonic() - start
        rss = vm_rss_kib(a.pid)
        with s.lock:
            samples.append({"t_s": round(now, 1), "rss_kib": rss, "completed": s.completed,
                            "cancelled": s.cancelled, "failed": len(s.failures)})
        print(f"  t={now:6.0f} s  VmRSS {rss} KiB  completed {s.completed}  cancelled "
              f"{s.cancelled}  failed {len(s.failures)}", flush=True)
        if rss is None:
            s.fail("the server process is gone")
            break
        if now >= a.seconds:
            break
        time.sleep(min(10.0, max(0.1, a.seconds - now)))
    for t in threads:
        t.join(timeout=150)
    # The server must still answer after the storm.
    status, text = complete(a.url, {"model": a.model, "prompt": "Hello", "max_tokens": 8})
    if status != 200:
        s.fail(f"after the soak: HTTP {status} {text[:200]}")
    warm = [x for x in samples if x["t_s"] >= a.warmup_seconds and x["rss_kib"]]
    rss_warm = warm[0]["rss_kib"] if warm else None
    rss_end = vm_rss_kib(a.pid) or (samples[-1]["rss_kib"] if samples else None)
    growth = (rss_end / rss_warm - 1) if rss_warm and rss_end else None
    doc = {
        "seconds": a.seconds, "clients": a.clients, "completed": s.completed,
        "cancelled_on_purpose": s.cancelled, "failed": len(s.failures),
        "failures_first_20": s.failures[:20], "output_chunks": s.output_chunks,
        "rss_kib_after_warmup": rss_warm, "rss_kib_end": rss_end,
        "rss_kib_max": max((x["rss_kib"] for x in samples if x["rss_kib"]), default=None),
        "rss_growth_after_warmup": growth, "warmup_seconds": a.warmup_seconds,
        "samples": samples,
    }
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    flat = growth is not None and abs(growth) <= 0.05
    print(f"\nsoak: {a.seconds} s, {a.clients} clients: {s.completed} completed, {s.cancelled} "
          f"cancelled on purpose, {len(s.failures)} failed")
    for f in s.failures[:5]:
        print(f"  failure: {f}")
    if growth is not None:
        print(f"VmRSS after {a.warmup_seconds} s warm-up {rss_warm} KiB, at the end {rss_end} KiB "
              f"({growth * 100:+.1f}%: {'flat' if flat else 'NOT flat'})")
    print(f"wrote {a.out}")
    sys.exit(0 if not s.failures and flat else 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("prompts")
    q.add_argument("--out-dir", required=True)
    q.add_argument("--concurrency", default="1,8,32")
    q.add_argument("--counts", default="16,40,96")
    q.add_argument("--output-tokens", type=int, default=128)
    q.set_defaults(fn=cmd_prompts)
    w = sub.add_parser("warmup")
    w.add_argument("--url", required=True)
    w.add_argument("--model", required=True)
    w.add_argument("--requests", type=int, default=4)
    w.set_defaults(fn=cmd_warmup)
    r = sub.add_parser("report")
    r.add_argument("--runs", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--meta", required=True)
    r.set_defaults(fn=cmd_report)
    s = sub.add_parser("soak")
    s.add_argument("--url", required=True)
    s.add_argument("--model", required=True)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--seconds", type=int, default=600)
    s.add_argument("--clients", type=int, default=32)
    s.add_argument("--warmup-seconds", type=int, default=60)
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_soak)
    a = p.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
