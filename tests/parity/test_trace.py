#!/usr/bin/env python3
"""test_trace.py -- `ffn trace --json` and `ffn inspect --ablate/--scale
--json` against a direct computation in PyTorch (float64) from the
checkpoint's model.safetensors.

For small models made here (`ffn train` for the config and the vocabulary,
then random weights of a larger scale written over model.safetensors, so
that the subject matters; odd sizes: gated SiLU with a char tokenizer,
dense GELU with an untied head and a word tokenizer, both 3 layers), a
reference forward written here adds noise to chosen embedding
rows, puts one clean state back (resid_post, mlp_out or attn_out of one
layer at one position) and scales FFN neurons (m_i, the input of
down_proj).  The noise is ffn's own: the same splitmix64 + xoshiro256**
stream and Box-Muller draws (include/ffn/rng.h), rounded to float32, with
sd = --noise x the standard deviation of embed_tokens.weight.  Checked:
  p_clean, p_corrupt, p_restore_input: |err| <= 2e-4 (probabilities of a
  float32 model); every indirect effect of the three (L, T) tables:
  max|err| <= 1e-3 * max|ref| (and max|ref| > 1e-3, so the check means
  something); the ablation's next-token probabilities before and after,
  each listed token's other-side probability: |err| <= 2e-4; KL(before ||
  after): |err| <= 1e-3 * KL.
Exit code 0 when everything passes."""
import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffn_testlib import Checker, read_safetensors, run_ffn, write_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)
TOL = 2e-4   # probabilities: absolute
REL = 1e-3   # effects and KL: relative to their own largest value
M64 = (1 << 64) - 1


# ---- ffn's PRNG (include/ffn/rng.h) ------------------------------------------------

