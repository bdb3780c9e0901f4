#!/usr/bin/env python3
"""test_stories260k.py -- `ffn run` on the real llama2.c checkpoint
../shared/models/stories260K.bin against an independent PyTorch
implementation of the llama2.c forward written here (float64): RMSNorm eps
1e-5, RoPE on consecutive pairs (2i, 2i+1) with frequency 10000^(-2i/Dh),
grouped KV heads, causal attention, SwiGLU FFN w2(silu(w1 x) * w3 x), the
classifier shared with the embedding.

Checks, for two seeded prompts of token ids:
  1. the logits of every prompt position (`ffn run --dump-logits`) match
     the reference within TOL (absolute, logits are O(10));
  2. greedy generation of 20 tokens matches id for id, and the dumped rows
     of the generated positions (KV-cached steps) match too.
Exit code = number of failed checks."""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.environ.get("FFN_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
FFN = os.environ.get("FFN_BIN", os.path.join(ROOT, "build", "ffn"))
SHARED = os.environ.get("FFN_SHARED", os.path.join(ROOT, "..", "shared"))
MODEL = os.path.join(SHARED, "models", "stories260K.bin")
TOL = 2e-4
STEPS = 20


def load_llama2c(path):
    raw = open(path, "rb").read()
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // n_heads
    w = np.frombuffer(raw, dtype="<f4", offset=28).astype(np.float64)
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        a = torch.from_numpy(w[at:at + n].reshape(shape).copy())
        at += n
        return a

    p = dict(dim=dim, hidden=hidden, L=n_layers, H=n_heads, G=n_kv, V=vocab, T=seq_len, hs=hs)
    p["emb"] = take(vocab, dim)
    p["rms_att"] = take(n_layers, dim)
    p["wq"] = take(n_layers, n_heads * hs, dim)
    p["wk"] = take(n_layers, n_kv * hs, dim)
    p["wv"] = take(n_layers, n_kv * hs, dim)
    p["wo"] = take(n_layers, dim, n_heads * hs)
    p["rms_ffn"] = take(n_layers, dim)
    p["w1"] = take(n_layers, hidden, dim)
    p["w2"] = take(n_layers, dim, hidden)
    p["w3"] = take(n_layers, hidden, dim)
    p["rms_final"] = take(dim)
    take(seq_len, hs // 2)  # freq_cis_real (unused)
    take(seq_len, hs // 2)  # freq_cis_imag (unused)
    p["wcls"] = p["emb"] if shared else take(vocab, dim)
    assert at == w.size, (at, w.size)
    return p


def rmsnorm(x, w):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w


def rope_pairs(x, hs):
    """x (T, n, hs): rotate consecutive pairs (2i, 2i+1) by pos * 10000^(-2i/hs)."""
    T = x.shape[0]
    i = torch.arange(0, hs, 2, dtype=torch.float64)
    freq = 1.0 / (10000.0 ** (i / hs))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]  # (T, hs/2)
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def forward(p, tokens):
    """logits (T, V) of a token sequence, the llama2.c way."""
    T, hs, H, G = len(tokens), p["hs"], p["H"], p["G"]
    x = p["emb"][torch.tensor(tokens)]
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    for l in range(p["L"]):
        xb = rmsnorm(x, p["rms_att"][l])
        q = (xb @ p["wq"][l].T).view(T, H, hs)
        k = (xb @ p["wk"][l].T).view(T, G, hs)
        v = (xb @ p["wv"][l].T).view(T, G, hs)
        q, k = rope_pairs(q, hs), rope_pairs(k, hs)
        rep = H // G
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / (hs ** 0.5) + mask
        att = torch.softmax(att, dim=-1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, H * hs)
        x = x + o @ p["wo"][l].T
        xb = rmsnorm(x, p["rms_ffn"][l])
        h1 = xb @ p["w1"][l].T
        h3 = xb @ p["w3"][l].T
        x = x + (torch.nn.functional.silu(h1) * h3) @ p["w2"][l].T
    x = rmsnorm(x, p["rms_final"])
    return x @ p["wcls"].T


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    import json
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        dt = {"F32": "<f4", "I32": "<i4"}[v["dtype"]]
        out[k] = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=dt).reshape(v["shape"])
    return out


def main():
    if not os.path.exists(MODEL):
        print(f"missing {MODEL}")
        return 1
    p = load_llama2c(MODEL)
    print(f"stories260K: dim {p['dim']} hidden {p['hidden']} layers {p['L']} heads {p['H']} "
          f"kv {p['G']} vocab {p['V']} seq {p['T']}")
    rng = np.random.default_rng(260)
    failures = 0
    tmp = tempfile.mkdtemp()
    for trial, n_prompt in enumerate([1, 13]):
        prompt = [1] + [int(t) for t in rng.integers(3, p["V"], n_prompt - 1)]
        dump = os.path.join(tmp, f"logits{trial}.safetensors")
        cmd = [FFN, "run", MODEL, "--ids", " ".join(map(str, prompt)), "--steps", str(STEPS),
               "--temperature", "0", "--emit", "ids", "--dump-logits", dump, "--threads", "2"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print("ffn run failed:", r.stderr)
            failures += 1
            continue
        got_ids = [int(t) for t in r.stdout.split()]
        # reference greedy generation, recomputing the whole sequence each step
        seq = list(prompt)
        with torch.no_grad():
            for _ in range(STEPS):
                seq.append(int(torch.argmax(forward(p, seq)[-1])))
            ref_logits = forward(p, seq[:-1]).numpy()
        ref_ids = seq[len(prompt):]
        d = read_safetensors(dump)
        lg, toks = d["logits"], d["tokens"]
        rows = len(prompt) + STEPS - 1
        ok_shape = lg.shape == (rows, p["V"]) and list(toks) == seq[:-1]
        err_prompt = float(np.abs(lg[:len(prompt)] - ref_logits[:len(prompt)]).max())
        err_gen = float(np.abs(lg[len(prompt):] - ref_logits[len(prompt):]).max()) if STEPS > 1 else 0.0
        same = got_ids == ref_ids
        print(f"prompt of {len(prompt)} ids: logits rows {lg.shape} (expected ({rows}, {p['V']})) "
              f"{'ok' if ok_shape else 'WRONG'}")
        print(f"  max |logits - ref| prompt positions {err_prompt:.3g}, generated positions "
              f"{err_gen:.3g} (tolerance {TOL:g})")
        print(f"  greedy {STEPS} tokens: ffn {got_ids}")
        print(f"                          ref {ref_ids}  -> {'same' if same else 'DIFFERENT'}")
        failures += (not ok_shape) + (err_prompt > TOL) + (err_gen > TOL) + (not same)
    print("FAIL" if failures else "PASS", f"({failures} failed checks)")
    return failures


if __name__ == "__main__":
    sys.exit(main())
