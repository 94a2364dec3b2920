#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# An exact reference for the SmolLM2 forward pass: the GGUF's weights dequantized by gguf-py
# (llama.cpp's own Python package, from PyPI) and a plain numpy Llama forward in float64. It
# reads the texts of tests/data/smollm2_logprobs.jsonl (llama.cpp's teacher-forced run) and writes
# tests/data/smollm2_fp64_logprobs.jsonl with the same records: for each position the 20 most
# likely next tokens and their log-probabilities, computed in double. llama.cpp rounds its
# activations to 8 bits for the quantized products (and q and the softmax to fp16 in
# attention); this reference rounds nothing, so it tells how much of a difference to llama.cpp
# is numerics. It also writes tests/data/smollm2_fp64_greedy.jsonl: greedy generation (48 tokens)
# from the prompts of tests/data/smollm2_greedy.jsonl, with the margin between the two most
# likely tokens at each step. Not run by CI (tests only read the committed files).
#   python3 scripts/reference-fp64.py MODEL.gguf   (needs: pip install numpy gguf)
import json
import sys
from datetime import date

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main():
    model, src, dst = sys.argv[1], "tests/data/smollm2_logprobs.jsonl", "tests/data/smollm2_fp64_logprobs.jsonl"
    r = GGUFReader(model)
    tensors = {t.name: t for t in r.tensors}

    def weight(name):
        t = tensors[name]
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape([int(x) for x in reversed(t.shape)])

    def field(key):
        f = r.fields[key]
        return f.parts[f.data[0]].tolist()[0]

    layers = int(field("llama.block_count"))
    heads = int(field("llama.attention.head_count"))
    kv_heads = int(field("llama.attention.head_count_kv"))
    hidden = int(field("llama.embedding_length"))
    eps = float(field("llama.attention.layer_norm_rms_epsilon"))
    base = float(field("llama.rope.freq_base"))
    hd = hidden // heads
    emb = weight("token_embd.weight")
    out_norm = weight("output_norm.weight")
    names = ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
             "ffn_up", "ffn_down"]
    blk = [{k: weight(f"blk.{i}.{k}.weight") for k in names} for i in range(layers)]

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x, pos):  # GGUF llama layout: adjacent pairs rotate
        ang = pos[:, None] * base ** (-np.arange(0, hd, 2) / hd)[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * c - b * s, a * s + b * c
        return out

    def forward(tok, start, cache):
        """Runs tokens at positions start.. with the K/V of earlier ones in `cache`; returns
        the log-softmax of every new position."""
        n = len(tok)
        pos = np.arange(start, start + n, dtype=np.float64)
        x = emb[np.array(tok)]
        for li, w in enumerate(blk):
            h = rms(x, w["attn_norm"])
            q = rope((h @ w["attn_q"].T).reshape(n, heads, hd), pos)
            k = rope((h @ w["attn_k"].T).reshape(n, kv_heads, hd), pos)
            v = (h @ w["attn_v"].T).reshape(n, kv_heads, hd)
            if li < len(cache):
                k, v = np.concatenate([cache[li][0], k]), np.concatenate([cache[li][1], v])
                cache[li] = (k, v)
            else:
                cache.append((k, v))
            kk, vv = np.repeat(k, heads // kv_heads, 1), np.repeat(v, heads // kv_heads, 1)
            total = start + n
            mask = np.where(np.arange(total)[None, :] <= pos[:, None], 0.0, -np.inf)[None]
            s = np.einsum("qhd,khd->hqk", q, kk) / np.sqrt(hd) + mask
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            x = x + np.einsum("hqk,khd->qhd", p, vv).reshape(n, hidden) @ w["attn_output"].T
            h = rms(x, w["ffn_norm"])
            g, u = h @ w["ffn_gate"].T, h @ w["ffn_up"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w["ffn_down"].T
        logits = rms(x, out_norm) @ emb.T
        lp = logits - logits.max(-1, keepdims=True)
        return lp - np.log(np.exp(lp).sum(-1, keepdims=True))

    lines = [json.loads(line) for line in open(src, encoding="utf-8")]
    meta = {"meta": {"generator": "scripts/reference-fp64.py", "date": str(date.today()),
                     "reference": "gguf-py dequantization, numpy float64 forward, no rounding",
                     "texts_from": src, "model_sha256": lines[0]["meta"].get("model_sha256")}}
    with open(dst, "w", encoding="utf-8") as out:
        out.write(json.dumps(meta, ensure_ascii=False) + "\n")
        for rec in lines[1:]:
            lp = forward(rec["tokens"], 0, [])
            top = []
            for row in lp:
                ids = sorted(range(len(row)), key=lambda i: (-row[i], i))[:20]
                top.append([[int(i), round(float(row[i]), 6)] for i in ids])
            out.write(json.dumps({"name": rec["name"], "tokens": rec["tokens"], "top": top}) + "\n")
            print(f"{rec['name']}: {len(rec['tokens'])} positions", file=sys.stderr)
    greedy_src, greedy_dst = "tests/data/smollm2_greedy.jsonl", "tests/data/smollm2_fp64_greedy.jsonl"
    prompts = [json.loads(line) for line in open(greedy_src, encoding="utf-8")][1:]
    meta["meta"]["texts_from"] = greedy_src
    with open(greedy_dst, "w", encoding="utf-8") as out:
        out.write(json.dumps(meta, ensure_ascii=False) + "\n")
        for rec in prompts:
            cache = []
            lp = forward(rec["prompt_ids"], 0, cache)[-1]
            ids, margins = [], []
            for step in range(len(rec["output_ids"])):
                order = np.argsort(-lp, kind="stable")
                ids.append(int(order[0]))
                margins.append(round(float(lp[order[0]] - lp[order[1]]), 6))
                lp = forward([ids[-1]], len(rec["prompt_ids"]) + step, cache)[-1]
            out.write(json.dumps({"name": rec["name"], "prompt_ids": rec["prompt_ids"],
                                  "output_ids": ids, "margins": margins}) + "\n")
            print(f"{rec['name']}: greedy", file=sys.stderr)

if __name__ == "__main__":
    main()
