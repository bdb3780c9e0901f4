#!/usr/bin/env python3
"""test_model.py -- the whole decoder (src/nn/model.c) against a PyTorch
reference written here (Llama architecture: RMSNorm, RoPE in both
conventions, causal GQA attention, SwiGLU / dense / MoE feed-forward, tied
or untied head, cross-entropy with ignore index, MoE aux and z losses).

The C side is tests/parity/model_driver.c, compiled here against
build/libffn.a; the two sides exchange raw float32/int32 files.  Random
weights (std 0.2, norms around 1) make every path carry a signal.  The
reference runs in float64; C runs in float32.  Checked per case:
  logits (B, T, V), the loss (total, and eval_loss equal to it), every
  parameter's gradient, and KV-cache decoding (one token at a time, and a
  prefill then steps) against the full-sequence logits; and the taps
  (include/ffn/tap.h): layer 0's attn_out, mlp_in, m (MoE: the routed
  experts' columns e·Fe + i, 0 elsewhere) and mlp_out and the last layer's
  resid_post against the reference's own intermediate values, the tapped
  forward's logits bitwise equal to the untapped ones, and two
  interventions replayed in the reference: m_3 of layer 0 zeroed, and a
  steering vector added to layer 0's resid_post.
Tolerances (measured errors are ~50x smaller): |logits| err <= 2e-5, loss
rel err <= 1e-5, per-tensor gradient err <= 1e-7 + 1e-4 * max|grad_ref|,
KV-cache logits err <= 2e-5, taps and intervened logits err <= 2e-5.
Exit code: 0 when all pass."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

TOL_LOGITS = 2e-5
TOL_LOSS_REL = 1e-5
TOL_GRAD_ABS, TOL_GRAD_REL = 1e-7, 1e-4
TOL_CACHE = 2e-5
TOL_TAP = 2e-5


def build_driver(tmp):
    exe = os.path.join(tmp, "model_driver")
    cmd = ["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-fopenmp", "-I" + os.path.join(ROOT, "include"),
           os.path.join(ROOT, "tests/parity/model_driver.c"), os.path.join(ROOT, "build/libffn.a"),
           "-ldnnl", "-fopenmp", "-lm", "-lpthread", "-lpcre2-8", "-o", exe]
    subprocess.run(cmd, check=True)
    return exe


# ---- the reference ---------------------------------------------------------

def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, theta, style):
    """x (B, T, nh, Dh) at positions 0..T-1."""
    T, Dh = x.shape[1], x.shape[-1]
    half = Dh // 2
    inv = theta ** (-2.0 * torch.arange(half) / Dh)
    ang = torch.arange(T)[:, None] * inv[None, :]
    c, s = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
    if style == "half":  # Hugging Face, literally: q·cos + rotate_half(q)·sin
        cos, sin = torch.cat([c, c], -1), torch.cat([s, s], -1)
        rotate_half = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotate_half * sin
    # llama2.c run.c: each consecutive pair (v0, v1) -> (v0·fcr − v1·fci, v0·fci + v1·fcr)
    out = x.clone()
    for j in range(half):
        v0, v1 = x[..., 2 * j], x[..., 2 * j + 1]
        fcr, fci = c[..., j], s[..., j]
        out[..., 2 * j] = v0 * fcr - v1 * fci
        out[..., 2 * j + 1] = v0 * fci + v1 * fcr
    return out


def act_fn(name):
    return {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu,
            "relu": torch.relu, "linear": lambda t: t}[name]


def ffn(P, pre, x, gated, bias, act, hook=None):
    """hook(h) -> h sees (and may replace) m, the input of down_proj."""
    def lin(name, t):
        y = t @ P[f"{pre}.{name}.weight"].T
        return y + P[f"{pre}.{name}.bias"] if bias else y
    h = act(lin("gate_proj", x)) * lin("up_proj", x) if gated else act(lin("up_proj", x))
    if hook is not None:
        h = hook(h)
    return lin("down_proj", h)


def moe(P, pre, x, cfg, act, gated, hook=None):
    """x (N, D) -> y, aux, z following include/ffn/moe.h (softmax scoring).
    hook(e, rows, h) -> h sees expert e's m on the rows routed to it."""
    E, K = cfg["num_experts"], cfg["num_experts_per_tok"]
    logits = x @ P[f"{pre}.gate.weight"].T
    p = torch.softmax(logits, -1)
    topv, topi = p.topk(K, dim=-1)
    w = topv / (topv.sum(-1, keepdim=True) + 1e-20) if cfg["norm_topk_prob"] else topv
    y = torch.zeros_like(x)
    for e in range(E):
        for j in range(K):
            sel = topi[:, j] == e
            if sel.any():
                eh = None if hook is None else (lambda h, e=e, sel=sel: hook(e, sel, h))
                ye = ffn(P, f"{pre}.experts.{e}", x[sel], gated, cfg["mlp_bias"], act, eh)
                y = y.index_add(0, sel.nonzero()[:, 0], w[sel, j, None] * ye)
    if cfg.get("shared_expert_intermediate_size", 0) > 0:
        g = torch.sigmoid(x @ P[f"{pre}.shared_expert_gate.weight"].T)
        y = y + g * ffn(P, f"{pre}.shared_expert", x, gated, cfg["mlp_bias"], act)
    N = x.shape[0]
    f = torch.nn.functional.one_hot(topi, E).sum((0, 1)).double() / (N * K)
    aux = E * (f.detach() * p.mean(0)).sum()
    z = (torch.logsumexp(logits, -1) ** 2).mean()
    return y, aux, z


