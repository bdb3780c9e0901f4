#!/usr/bin/env python3
"""test_families_train.py -- training (forward + backward) of the family
features of the model (include/ffn/model.h) against PyTorch autograd in
float64: head_dim != D/H, partial rotary dims, RoPE scaling (linear,
dynamic, llama3, yarn with its attention factor), q/k RMSNorm per head
(qwen3) and over the whole projection (olmoe), Gemma's RMSNorm weight
(1 + w), embedding scale and GeGLU (gelu_pytorch_tanh), and GPT-2
(LayerNorm with biases, learned position embeddings, q/k/v and o_proj
biases, dense gelu_new MLP with biases, tied head).

The C side is tests/parity/model_driver.c (the driver of test_model.py):
a config.json goes through ffn_model_config_load, random parameters are
laid out by the model's own tensor table, and the driver writes the
logits, the loss, every gradient after one ffn_model_forward_backward, and
sequence 0 decoded token by token with the KV cache.  Checks, per case:
  logits          max |ffn - torch| <= 2e-5
  loss            relative error <= 1e-5
  gradients       per tensor, max err <= 1e-7 + 1e-4 · max |ref grad|
  KV-cache steps  max |steps - torch| <= 2e-5 (not for dynamic RoPE, whose
                  cached keys keep the rotation of their own step)
Exit code = number of failed cases."""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_families as tf  # noqa: E402  (inverse frequencies, head / rotary dims)

ROOT = tf.ROOT
TOL_LOGITS, TOL_LOSS_REL, TOL_CACHE = 2e-5, 1e-5, 2e-5
TOL_GRAD_ABS, TOL_GRAD_REL = 1e-7, 1e-4


def build_driver(tmp):
    exe = os.path.join(tmp, "model_driver")
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-fopenmp", "-I" + os.path.join(ROOT, "include"),
                    os.path.join(HERE, "model_driver.c"), os.path.join(ROOT, "build/libffn.a"),
                    "-ldnnl", "-fopenmp", "-lm", "-lpthread", "-lpcre2-8", "-o", exe], check=True)
    return exe


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, cos, sin, R):
    """x (B, T, n, Dh), cos/sin (T, 1, R): rotate_half on the first R features."""
    xr, xp = x[..., :R], x[..., R:]
    h = R // 2
    rot = torch.cat((-xr[..., h:], xr[..., :h]), dim=-1)
    return torch.cat((xr * cos + rot * sin, xp), dim=-1)


def gpt2_reference(P, cfg, tokens, targets):
    """GPT-2 on the model's table names: LayerNorm with biases, learned
    positions, q/k/v and o biases, dense gelu_new MLP with biases, tied."""
    D, H, L, V = cfg["n_embd"], cfg["n_head"], cfg["n_layer"], cfg["vocab_size"]
    Dh, eps = D // H, cfg["layer_norm_epsilon"]
    B, T = tokens.shape

    def ln(x, pre):
        return torch.nn.functional.layer_norm(x, (D,), P[pre + ".weight"], P[pre + ".bias"], eps)

    def lin(x, pre):
        return x @ P[pre + ".weight"].T + P[pre + ".bias"]
    x = P["model.embed_tokens.weight"][tokens] + P["model.embed_positions.weight"][:T]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}"
        h = ln(x, f"{pre}.input_layernorm")
        q, k, v = (lin(h, f"{pre}.self_attn.{n}_proj").view(B, T, H, Dh).transpose(1, 2) for n in "qkv")
        att = torch.softmax(q @ k.transpose(-1, -2) / Dh ** 0.5 + mask, -1) @ v
        x = x + lin(att.transpose(1, 2).reshape(B, T, D), f"{pre}.self_attn.o_proj")
        h2 = ln(x, f"{pre}.post_attention_layernorm")
        g = torch.nn.functional.gelu(lin(h2, f"{pre}.mlp.up_proj"), approximate="tanh")
        x = x + lin(g, f"{pre}.mlp.down_proj")
    logits = ln(x, "model.norm") @ P["model.embed_tokens.weight"].T
    return logits, torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)


