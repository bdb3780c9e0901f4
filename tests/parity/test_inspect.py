#!/usr/bin/env python3
"""test_inspect.py -- `ffn inspect MODEL --json` against a direct computation
in PyTorch (float64) from the checkpoint's model.safetensors.

For small models trained here with `ffn train` (odd sizes; gated SiLU with a
tied head, dense GELU with an untied head and biases-free, MoE with a shared
expert), a reference forward written here captures every layer's FFN input
x, then computes every neuron: gate_pre = gate_i.x, gate = act(gate_pre),
up = up_i.x, m_i = gate*up (dense: act(up)), the routing of MoE layers, and
the logit lens of each value vector, lens_i = U.(g * v_i) with
g = model.norm.weight and U the output embedding.  Checked per listed
neuron and token:
  gate, up, product, router weight: |err| <= 1e-4 * (1 + |ref|)
  the listed neurons are the top-K by |w*m_i| (up to near-ties of 1e-5)
  explained (norm ratio) and cosine of their partial sum: |err| <= 1e-4
  promoted token ids are the top-P of the reference lens (near-ties 1e-5)
  and their logit-lens values: |err| <= 1e-5 * (1 + max|lens|)
  MoE: the experts each token went to and their weights.
Exit code 0 when everything passes."""
import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffn_testlib import Checker, read_safetensors, run_ffn  # noqa: E402

torch.set_default_dtype(torch.float64)
TOL = 1e-4
TIE = 1e-5


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope_half(x, theta):
    """x (T, nh, Dh): Hugging Face rotate_half at positions 0..T-1."""
    T, Dh = x.shape[0], x.shape[-1]
    half = Dh // 2
    inv = theta ** (-2.0 * torch.arange(half) / Dh)
    ang = torch.arange(T)[:, None] * inv[None, :]
    c = torch.cat([torch.cos(ang), torch.cos(ang)], -1)[:, None, :]
    s = torch.cat([torch.sin(ang), torch.sin(ang)], -1)[:, None, :]
    return x * c + torch.cat([-x[..., half:], x[..., :half]], -1) * s


ACTS = {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
        "relu": torch.relu, "linear": lambda t: t,
        "gelu_pytorch_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh"),
        "sigmoid": torch.sigmoid}


def neurons(P, pre, x, gated, bias, act):
    """x (T, D) -> gate_pre, gate, up, m (T, F) of the FFN at `pre`."""
    def lin(name):
        y = x @ P[f"{pre}.{name}.weight"].T
        return y + P[f"{pre}.{name}.bias"] if bias else y
    up = lin("up_proj")
    gp = lin("gate_proj") if gated else up
    g = act(gp)
    return gp, g, up, (g * up if gated else g)


