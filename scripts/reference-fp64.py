#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# An exact reference for the SmolLM2 forward pass: the GGUF's weights dequantized by gguf-py
# (llama.cpp's own Python package, from PyPI) and a plain numpy Llama forward in float64. It
# reads the texts of tests/data/smollm2_logprobs.jsonl (llama.cpp's teacher-forced run) and writes
# tests/data/smollm2_fp64_logprobs.jsonl with the same records: for each position the 20 most
# likely next tokens and their log-probabilities, computed in double. llama.cpp rounds its
# activations to 8 bits for the quantized products (and q and the softmax to fp16 in
# attention); this reference rounds nothing, so it tells how much of a difference to llama.cpp
# is numerics. Not run by CI (tests only read the committed file).
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

    lines = [json.loads(line) for line in open(src, encoding="utf-8")]
    meta = {"meta": {"generator": "scripts/reference-fp64.py", "date": str(date.today()),
                     "reference": "gguf-py dequantization, numpy float64 forward, no rounding",
                     "texts_from": src, "model_sha256": lines[0]["meta"].get("model_sha256")}}
    with open(dst, "w", encoding="utf-8") as out:
        out.write(json.dumps(meta, ensure_ascii=False) + "\n")
        for rec in lines[1:]:
            tok = np.array(rec["tokens"])
            n = len(tok)
            pos = np.arange(n, dtype=np.float64)
            x = emb[tok]
            mask = np.triu(np.full((n, n), -np.inf), 1)[None]
            for w in blk:
                h = rms(x, w["attn_norm"])
                q = rope((h @ w["attn_q"].T).reshape(n, heads, hd), pos)
                k = rope((h @ w["attn_k"].T).reshape(n, kv_heads, hd), pos)
                v = (h @ w["attn_v"].T).reshape(n, kv_heads, hd)
                k, v = np.repeat(k, heads // kv_heads, 1), np.repeat(v, heads // kv_heads, 1)
                s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
                p = np.exp(s - s.max(-1, keepdims=True))
                p /= p.sum(-1, keepdims=True)
                x = x + np.einsum("hqk,khd->qhd", p, v).reshape(n, hidden) @ w["attn_output"].T
                h = rms(x, w["ffn_norm"])
                g, u = h @ w["ffn_gate"].T, h @ w["ffn_up"].T
                x = x + (g / (1 + np.exp(-g)) * u) @ w["ffn_down"].T
            logits = rms(x, out_norm) @ emb.T
            lp = logits - logits.max(-1, keepdims=True)
            lp -= np.log(np.exp(lp).sum(-1, keepdims=True))
            top = []
            for row in lp:
                ids = sorted(range(len(row)), key=lambda i: (-row[i], i))[:20]
                top.append([[int(i), round(float(row[i]), 6)] for i in ids])
            out.write(json.dumps({"name": rec["name"], "tokens": rec["tokens"], "top": top}) + "\n")
            print(f"{rec['name']}: {n} positions", file=sys.stderr)


if __name__ == "__main__":
    main()