def reference(P, cfg, tokens, targets):
    if cfg.get("model_type") == "gpt2":
        return gpt2_reference(P, cfg, tokens, targets)
    D, H, G = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh, R, L, V = tf.head_dim(cfg), tf.rotary_dim(cfg), cfg["num_hidden_layers"], cfg["vocab_size"]
    eps, qkn = cfg["rms_norm_eps"], cfg.get("ffn_qk_norm", "none")
    off, es = cfg.get("ffn_norm_weight_offset", 0.0), cfg.get("ffn_embed_scale", 1.0)
    act = {"silu": torch.nn.functional.silu,
           "gelu_pytorch_tanh": lambda t: torch.nn.functional.gelu(t, approximate="tanh")}[cfg["hidden_act"]]

    def norm(t, w):
        return rmsnorm(t, w + off, eps)
    B, T = tokens.shape
    f, af = tf.inv_freq(cfg, T)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * f[None, :]
    emb = torch.cat((ang, ang), -1)[:, None, :]
    cos, sin = torch.cos(emb) * af, torch.sin(emb) * af
    x = P["model.embed_tokens.weight"][tokens] * es
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(L):
        pre = f"model.layers.{l}"
        h = norm(x, P[f"{pre}.input_layernorm.weight"])
        q = h @ P[f"{pre}.self_attn.q_proj.weight"].T
        k = h @ P[f"{pre}.self_attn.k_proj.weight"].T
        v = (h @ P[f"{pre}.self_attn.v_proj.weight"].T).view(B, T, G, Dh)
        if qkn == "full":
            q = rmsnorm(q, P[f"{pre}.self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, P[f"{pre}.self_attn.k_norm.weight"], eps)
        q, k = q.view(B, T, H, Dh), k.view(B, T, G, Dh)
        if qkn == "head":
            q = rmsnorm(q, P[f"{pre}.self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, P[f"{pre}.self_attn.k_norm.weight"], eps)
        q, k = rope(q, cos, sin, R).transpose(1, 2), rope(k, cos, sin, R).transpose(1, 2)
        k = k.repeat_interleave(H // G, dim=1)
        v = v.transpose(1, 2).repeat_interleave(H // G, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / Dh ** 0.5 + mask, -1) @ v
        x = x + att.transpose(1, 2).reshape(B, T, H * Dh) @ P[f"{pre}.self_attn.o_proj.weight"].T
        h2 = norm(x, P[f"{pre}.post_attention_layernorm.weight"])
        g = act(h2 @ P[f"{pre}.mlp.gate_proj.weight"].T)
        x = x + (g * (h2 @ P[f"{pre}.mlp.up_proj.weight"].T)) @ P[f"{pre}.mlp.down_proj.weight"].T
    x = norm(x, P["model.norm.weight"])
    head = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    logits = x @ head.T
    return logits, torch.nn.functional.cross_entropy(logits.view(-1, V), targets.view(-1), ignore_index=-1)


def run_case(exe, tmp, name, cfg, B, T, seed):
    if cfg["model_type"] == "gpt2":
        print(f"== {name}: B={B} T={T} D={cfg['n_embd']} H={cfg['n_head']} L={cfg['n_layer']} "
              f"LayerNorm, learned positions, biases")
    else:
        print(f"== {name}: B={B} T={T} D={cfg['hidden_size']} H={cfg['num_attention_heads']} "
              f"G={cfg['num_key_value_heads']} Dh={tf.head_dim(cfg)} R={tf.rotary_dim(cfg)} "
              f"rope={tf.rope_params(cfg)[1]} qk_norm={cfg.get('ffn_qk_norm', 'none')}")
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    cpath = os.path.join(d, "config.json")
    json.dump(cfg, open(cpath, "w"))
    table = subprocess.run([exe, "table", cpath], check=True, capture_output=True, text=True).stdout
    rng = np.random.default_rng(seed)
    entries, n = [], 0
    for line in table.splitlines():
        nm, off, numel, r, c = line.split()
        entries.append((nm, int(off), int(numel), int(r), int(c)))
        n = max(n, int(off) + int(numel))
    flat = np.zeros(n, dtype=np.float32)
    for nm, off, numel, r, c in entries:
        one = 1.0 - cfg.get("ffn_norm_weight_offset", 0.0) if nm.endswith("layernorm.weight") or \
            nm == "model.norm.weight" else 1.0
        flat[off:off + numel] = (one + 0.2 * rng.standard_normal(numel)) if nm.endswith("norm.weight") \
            else 0.2 * rng.standard_normal(numel)
        if nm == "model.embed_positions.weight":
            flat[off:off + numel] *= 2.0
    V = cfg["vocab_size"]
    tokens = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets = rng.integers(0, V, size=(B, T)).astype(np.int32)
    targets[rng.random((B, T)) < 0.2] = -1
    flat.tofile(os.path.join(d, "params.f32"))
    tokens.tofile(os.path.join(d, "tokens.i32"))
    targets.tofile(os.path.join(d, "targets.i32"))
    subprocess.run([exe, "run", cpath, os.path.join(d, "params.f32"), os.path.join(d, "tokens.i32"),
                    os.path.join(d, "targets.i32"), str(B), str(T), d, "2"], check=True)
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
    print(f"  logits   max err {err:.3e} (tol {TOL_LOGITS:.0e})")
    ok &= err <= TOL_LOGITS
    c_total = float(open(os.path.join(d, "loss.txt")).read().split()[0])
    rel = abs(c_total - total.item()) / abs(total.item())
    print(f"  loss     C {c_total:.8f} torch {total.item():.8f} rel err {rel:.3e} (tol {TOL_LOSS_REL:.0e})")
    ok &= rel <= TOL_LOSS_REL
    grads = np.fromfile(os.path.join(d, "grads.f32"), dtype=np.float32)
    worst = (0.0, "")
    for nm, off, numel, r, c in entries:
        g_ref = P[nm].grad.numpy().reshape(-1)
        e = np.abs(grads[off:off + numel] - g_ref).max()
        tol = TOL_GRAD_ABS + TOL_GRAD_REL * np.abs(g_ref).max()
        if e > tol:
            print(f"  FAIL grad {nm}: max err {e:.3e} > tol {tol:.3e}")
            ok = False
        if e / tol > worst[0]:
            worst = (e / tol, f"{nm} err {e:.3e} tol {tol:.3e}")
    print(f"  grads    {len(entries)} tensors, worst err/tol {worst[0]:.3f} ({worst[1]})")
    if cfg["model_type"] == "gpt2" or tf.rope_params(cfg)[1] != "dynamic":
        steps = np.fromfile(os.path.join(d, "steps.f32"), dtype=np.float32).reshape(T, V)
        e3 = np.abs(steps - logits.detach().numpy()[0]).max()
        print(f"  KV cache steps vs torch {e3:.3e} (tol {TOL_CACHE:.0e})")
        ok &= e3 <= TOL_CACHE
    print("  ok" if ok else "  FAILED")
    return ok


BASE = dict(model_type="llama", vocab_size=29, hidden_size=20, intermediate_size=26, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32, rope_theta=10000.0,
            rms_norm_eps=1e-5, tie_word_embeddings=False, hidden_act="silu")

CASES = [
    ("head_dim_partial_linear", dict(head_dim=6, partial_rotary_factor=0.75,
                                     rope_scaling={"rope_type": "linear", "factor": 2.5}), 2, 7),
    ("qk_norm_head_llama3", dict(head_dim=8, ffn_qk_norm="head", tie_word_embeddings=True,
                                 rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                               "high_freq_factor": 2.0, "original_max_position_embeddings": 8}),
     2, 9),
    ("qk_norm_full_yarn", dict(ffn_qk_norm="full", num_key_value_heads=4, head_dim=6,
                               rope_scaling={"rope_type": "yarn", "factor": 3.0,
                                             "original_max_position_embeddings": 8}), 3, 5),
    ("gemma_offset_scale", dict(head_dim=10, num_attention_heads=2, num_key_value_heads=1,
                                hidden_act="gelu_pytorch_tanh", ffn_norm_weight_offset=1.0,
                                ffn_embed_scale=float(np.float32(20 ** 0.5)), tie_word_embeddings=True), 2, 6),
    ("dynamic_odd", dict(num_attention_heads=5, num_key_value_heads=1, head_dim=4,
                         rope_scaling={"rope_type": "dynamic", "factor": 2.0,
                                       "original_max_position_embeddings": 4}), 2, 11),
]


GPT2 = dict(model_type="gpt2", vocab_size=31, n_embd=18, n_layer=2, n_head=3, n_positions=16, n_inner=22,
            activation_function="gelu_new", layer_norm_epsilon=1e-5)
CASES.append(("gpt2_layernorm_positions", dict(GPT2), 3, 7))


def main():
    tmp = tempfile.mkdtemp(prefix="ffn_famtrain_")
    exe = build_driver(tmp)
    bad = 0
    for i, (name, change, B, T) in enumerate(CASES):
        cfg = dict(GPT2 if change.get("model_type") == "gpt2" else BASE)
        cfg.update(change)
        bad += not run_case(exe, tmp, name, cfg, B, T, 100 + i)
    print(f"{bad} failed case(s)")
    return bad


if __name__ == "__main__":
    sys.exit(main())