def reference(P, cfg, tokens, targets, cap=None, zero=None, steer=None):
    """cap: a dict that receives layer 0's attn_out, mlp_in, m, mlp_out and
    the last layer's resid_post as (B·T, W); zero: neuron i of layer 0's m
    set to 0; steer: a vector added to layer 0's resid_post."""
    D, H, G = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh, L, V = D // H, cfg["num_hidden_layers"], cfg["vocab_size"]
    eps, theta, style = cfg["rms_norm_eps"], cfg["rope_theta"], cfg["rope_style"]
    act, gated = act_fn(cfg["hidden_act"]), cfg["mlp_type"] == "gated"
    B, T = tokens.shape
    x = P["model.embed_tokens.weight"][tokens]
    aux_sum, z_sum = 0.0, 0.0
    mask = torch.full((T, T), float("-inf")).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}"
        h = rmsnorm(x, P[f"{pre}.input_layernorm.weight"], eps)

        def proj(name, t):
            y = t @ P[f"{pre}.self_attn.{name}.weight"].T
            return y + P[f"{pre}.self_attn.{name}.bias"] if cfg["attention_bias"] else y
        q = rope(proj("q_proj", h).view(B, T, H, Dh), theta, style).transpose(1, 2)
        k = rope(proj("k_proj", h).view(B, T, G, Dh), theta, style).transpose(1, 2)
        v = proj("v_proj", h).view(B, T, G, Dh).transpose(1, 2)
        k = k.repeat_interleave(H // G, dim=1)
        v = v.repeat_interleave(H // G, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / Dh ** 0.5 + mask, -1) @ v
        ao = att.transpose(1, 2).reshape(B, T, H * Dh) @ P[f"{pre}.self_attn.o_proj.weight"].T
        x = x + ao
        tap = cap is not None and l == 0
        if tap:
            cap["layers.0.attn_out"] = ao.reshape(B * T, D)
        freq = cfg["decoder_sparse_step"]
        is_moe = cfg["num_experts"] > 0 and (l + 1) % freq == 0
        if is_moe or cfg["mlp_type"] != "none":
            h2 = rmsnorm(x, P[f"{pre}.post_attention_layernorm.weight"], eps)
            if tap:
                cap["layers.0.mlp_in"] = h2.reshape(B * T, D)
            if is_moe:
                Fe, E = cfg["moe_intermediate_size"], cfg["num_experts"]
                mcap = torch.zeros(B * T, E * Fe)

                def ehook(e, sel, h, l=l, Fe=Fe, mcap=mcap):
                    if l == 0 and zero is not None and zero // Fe == e:
                        h = h.clone()
                        h[:, zero % Fe] = 0.0
                    if l == 0:
                        mcap[sel.nonzero()[:, 0], e * Fe:(e + 1) * Fe] = h.detach()
                    return h
                y, aux, z = moe(P, f"{pre}.mlp", h2.reshape(B * T, D), cfg, act, gated, ehook)
                aux_sum, z_sum = aux_sum + aux, z_sum + z
                y = y.view(B, T, D)
                if tap:
                    cap["layers.0.m"] = mcap
            else:
                def dhook(h, l=l):
                    if l == 0 and zero is not None:
                        h = h.clone()
                        h[..., zero] = 0.0
                    if tap:
                        cap["layers.0.m"] = h.reshape(B * T, -1)
                    return h
                y = ffn(P, f"{pre}.mlp", h2, gated, cfg["mlp_bias"], act, dhook)
            if tap:
                cap["layers.0.mlp_out"] = y.reshape(B * T, D)
            x = x + y
        if l == 0 and steer is not None:
            x = x + steer
        if cap is not None and l == L - 1:
            cap[f"layers.{L - 1}.resid_post"] = x.reshape(B * T, D)
    x = rmsnorm(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    logits = x @ head.T
    ce = torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)
    total = ce
    if cfg["num_experts"] > 0:
        total = ce + cfg["router_aux_loss_coef"] * aux_sum + cfg["router_z_loss_coef"] * z_sum
    return logits, total


# ---- one case ------------------------------------------------------------------

def run_case(exe, tmp, name, cfg, B, T, seed, threads=2):
    print(f"== {name}: B={B} T={T} D={cfg['hidden_size']} H={cfg['num_attention_heads']} "
          f"G={cfg['num_key_value_heads']} L={cfg['num_hidden_layers']} V={cfg['vocab_size']} "
          f"mlp={cfg['mlp_type']}/{cfg['hidden_act']} E={cfg['num_experts']} "
          f"rope={cfg['rope_style']} tied={cfg['tie_word_embeddings']}")
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    cpath = os.path.join(d, "config.json")
    with open(cpath, "w") as f:
        json.dump(cfg, f)
    table = subprocess.run([exe, "table", cpath], check=True, capture_output=True, text=True).stdout
    rng = np.random.default_rng(seed)
    entries, n_params = [], 0
    for line in table.splitlines():
        nm, off, numel, r, c = line.split()
        entries.append((nm, int(off), int(numel), int(r), int(c)))
        n_params = max(n_params, int(off) + int(numel))
    flat = np.zeros(n_params, dtype=np.float32)
    for nm, off, numel, r, c in entries:
        if nm.endswith("norm.weight"):
            vals = 1.0 + 0.2 * rng.standard_normal(numel)
        else:
            vals = 0.2 * rng.standard_normal(numel)
        flat[off:off + numel] = vals
    V = cfg["vocab_size"]
    tokens = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets[rng.random((B, T)) < 0.2] = -1
    flat.tofile(os.path.join(d, "params.f32"))
    tokens.tofile(os.path.join(d, "tokens.i32"))
    targets.tofile(os.path.join(d, "targets.i32"))
    subprocess.run([exe, "run", cpath, os.path.join(d, "params.f32"), os.path.join(d, "tokens.i32"),
                    os.path.join(d, "targets.i32"), str(B), str(T), d, str(threads)], check=True)

    P = {}
    for nm, off, numel, r, c in entries:
        t = torch.tensor(flat[off:off + numel].astype(np.float64))
        P[nm] = (t.view(r, c) if c > 1 else t.view(r)).requires_grad_(True)
    logits, total = reference(P, cfg, torch.tensor(tokens, dtype=torch.long),
                              torch.tensor(targets, dtype=torch.long))
    total.backward()

    ok = True
    c_logits = np.fromfile(os.path.join(d, "logits.f32"), dtype=np.float32).reshape(B, T, V)
    err = np.abs(c_logits - logits.detach().numpy()).max()
    print(f"  logits         max err {err:.3e} (tol {TOL_LOGITS:.0e})")
    ok &= err <= TOL_LOGITS
    vals = open(os.path.join(d, "loss.txt")).read().split()
    c_total, c_eval = float(vals[0]), float(vals[5])
    rel = abs(c_total - total.item()) / abs(total.item())
    rel_eval = abs(c_eval - c_total) / abs(c_total)
    print(f"  loss           C {c_total:.8f} torch {total.item():.8f} rel err {rel:.3e} "
          f"(tol {TOL_LOSS_REL:.0e}); eval_loss rel diff {rel_eval:.3e}")
    ok &= rel <= TOL_LOSS_REL and rel_eval <= TOL_LOSS_REL
    grads = np.fromfile(os.path.join(d, "grads.f32"), dtype=np.float32)
    worst = (0.0, "")
    for nm, off, numel, r, c in entries:
        g = P[nm].grad  # None: the tensor took no part (an expert no token chose)
        g_ref = np.zeros(numel) if g is None else g.numpy().reshape(-1)
        g_c = grads[off:off + numel]
        e = np.abs(g_c - g_ref).max()
        tol = TOL_GRAD_ABS + TOL_GRAD_REL * np.abs(g_ref).max()
        if e > tol:
            print(f"  FAIL grad {nm}: max err {e:.3e} > tol {tol:.3e} (max|ref| {np.abs(g_ref).max():.3e})")
            ok = False
        ratio = e / tol
        if ratio > worst[0]:
            worst = (ratio, f"{nm} err {e:.3e} tol {tol:.3e}")
    print(f"  grads          {len(entries)} tensors, worst err/tol {worst[0]:.3f} ({worst[1]})")
    steps = np.fromfile(os.path.join(d, "steps.f32"), dtype=np.float32).reshape(T, V)
    prefill = np.fromfile(os.path.join(d, "prefill.f32"), dtype=np.float32).reshape(T, V)
    e1 = np.abs(steps - c_logits[0]).max()
    half = max(T // 2, 1)
    e2 = np.abs(prefill[half - 1:] - c_logits[0, half - 1:]).max()
    e3 = np.abs(steps - logits.detach().numpy()[0]).max()
    print(f"  KV cache       steps vs full {e1:.3e}, prefill+steps vs full {e2:.3e}, "
          f"steps vs torch {e3:.3e} (tol {TOL_CACHE:.0e})")
    ok &= max(e1, e2, e3) <= TOL_CACHE
    ok &= check_taps(d, P, cfg, tokens, targets, c_logits)
    print("  ok" if ok else "  FAILED")
    return ok


def check_taps(d, P, cfg, tokens, targets, c_logits):
    B, T = tokens.shape
    V, D, L = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    tk, tg = torch.tensor(tokens, dtype=torch.long), torch.tensor(targets, dtype=torch.long)
    ok = True
    tapped = np.fromfile(os.path.join(d, "tap_logits.f32"), dtype=np.float32).reshape(B, T, V)
    same = np.array_equal(tapped, c_logits)
    print(f"  taps           tapped forward's logits bitwise equal to untapped: {same}")
    ok &= same
    cap = {}
    with torch.no_grad():
        reference(P, cfg, tk, tg, cap=cap)
        line = []
        for name, ref in cap.items():
            path = os.path.join(d, f"tap_{name}.f32")
            if not os.path.exists(path):
                print(f"  FAIL tap {name}: not written")
                ok = False
                continue
            c = np.fromfile(path, dtype=np.float32).reshape(ref.shape)
            e = np.abs(c - ref.numpy()).max()
            line.append(f"{name.split('.', 2)[2]}@{name.split('.')[1]} {e:.2e}")
            ok &= e <= TOL_TAP
        print(f"  taps           max err vs torch: {', '.join(line)} (tol {TOL_TAP:.0e})")
        steer = torch.tensor([np.float32(0.5 * np.sin(np.float32(i + 1))) for i in range(D)],
                             dtype=torch.float64)
        zpath = os.path.join(d, "zero_logits.f32")
        if os.path.exists(zpath):
            ref, _ = reference(P, cfg, tk, tg, zero=3)
            c = np.fromfile(zpath, dtype=np.float32).reshape(B, T, V)
            e = np.abs(c - ref.numpy()).max()
            moved = np.abs(c - c_logits).max()
            print(f"  intervention   m_3 of layer 0 zeroed: max err {e:.3e} (logits moved {moved:.3e})")
            ok &= e <= TOL_TAP and moved > 10 * TOL_TAP
        ref, _ = reference(P, cfg, tk, tg, steer=steer)
        c = np.fromfile(os.path.join(d, "steer_logits.f32"), dtype=np.float32).reshape(B, T, V)
        e = np.abs(c - ref.numpy()).max()
        moved = np.abs(c - c_logits).max()
        print(f"  intervention   steering layer 0's resid_post: max err {e:.3e} (logits moved {moved:.3e})")
        ok &= e <= TOL_TAP and moved > 10 * TOL_TAP
    return ok


def base_config(**kw):
    cfg = dict(vocab_size=37, hidden_size=24, intermediate_size=20, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16,
               rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
               hidden_act="silu", mlp_type="gated", mlp_bias=False, attention_bias=False,
               rope_style="half", num_experts=0, num_experts_per_tok=2,
               moe_intermediate_size=12, decoder_sparse_step=1, norm_topk_prob=True,
               router_aux_loss_coef=0.01, router_z_loss_coef=0.001,
               shared_expert_intermediate_size=0)
    cfg.update(kw)
    return cfg


def main():
    torch.manual_seed(0)
    cases = [
        # the case: 2 layers, GQA, one SwiGLU layer then one MoE layer, untied
        ("swiglu_moe_untied", base_config(num_experts=4, decoder_sparse_step=2), 3, 7, 1),
        # the same, tied head, llama2.c RoPE pairs
        ("swiglu_moe_tied_interleaved",
         base_config(num_experts=4, decoder_sparse_step=2, tie_word_embeddings=True,
                     rope_style="interleaved"), 2, 9, 2),
        # Qwen2-like: q/k/v biases, MHA, dense GELU with biases, interleaved RoPE
        ("dense_gelu_bias_interleaved",
         base_config(hidden_size=20, num_attention_heads=2, num_key_value_heads=2,
                     hidden_act="gelu", mlp_type="dense", mlp_bias=True, attention_bias=True,
                     rope_style="interleaved", tie_word_embeddings=True), 2, 11, 3),
        # MoE in every layer, a shared expert, no renormalisation, biases everywhere,
        # H=6 G=3, 3 layers
        ("moe_every_layer_shared_bias",
         base_config(hidden_size=36, num_attention_heads=6, num_key_value_heads=3,
                     num_hidden_layers=3, num_experts=5, num_experts_per_tok=2,
                     norm_topk_prob=False, shared_expert_intermediate_size=10,
                     mlp_bias=True, attention_bias=True, vocab_size=29), 2, 8, 4),
        # dense ReLU MoE experts (top-1 of 3), every other layer of 4, the rest dense
        ("moe_dense_relu_top1",
         base_config(hidden_act="relu", mlp_type="dense", num_hidden_layers=4, num_experts=3,
                     num_experts_per_tok=1, decoder_sparse_step=2, moe_intermediate_size=16),
         2, 6, 6),
        # dense SiLU and dense linear (the collapse case): the two dense variants
        # whose `ffn compare` results stand out, checked at the model level
        ("dense_silu", base_config(hidden_act="silu", mlp_type="dense"), 2, 9, 7),
        ("dense_linear_tied",
         base_config(hidden_act="linear", mlp_type="dense", tie_word_embeddings=True), 2, 7, 8),
        # attention only, multi-query (G = 1), odd sizes
        ("attention_only_mqa",
         base_config(hidden_size=30, num_attention_heads=3, num_key_value_heads=1,
                     mlp_type="none", vocab_size=41, num_hidden_layers=3), 3, 13, 5),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_driver(tmp)
        results = [run_case(exe, tmp, *c) for c in cases]
    failed = [c[0] for c, r in zip(cases, results) if not r]
    print(f"{len(results) - len(failed)} of {len(results)} cases passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