def reference(P, cfg, tokens):
    """Per layer: x (T, D) the FFN input, y (T, D) the FFN output, and for
    MoE layers the routing (ids, weights) (T, K)."""
    D, H, G = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh, L, eps, theta = D // H, cfg["num_hidden_layers"], cfg["rms_norm_eps"], cfg["rope_theta"]
    assert cfg.get("rope_style", "half") == "half"
    gated, bias = cfg["mlp_type"] == "gated", cfg["mlp_bias"]
    act = ACTS[cfg["hidden_act"]]
    T = len(tokens)
    h = P["model.embed_tokens.weight"][torch.tensor(tokens)]
    mask = torch.full((T, T), float("-inf")).triu(1)
    out = []
    for l in range(L):
        pre = f"model.layers.{l}"
        a = rmsnorm(h, P[f"{pre}.input_layernorm.weight"], eps)
        q = rope_half((a @ P[f"{pre}.self_attn.q_proj.weight"].T).view(T, H, Dh), theta)
        k = rope_half((a @ P[f"{pre}.self_attn.k_proj.weight"].T).view(T, G, Dh), theta)
        v = (a @ P[f"{pre}.self_attn.v_proj.weight"].T).view(T, G, Dh)
        k, v = k.repeat_interleave(H // G, 1), v.repeat_interleave(H // G, 1)
        att = torch.softmax(torch.einsum("thd,shd->hts", q, k) / Dh ** 0.5 + mask, -1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, D)
        h = h + o @ P[f"{pre}.self_attn.o_proj.weight"].T
        x = rmsnorm(h, P[f"{pre}.post_attention_layernorm.weight"], eps)
        is_moe = cfg["num_experts"] > 0 and (l + 1) % cfg["decoder_sparse_step"] == 0
        rec = {"x": x, "moe": is_moe}
        if is_moe:
            E, K = cfg["num_experts"], cfg["num_experts_per_tok"]
            p = torch.softmax(x @ P[f"{pre}.mlp.gate.weight"].T, -1)
            topv, topi = p.topk(K, dim=-1)
            w = topv / (topv.sum(-1, keepdim=True) + 1e-20) if cfg["norm_topk_prob"] else topv
            y = torch.zeros_like(x)
            for t in range(T):
                for j in range(K):
                    e = int(topi[t, j])
                    m = neurons(P, f"{pre}.mlp.experts.{e}", x[t:t + 1], gated, bias, act)[3]
                    y[t] += w[t, j] * (m @ P[f"{pre}.mlp.experts.{e}.down_proj.weight"].T)[0]
            if cfg.get("shared_expert_intermediate_size", 0) > 0:
                sg = torch.sigmoid(x @ P[f"{pre}.mlp.shared_expert_gate.weight"].T)
                m = neurons(P, f"{pre}.mlp.shared_expert", x, gated, bias, act)[3]
                y = y + sg * (m @ P[f"{pre}.mlp.shared_expert.down_proj.weight"].T)
                rec["shared_gate"] = sg[:, 0]
            rec.update(ids=topi, w=w)
        else:
            gp, g, up, m = neurons(P, f"{pre}.mlp", x, gated, bias, act)
            y = m @ P[f"{pre}.mlp.down_proj.weight"].T
        rec["y"] = y
        out.append(rec)
        h = h + y
    return out


def ffn_prefix(l, expert):
    if expert == -1:
        return f"model.layers.{l}.mlp"
    if expert == -2:
        return f"model.layers.{l}.mlp.shared_expert"
    return f"model.layers.{l}.mlp.experts.{expert}"


def check_model(ck, tmp, name, train_args, prompt, top, promoted):
    d = os.path.join(tmp, name)
    run_ffn(["train", "--quiet", "--threads", "1", "--out", d, "--corpus-sentences", "300",
             "--eval-batches", "1", "--batch-size", "4", "--seq-len", "24"] + train_args)
    cfg = json.load(open(os.path.join(d, "config.json")))
    P = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in read_safetensors(os.path.join(d, "model.safetensors")).items()}
    res = json.loads(run_ffn(["inspect", d, "--prompt", prompt, "--json", "--top", top,
                              "--promoted", promoted, "--threads", "1"]).stdout)
    tokens = [t["id"] for t in res["tokens"]]
    print(f"== {name}: D={cfg['hidden_size']} F={cfg['intermediate_size']} "
          f"V={cfg['vocab_size']} L={cfg['num_hidden_layers']} mlp={cfg['mlp_type']}/"
          f"{cfg['hidden_act']} E={cfg['num_experts']} tied={cfg['tie_word_embeddings']} "
          f"T={len(tokens)} top={top} promoted={promoted}")
    ref = reference(P, cfg, tokens)
    gated, bias = cfg["mlp_type"] == "gated", cfg["mlp_bias"]
    act = ACTS[cfg["hidden_act"]]
    U = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    g = P["model.norm.weight"]
    got = {k: [] for k in ("gate", "up", "product", "weight", "explained", "cosine", "lens",
                           "route_w")}
    want = {k: [] for k in got}
    rank_ok, ids_ok, route_ok = True, True, True
    for layer in res["layers"]:
        l = layer["layer"]
        r = ref[l]
        for tk in layer["tokens"]:
            t = tk["position"]
            x = r["x"][t:t + 1]
            # every candidate neuron of this token, with its weight
            cands = []
            if r["moe"]:
                ids = [int(e) for e in r["ids"][t]]
                ws = [float(w) for w in r["w"][t]]
                route_ok &= [e["expert"] for e in tk["experts"]] == ids
                got["route_w"] += [e["weight"] for e in tk["experts"]]
                want["route_w"] += ws
                experts = list(zip(ids, ws))
                if "shared_gate" in r:
                    experts.append((-2, float(r["shared_gate"][t])))
            else:
                experts = [(-1, 1.0)]
            for e, w in experts:
                gp, ga, up, m = (a[0] for a in neurons(P, ffn_prefix(l, e), x, gated, bias, act))
                for i in range(len(m)):
                    cands.append((abs(w * float(m[i])), e, i, float(ga[i]), float(up[i]),
                                  float(m[i]), w))
            mags = sorted((c[0] for c in cands), reverse=True)
            lookup = {(c[1], c[2]): c for c in cands}
            partial = torch.zeros(cfg["hidden_size"])
            for j, nu in enumerate(tk["neurons"]):
                c = lookup[(nu["expert"], nu["index"])]
                # a listed neuron ranks among the top K (near-ties allowed)
                rank_ok &= c[0] >= mags[min(len(tk["neurons"]), len(mags)) - 1] - TIE
                got["gate"].append(nu["gate"]), want["gate"].append(c[3])
                got["up"].append(nu["up"]), want["up"].append(c[4])
                got["product"].append(nu["product"]), want["product"].append(c[5])
                got["weight"].append(nu["weight"]), want["weight"].append(c[6])
                v = P[f"{ffn_prefix(l, nu['expert'])}.down_proj.weight"][:, nu["index"]]
                partial += c[6] * c[5] * v
                lens = U @ (g * v)
                order = torch.sort(lens, descending=True).values
                for p, pr in enumerate(nu["promoted"]):
                    ids_ok &= float(lens[pr["id"]]) >= float(order[p]) - TIE
                    got["lens"].append(pr["logit"]), want["lens"].append(float(lens[pr["id"]]))
            yb = r["y"][t]  # no biases in these models: y - bias = y
            on, pn = float(yb.norm()), float(partial.norm())
            got["explained"].append(tk["explained"]), want["explained"].append(pn / on)
            got["cosine"].append(tk["cosine"])
            want["cosine"].append(float(yb @ partial) / (on * pn))
    for k in ("gate", "up", "product", "weight", "explained", "cosine"):
        ck.close(f"{name}: {k} ({len(got[k])} values)", got[k], want[k], TOL, abs_floor=1.0)
    ck.close(f"{name}: promoted logit-lens values", got["lens"], want["lens"], TIE, abs_floor=1.0)
    if got["route_w"]:
        ck.close(f"{name}: router weights", got["route_w"], want["route_w"], TOL, abs_floor=1.0)
        ck.true(f"{name}: experts each token went to equal the reference", route_ok)
    ck.true(f"{name}: listed neurons are the top {top} by |w*m_i| (near-ties {TIE})", rank_ok)
    ck.true(f"{name}: promoted ids are the top {promoted} of U.(g*v_i) (near-ties {TIE})", ids_ok)