class Rng:
    def __init__(self, seed):
        x = seed & M64
        self.s = []
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M64
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
            self.s.append(z ^ (z >> 31))

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & M64

    def next(self):
        s = self.s
        out = (self.rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return out

    def normal(self):
        u1 = ((self.next() >> 11) + 1.0) * 2.0 ** -53
        u2 = (self.next() >> 11) * 2.0 ** -53
        return np.sqrt(-2.0 * np.log(u1)) * np.cos(6.283185307179586 * u2)


# ---- the reference forward -------------------------------------------------------------

def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope_half(x, theta):
    T, Dh = x.shape[0], x.shape[-1]
    half = Dh // 2
    inv = theta ** (-2.0 * torch.arange(half) / Dh)
    ang = torch.arange(T)[:, None] * inv[None, :]
    c = torch.cat([torch.cos(ang), torch.cos(ang)], -1)[:, None, :]
    s = torch.cat([torch.sin(ang), torch.sin(ang)], -1)[:, None, :]
    return x * c + torch.cat([-x[..., half:], x[..., :half]], -1) * s


ACTS = {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu}


def forward(P, cfg, tokens, noise=None, rows=None, restore=None, scale=None):
    """Probabilities after the last token, and the states per layer.
    noise (len(rows), D) is added to the embeddings of rows; restore =
    (kind, l, t, vector) sets one state; scale = {(l, i): factor}."""
    D, H, G = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh, L, eps, theta = D // H, cfg["num_hidden_layers"], cfg["rms_norm_eps"], cfg["rope_theta"]
    gated = cfg["mlp_type"] == "gated"
    act = ACTS[cfg["hidden_act"]]
    T = len(tokens)
    h = P["model.embed_tokens.weight"][torch.tensor(tokens)].clone()
    if noise is not None:
        h[rows] = h[rows] + noise
    mask = torch.full((T, T), float("-inf")).triu(1)
    states = {"resid_post": [], "mlp_out": [], "attn_out": []}

    def put(kind, l, x):
        if restore is not None and restore[0] == kind and restore[1] == l:
            x = x.clone()
            x[restore[2]] = restore[3]
        states[kind].append(x)
        return x

    for l in range(L):
        pre = f"model.layers.{l}"
        a = rmsnorm(h, P[f"{pre}.input_layernorm.weight"], eps)
        q = rope_half((a @ P[f"{pre}.self_attn.q_proj.weight"].T).view(T, H, Dh), theta)
        k = rope_half((a @ P[f"{pre}.self_attn.k_proj.weight"].T).view(T, G, Dh), theta)
        v = (a @ P[f"{pre}.self_attn.v_proj.weight"].T).view(T, G, Dh)
        k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
        att = torch.softmax(torch.einsum("thd,shd->hts", q, k) / Dh ** 0.5 + mask, -1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, D) @ P[f"{pre}.self_attn.o_proj.weight"].T
        h = h + put("attn_out", l, o)
        x = rmsnorm(h, P[f"{pre}.post_attention_layernorm.weight"], eps)
        up = x @ P[f"{pre}.mlp.up_proj.weight"].T
        m = act(x @ P[f"{pre}.mlp.gate_proj.weight"].T) * up if gated else act(up)
        for (sl, i), f in (scale or {}).items():
            if sl == l:
                m[:, i] = m[:, i] * f
        y = m @ P[f"{pre}.mlp.down_proj.weight"].T
        h = h + put("mlp_out", l, y)
        h = put("resid_post", l, h)
    U = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    z = rmsnorm(h[-1], P["model.norm.weight"], eps) @ U.T
    return torch.softmax(z, -1), states


# ---- the checks ------------------------------------------------------------------------------

def check_model(ck, tmp, name, train_args, prompt, subject, edits):
    d = os.path.join(tmp, name)
    run_ffn(["train", "--quiet", "--threads", "1", "--out", d, "--corpus-sentences", "400",
             "--eval-batches", "1", "--batch-size", "4", "--seq-len", "32", "--corpus", "facts"]
            + train_args)
    cfg = json.load(open(os.path.join(d, "config.json")))
    # weights of a larger scale than a few steps of training leave, so that
    # the subject matters to the answer and the effects are far from 0
    gen = np.random.default_rng(len(name))
    raw = {}
    for k, v in read_safetensors(os.path.join(d, "model.safetensors")).items():
        v = np.asarray(v)
        if k.endswith("norm.weight"):
            raw[k] = (1 + 0.2 * gen.standard_normal(v.shape)).astype(np.float32)
        elif k == "model.embed_tokens.weight":
            raw[k] = gen.standard_normal(v.shape).astype(np.float32)
        else:
            raw[k] = (2.5 / np.sqrt(v.shape[-1]) * gen.standard_normal(v.shape)).astype(np.float32)
    write_safetensors(os.path.join(d, "model.safetensors"), raw)
    P = {k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in raw.items()}
    S, noise, seed = 3, 2.5, 11
    r = json.loads(run_ffn(["trace", d, "--prompt", prompt, "--subject", subject, "--samples", S,
                            "--noise", noise, "--seed", seed, "--json", "--threads", "1"]).stdout)
    tokens, b, e = r["token_ids"], r["subject_begin"], r["subject_end"]
    L, T, D = cfg["num_hidden_layers"], len(tokens), cfg["hidden_size"]
    print(f"== {name}: D={D} F={cfg['intermediate_size']} V={cfg['vocab_size']} L={L} "
          f"mlp={cfg['mlp_type']}/{cfg['hidden_act']} T={T} subject [{b}, {e}) S={S}")
    target = r["target_id"]
    emb = np.asarray(raw["model.embed_tokens.weight"], dtype=np.float64).ravel()
    mean = emb.sum() / emb.size
    sd = noise * np.sqrt(((emb - mean) ** 2).sum() / emb.size)
    ck.close(f"{name}: noise sd", [r["noise_std"]], [sd], 1e-5)
    rng = Rng(seed)
    draws = np.array([rng.normal() for _ in range(S * (e - b) * D)])
    draws = (sd * draws).astype(np.float32).astype(np.float64).reshape(S, e - b, D)
    rows = list(range(b, e))
    p0, clean = forward(P, cfg, tokens)
    pc = [forward(P, cfg, tokens, torch.from_numpy(draws[s]), rows)[0][target] for s in range(S)]
    p_corrupt = float(sum(pc)) / S
    ck.close(f"{name}: p_clean", [r["p_clean"]], [float(p0[target])], TOL, abs_floor=1.0)
    ck.close(f"{name}: p_corrupt", [r["p_corrupt"]], [p_corrupt], TOL, abs_floor=1.0)
    ck.close(f"{name}: p_restore_input = p_clean", [r["p_restore_input"]], [float(p0[target])], TOL,
             abs_floor=1.0)
    for kind in ("resid_post", "mlp_out", "attn_out"):
        want = np.zeros((L, T))
        for l in range(L):
            for t in range(T):
                acc = 0.0
                for s in range(S):
                    p = forward(P, cfg, tokens, torch.from_numpy(draws[s]), rows,
                                restore=(kind, l, t, clean[kind][l][t]))[0][target]
                    acc += float(p) - float(pc[s])
                want[l, t] = acc / S
        ck.close(f"{name}: {kind} effects (L x T = {L} x {T})", r[kind], want, REL, abs_floor=1e-6)
        ck.true(f"{name}: {kind}: the largest effect {np.abs(want).max():.3e} > 1e-3 (the check means something)",
                np.abs(want).max() > 1e-3)

    # ablation and scaling: ffn inspect --json
    spec_a = ",".join(f"{l}:{i}" for l, i, f in edits if f == 0)
    spec_s = ",".join(f"{l}:{i}={f}" for l, i, f in edits if f != 0)
    args = ["inspect", d, "--ids", " ".join(map(str, tokens)), "--json", "--threads", "1"]
    if spec_a:
        args += ["--ablate", spec_a]
    if spec_s:
        args += ["--scale", spec_s]
    a = json.loads(run_ffn(args).stdout)
    pa, _ = forward(P, cfg, tokens, scale={(l, i): f for l, i, f in edits})
    kl = float((p0 * (torch.log(p0) - torch.log(pa))).sum())
    got, want = [], []
    for t in a["before"]:
        got += [t["p"], t["p_after"]]
        want += [float(p0[t["id"]]), float(pa[t["id"]])]
    for t in a["after"]:
        got += [t["p"], t["p_before"]]
        want += [float(pa[t["id"]]), float(p0[t["id"]])]
    ck.close(f"{name}: probabilities before/after {len(edits)} edits", got, want, TOL, abs_floor=1.0)
    ck.close(f"{name}: KL(before || after) = {kl:.3e}", [a["kl"]], [kl], REL)
    ck.true(f"{name}: the edits change the distribution (KL {kl:.2e} > 1e-7)", kl > 1e-7)
    top = sorted(range(len(p0)), key=lambda v: (-float(p0[v]), v))[:len(a["before"])]
    ck.true(f"{name}: listed tokens are the reference's most probable", [t["id"] for t in a["before"]] == top)


def main():
    ck = Checker("test_trace")
    with tempfile.TemporaryDirectory() as tmp:
        small = ["--num-hidden-layers", "3", "--num-attention-heads", "4", "--num-key-value-heads", "2"]
        check_model(ck, tmp, "gated-silu-char",
                    ["--steps", "25", "--hidden-size", "24", "--intermediate-size", "45",
                     "--tokenizer", "char", "--seed", "3", "--lr", "0.01"] + small,
                    "In this story, Sevelle lives in", "Sevelle", [(0, 3, 0.0), (2, 44, 0.0), (1, 7, 3.5)])
        check_model(ck, tmp, "dense-gelu-word-untied",
                    ["--steps", "25", "--hidden-size", "40", "--intermediate-size", "33",
                     "--mlp-type", "dense", "--hidden-act", "gelu", "--tie-word-embeddings", "0",
                     "--tokenizer", "word", "--seed", "4", "--lr", "0.01"] + small,
                    "As everyone knows, the capital of Alavia is", "Alavia", [(1, 0, 0.0), (2, 32, -2.0)])
    print(f"test_trace: {ck.count} checks, {len(ck.failures)} failed")
    for f in ck.failures:
        print("  FAILED:", f)
    sys.exit(1 if ck.failures else 0)


if __name__ == "__main__":
    main()