def main():
    ck = Checker("test_inspect")
    with tempfile.TemporaryDirectory() as tmp:
        small = ["--num-hidden-layers", "2", "--num-attention-heads", "4",
                 "--num-key-value-heads", "2"]
        check_model(ck, tmp, "gated-silu-tied",
                    ["--steps", "20", "--hidden-size", "40", "--intermediate-size", "77",
                     "--tokenizer", "char", "--seed", "5"] + small,
                    "Mary gave John the apple because he was hungry.", 7, 4)
        check_model(ck, tmp, "dense-gelu-untied",
                    ["--steps", "15", "--hidden-size", "24", "--intermediate-size", "53",
                     "--mlp-type", "dense", "--hidden-act", "gelu", "--tie-word-embeddings", "0",
                     "--tokenizer", "word", "--seed", "6"] + small,
                    "Why did Mary give John the red apple? Because she had too many.", 5, 3)
        check_model(ck, tmp, "moe-gated-E3",
                    ["--steps", "15", "--hidden-size", "32", "--intermediate-size", "31",
                     "--mlp-type", "moe", "--num-experts", "3", "--num-experts-per-tok", "2",
                     "--moe-intermediate-size", "21", "--tokenizer", "char", "--seed", "7"] + small,
                    "She gave him a pear.", 6, 3)
    print(f"test_inspect: {ck.count} checks, {len(ck.failures)} failed")
    for f in ck.failures:
        print("  FAILED:", f)
    sys.exit(1 if ck.failures else 0)


if __name__ == "__main__":
    main()
