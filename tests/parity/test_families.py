#!/usr/bin/env python3
"""test_families.py -- Hugging Face checkpoints of the model families beyond
plain Llama, in and out of `ffn run` / `ffn export`, against a PyTorch
float64 forward written here from the published formulas (transformers'
modeling_rope_utils.py and each family's modeling file):

  RoPE scaling  linear, dynamic (NTK), llama3, yarn (attention factor from
                factor or mscale), given as rope_scaling (old "type" key or
                "rope_type") or as rope_parameters (with rope_theta inside);
  head_dim      different from hidden_size / num_attention_heads;
  partial RoPE  partial_rotary_factor: the first int(Dh·factor) features of
                each head rotate (rotate_half within them);
  qwen3         RMSNorm of each head of q and k before RoPE, head_dim;
  llama 3.x     rope_scaling llama3, tie_word_embeddings true;
  gemma         GeGLU (gelu_pytorch_tanh from hidden_activation, whatever
                hidden_act says), RMSNorm weight (1 + w), embeddings times
                sqrt(hidden_size) rounded to float32 (Hugging Face rounds the
                normalizer to the compute dtype; ffn computes in float32),
                head_dim (256 when absent), tied head;
  phi3          fused self_attn.qkv_proj (q | k | v rows) and mlp.gate_up_proj
                (gate rows, then up), partial_rotary_factor; exported fused
                again;
  olmoe         q_norm / k_norm RMSNorm over the whole q (H·Dh) and k (G·Dh)
                projections before RoPE, 64 experts of intermediate_size, top 8
                of a softmax over all experts, not renormalised
                (norm_topk_prob false; one case true);
  gpt2          transformer.* names, LayerNorm with biases, learned positions
                (wpe), fused c_attn, Conv1D weights stored [in, out], dense
                gelu_new MLP (c_fc, c_proj) with biases, tied head; its own
                config keys (n_embd, n_layer, n_head, n_positions, n_inner).
  starcoder2    LayerNorm with biases (norm_epsilon), RoPE, GQA, q/k/v/o biases
                and a dense gelu_pytorch_tanh MLP (mlp.c_fc, mlp.c_proj) with
                biases (use_bias), tied head by default.

For each case: a small random checkpoint in the family's exact tensor
names, shapes and dtype (F32, F16, BF16; one sharded with
model.safetensors.index.json) and config fields;
  1. ffn's inverse frequencies (tests/parity/rope_driver.c) equal the
     reference's within 1e-12 relative (both in double);
  2. `ffn run --steps 0 --dump-logits` within TOL of the reference,
     relative to the largest reference logit;
  3. 32 greedy steps with the KV cache (`ffn run --temperature 0`) give
     the reference's greedy ids (dynamic RoPE excepted: there a cached key
     keeps the rotation of its own step, as in Hugging Face, so a cached
     decode is not the full forward);
  4. `ffn export --format hf` then `ffn run`: the same logits bit for bit,
     and the exported tensors are the original names and values; `ffn
     export --format llama2c` refuses every case it cannot express (all but
     phi3_f32, a plain Llama once unfused, whose .bin runs within TOL).
Bad input: unknown rope types, missing llama3 fields, a rope_parameters per
layer type, phi3 fused rows that do not split: non-zero exit, the message
names config.json and the field (or the tensor), nothing written.
Mistral's sliding_window: contexts up to the window run (full attention is
exact there); longer prompts are refused with a message naming it.
Exit code = number of failed checks."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_checkpoints as tc  # noqa: E402  (safetensors by hand, ffn runners)

ROOT, FFN = tc.ROOT, tc.FFN
TOL = 1e-4          # logits, relative to max |reference logit|
TOL_FREQ = 1e-12    # inverse frequencies, relative
STEPS = 32
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
    print(("ok   " if ok else "FAIL ") + what)


# ---- the configuration the reference reads ---------------------------------------

def head_dim(cfg):
    if cfg.get("model_type") == "gemma":
        return cfg.get("head_dim", 256)
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def rope_params(cfg):
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    return rs, rs.get("rope_type", rs.get("type", "default"))


def rotary_dim(cfg):
    rs, _ = rope_params(cfg)
    prf = rs.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    return int(head_dim(cfg) * prf)


def inv_freq(cfg, seq_len):
    """(R/2,) inverse frequencies and the attention factor (float64)."""
    rs, typ = rope_params(cfg)
    R = rotary_dim(cfg)
    base = rs.get("rope_theta", cfg.get("rope_theta", 10000.0))
    O = rs.get("original_max_position_embeddings", cfg["max_position_embeddings"])
    factor = rs.get("factor", 1.0)
    j2 = torch.arange(0, R, 2, dtype=torch.float64)
    if typ == "dynamic":
        S = max(seq_len, O)
        base = base * ((factor * S / O) - (factor - 1)) ** (R / (R - 2))
    f = 1.0 / base ** (j2 / R)
    af = 1.0
    if typ == "linear":
        f = f / factor
    elif typ == "llama3":
        lo, hi = rs["low_freq_factor"], rs["high_freq_factor"]
        wl = 2 * np.pi / f
        scaled = torch.where(wl > O / lo, f / factor, f)
        s = (O / wl - lo) / (hi - lo)
        smooth = (1 - s) * scaled / factor + s * scaled
        medium = ~(wl < O / hi) & ~(wl > O / lo)
        f = torch.where(medium, smooth, scaled)
    elif typ == "yarn":
        def mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * np.log(scale) + 1.0
        af = rs.get("attention_factor")
        if af is None:
            if rs.get("mscale") and rs.get("mscale_all_dim"):
                af = mscale(factor, rs["mscale"]) / mscale(factor, rs["mscale_all_dim"])
            else:
                af = mscale(factor)
        bf, bs = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def corr(rot):
            return R * np.log(O / (rot * 2 * np.pi)) / (2 * np.log(base))
        low, high = max(np.floor(corr(bf)), 0), min(np.ceil(corr(bs)), R - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp((torch.arange(R // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
        extra = 1 - ramp
        f = (f / factor) * (1 - extra) + f * extra
    return f, af


# ---- the family's tensors ------------------------------------------------------------

def gpt2_names(cfg):
    D, V, P = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"]
    F = cfg.get("n_inner") or 4 * D
    names = {"transformer.wte.weight": (V, D), "transformer.wpe.weight": (P, D)}
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        names.update({p + "ln_1.weight": (D,), p + "ln_1.bias": (D,),
                      p + "attn.c_attn.weight": (D, 3 * D), p + "attn.c_attn.bias": (3 * D,),
                      p + "attn.c_proj.weight": (D, D), p + "attn.c_proj.bias": (D,),
                      p + "ln_2.weight": (D,), p + "ln_2.bias": (D,),
                      p + "mlp.c_fc.weight": (D, F), p + "mlp.c_fc.bias": (F,),
                      p + "mlp.c_proj.weight": (F, D), p + "mlp.c_proj.bias": (D,)})
    names.update({"transformer.ln_f.weight": (D,), "transformer.ln_f.bias": (D,)})
    return names


def gpt2_forward(cfg, W, tokens):
    D, H, T = cfg["n_embd"], cfg["n_head"], len(tokens)
    Dh, eps = D // H, cfg.get("layer_norm_epsilon", 1e-5)

    def ln(x, pre):
        return torch.nn.functional.layer_norm(x, (D,), W[pre + ".weight"], W[pre + ".bias"], eps)
    x = W["transformer.wte.weight"][torch.tensor(tokens)] + W["transformer.wpe.weight"][:T]
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    for l in range(cfg["n_layer"]):
        p = f"transformer.h.{l}."
        h = ln(x, p + "ln_1")
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]  # Conv1D: x·W + b
        q, k, v = (t.reshape(T, H, Dh) for t in qkv.split(D, dim=-1))
        a = torch.softmax(torch.einsum("thd,shd->hts", q, k) / Dh ** 0.5 + mask, dim=-1)
        x = x + torch.einsum("hts,shd->thd", a, v).reshape(T, D) @ W[p + "attn.c_proj.weight"] + \
            W[p + "attn.c_proj.bias"]
        h = ln(x, p + "ln_2")
        x = x + gelu_tanh(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"]) @ W[p + "mlp.c_proj.weight"] + \
            W[p + "mlp.c_proj.bias"]
    return ln(x, "transformer.ln_f") @ W["transformer.wte.weight"].T


def starcoder2_layer(cfg, p):
    """One starcoder2 layer's tensors but input_layernorm.weight."""
    D, H, F = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"]
    G, Dh = cfg.get("num_key_value_heads", H), head_dim(cfg)
    names = {p + "input_layernorm.bias": (D,)}
    for k, rows, cols in (("q", H * Dh, D), ("k", G * Dh, D), ("v", G * Dh, D), ("o", D, H * Dh)):
        names[p + f"self_attn.{k}_proj.weight"] = (rows, cols)
        names[p + f"self_attn.{k}_proj.bias"] = (rows,)
    names.update({p + "post_attention_layernorm.weight": (D,), p + "post_attention_layernorm.bias": (D,),
                  p + "mlp.c_fc.weight": (F, D), p + "mlp.c_fc.bias": (F,),
                  p + "mlp.c_proj.weight": (D, F), p + "mlp.c_proj.bias": (D,)})
    return names


def starcoder2_forward(cfg, W, tokens):
    """transformers' modeling_starcoder2: pre-LayerNorm blocks, RoPE
    (rotate_half), GQA, every linear with its bias, c_proj(gelu(c_fc(h)))."""
    D, H, T = cfg["hidden_size"], cfg["num_attention_heads"], len(tokens)
    G, Dh, eps = cfg.get("num_key_value_heads", H), head_dim(cfg), cfg["norm_epsilon"]

    def ln(x, pre):
        return torch.nn.functional.layer_norm(x, (D,), W[pre + ".weight"], W[pre + ".bias"], eps)

    def lin(x, pre):
        return x @ W[pre + ".weight"].T + W[pre + ".bias"]
    f, _ = inv_freq(cfg, T)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * f[None, :]
    emb = torch.cat((ang, ang), dim=-1)[:, None, :]
    cos, sin = torch.cos(emb), torch.sin(emb)
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = ln(x, p + "input_layernorm")
        q = lin(h, p + "self_attn.q_proj").reshape(T, H, Dh)
        k = lin(h, p + "self_attn.k_proj").reshape(T, G, Dh)
        v = lin(h, p + "self_attn.v_proj").reshape(T, G, Dh)
        q, k = apply_rope(q, cos, sin, Dh), apply_rope(k, cos, sin, Dh)
        k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
        a = torch.softmax(torch.einsum("thd,shd->hts", q, k) / Dh ** 0.5 + mask, dim=-1)
        x = x + lin(torch.einsum("hts,shd->thd", a, v).reshape(T, H * Dh), p + "self_attn.o_proj")
        h = ln(x, p + "post_attention_layernorm")
        x = x + lin(gelu_tanh(lin(h, p + "mlp.c_fc")), p + "mlp.c_proj")
    head = W["model.embed_tokens.weight"] if tied(cfg) else W["lm_head.weight"]
    return ln(x, "model.norm") @ head.T


def tensor_names(cfg):
    if cfg["model_type"] == "gpt2":
        return gpt2_names(cfg)
    mt, D, V = cfg["model_type"], cfg["hidden_size"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    G = cfg.get("num_key_value_heads", H)
    Dh, F = head_dim(cfg), cfg["intermediate_size"]
    names = {"model.embed_tokens.weight": (V, D)}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        names[p + "input_layernorm.weight"] = (D,)
        if mt == "starcoder2":
            names.update(starcoder2_layer(cfg, p))
            continue
        if mt == "phi3":
            names[p + "self_attn.qkv_proj.weight"] = ((H + 2 * G) * Dh, D)
        else:
            for k, rows in (("q", H * Dh), ("k", G * Dh), ("v", G * Dh)):
                names[p + f"self_attn.{k}_proj.weight"] = (rows, D)
        names[p + "self_attn.o_proj.weight"] = (D, H * Dh)
        if mt == "qwen3":
            names[p + "self_attn.q_norm.weight"] = (Dh,)
            names[p + "self_attn.k_norm.weight"] = (Dh,)
        if mt == "olmoe":
            names[p + "self_attn.q_norm.weight"] = (H * Dh,)
            names[p + "self_attn.k_norm.weight"] = (G * Dh,)
        names[p + "post_attention_layernorm.weight"] = (D,)
        if mt == "phi3":
            names[p + "mlp.gate_up_proj.weight"] = (2 * F, D)
        elif mt == "olmoe":
            names[p + "mlp.gate.weight"] = (cfg["num_experts"], D)
            for e in range(cfg["num_experts"]):
                for k, shape in (("gate", (F, D)), ("up", (F, D)), ("down", (D, F))):
                    names[p + f"mlp.experts.{e}.{k}_proj.weight"] = shape
            continue
        else:
            names[p + "mlp.gate_proj.weight"] = (F, D)
            names[p + "mlp.up_proj.weight"] = (F, D)
        names[p + "mlp.down_proj.weight"] = (D, F)
    names["model.norm.weight"] = (D,)
    if mt == "starcoder2":
        names["model.norm.bias"] = (D,)
    if not tied(cfg):
        names["lm_head.weight"] = (V, D)
    return names


def make_checkpoint(d, cfg, dtype, shards, rng):
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    weights, blobs = {}, {}
    for name, shape in tensor_names(cfg).items():
        if name.endswith("norm.weight") or ".ln_" in name and name.endswith(".weight"):
            a = (0.0 if cfg["model_type"] == "gemma" else 1.0) + 0.1 * rng.standard_normal(shape)
        elif ".ln_" in name or name.endswith(".bias"):
            a = 0.1 * rng.standard_normal(shape)
        else:
            a = rng.standard_normal(shape) * (0.5 if "embed" in name else 0.3)
        raw, stored = tc.to_dtype(a, dtype)
        weights[name] = stored
        blobs[name] = (dtype, shape, raw)
    names = list(blobs)
    if shards == 1:
        tc.write_safetensors(os.path.join(d, "model.safetensors"), blobs)
    else:
        wmap, per = {}, (len(names) + shards - 1) // shards
        for s in range(shards):
            fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: blobs[n] for n in names[s * per:(s + 1) * per]}
            tc.write_safetensors(os.path.join(d, fn), part)
            wmap.update({n: fn for n in part})
        json.dump({"metadata": {"total_size": 0}, "weight_map": wmap},
                  open(os.path.join(d, "model.safetensors.index.json"), "w"))
    return weights


# ---- the reference forward (float64) ---------------------------------------------------

def rmsnorm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def apply_rope(x, cos, sin, R):
    """x (T, n, Dh): rotate_half on the first R features of each head."""
    xr, xp = x[..., :R], x[..., R:]
    h = R // 2
    rot = torch.cat((-xr[..., h:], xr[..., :h]), dim=-1)
    return torch.cat((xr * cos + rot * sin, xp), dim=-1)


def gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate="tanh")


def forward(cfg, W, tokens, cap=None):
    """cap: a dict that receives each layer's FFN input as cap[l] (T, D)."""
    if cfg["model_type"] == "gpt2":
        return gpt2_forward(cfg, W, tokens)
    if cfg["model_type"] == "starcoder2":
        return starcoder2_forward(cfg, W, tokens)
    mt, D = cfg["model_type"], cfg["hidden_size"]
    gemma = mt == "gemma"

    def norm(x, w):
        return rmsnorm(x, 1.0 + w if gemma else w, eps)
    H = cfg["num_attention_heads"]
    G = cfg.get("num_key_value_heads", H)
    Dh, T, R = head_dim(cfg), len(tokens), rotary_dim(cfg)
    eps = cfg.get("rms_norm_eps", 1e-6)
    f, af = inv_freq(cfg, T)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * f[None, :]
    emb = torch.cat((ang, ang), dim=-1)[:, None, :]
    cos, sin = torch.cos(emb) * af, torch.sin(emb) * af
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    if gemma:
        x = x * float(np.float32(D ** 0.5))
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = norm(x, W[p + "input_layernorm.weight"])
        if mt == "phi3":
            qkv = h @ W[p + "self_attn.qkv_proj.weight"].T
            q, k, v = qkv[:, :H * Dh], qkv[:, H * Dh:(H + G) * Dh], qkv[:, (H + G) * Dh:]
        else:
            q = h @ W[p + "self_attn.q_proj.weight"].T
            k = h @ W[p + "self_attn.k_proj.weight"].T
            v = h @ W[p + "self_attn.v_proj.weight"].T
        if mt == "olmoe":
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k, v = q.reshape(T, H, Dh), k.reshape(T, G, Dh), v.reshape(T, G, Dh)
        if mt == "qwen3":
            q = rmsnorm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rmsnorm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = apply_rope(q, cos, sin, R), apply_rope(k, cos, sin, R)
        k, v = k.repeat_interleave(H // G, dim=1), v.repeat_interleave(H // G, dim=1)
        a = torch.softmax(torch.einsum("thd,shd->hts", q, k) / Dh ** 0.5 + mask, dim=-1)
        x = x + torch.einsum("hts,shd->thd", a, v).reshape(T, H * Dh) @ W[p + "self_attn.o_proj.weight"].T
        h = norm(x, W[p + "post_attention_layernorm.weight"])
        if cap is not None:
            cap[l] = h
        act = gelu_tanh if gemma else torch.nn.functional.silu
        if mt == "olmoe":
            probs = torch.softmax(h @ W[p + "mlp.gate.weight"].T, dim=-1)
            top, idx = torch.topk(probs, cfg["num_experts_per_tok"], dim=-1)
            if cfg.get("norm_topk_prob", False):
                top = top / top.sum(-1, keepdim=True)
            y = torch.zeros_like(h)
            for t in range(T):
                for j in range(idx.shape[1]):
                    q_ = p + f"mlp.experts.{int(idx[t, j])}."
                    y[t] += top[t, j] * tc.swiglu(h[t:t + 1], W[q_ + "gate_proj.weight"],
                                                  W[q_ + "up_proj.weight"], W[q_ + "down_proj.weight"])[0]
            x = x + y
            continue
        if mt == "phi3":
            gu = h @ W[p + "mlp.gate_up_proj.weight"].T
            gate, up = gu.chunk(2, dim=-1)
        else:
            gate, up = h @ W[p + "mlp.gate_proj.weight"].T, h @ W[p + "mlp.up_proj.weight"].T
        x = x + (act(gate) * up) @ W[p + "mlp.down_proj.weight"].T
    x = norm(x, W["model.norm.weight"])
    head = W["model.embed_tokens.weight"] if tied(cfg) else W["lm_head.weight"]
    return x @ head.T


def tied(cfg):
    return cfg.get("tie_word_embeddings", cfg["model_type"] in ("gemma", "starcoder2"))


def greedy(cfg, W, prompt, steps):
    ids = list(prompt)
    for _ in range(steps):
        ids.append(int(torch.argmax(forward(cfg, W, ids)[-1])))
    return ids[len(prompt):]


# ---- running ffn --------------------------------------------------------------------

def build_rope_driver(tmp):
    exe = os.path.join(tmp, "rope_driver")
    subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O1", "-I" + os.path.join(ROOT, "include"),
                    "-I" + os.path.join(ROOT, "src"), os.path.join(HERE, "rope_driver.c"),
                    os.path.join(ROOT, "build/libffn_internal.a"), "-ldnnl", "-fopenmp", "-lm", "-lpthread",
                    "-o", exe], check=True)
    return exe


def ffn_freqs(driver, d, seq_len):
    r = subprocess.run([driver, os.path.join(d, "config.json"), str(seq_len)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        print("  rope_driver: " + r.stderr.strip())
        return None, None
    lines = r.stdout.split("\n")
    af = float(lines[0].split()[1])
    return torch.tensor([float(v) for v in lines[1:] if v.strip()], dtype=torch.float64), af


def ffn_greedy(d, prompt, steps):
    r = subprocess.run([FFN, "run", d, "--ids", " ".join(map(str, prompt)), "--steps", str(steps),
                        "--temperature", "0", "--emit", "ids", "--threads", "2"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print("  ffn run: " + r.stderr.strip())
        return None
    return [int(t) for t in r.stdout.split()]


BASE = dict(vocab_size=37, hidden_size=24, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, intermediate_size=38, max_position_embeddings=64,
            rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False)

GPT2_BASE = dict(vocab_size=41, n_embd=24, n_layer=2, n_head=4, n_positions=48, n_inner=None,
                 activation_function="gelu_new", layer_norm_epsilon=1e-5, tie_word_embeddings=True,
                 scale_attn_weights=True)

CASES = [
    # name, config changes, dtype, shards, greedy
    ("linear_type_key_f32", dict(model_type="llama", rope_scaling={"type": "linear", "factor": 2.0}),
     "F32", 1, True),
    ("linear_rope_parameters_f16", dict(model_type="llama", rope_theta=None,
                                        rope_parameters={"rope_type": "linear", "factor": 3.0,
                                                         "rope_theta": 500.0}), "F16", 1, True),
    ("dynamic_bf16", dict(model_type="llama", rope_scaling={"rope_type": "dynamic", "factor": 3.0,
                                                           "original_max_position_embeddings": 8}),
     "BF16", 1, False),
    ("llama3_tied_f16", dict(model_type="llama", tie_word_embeddings=True, rope_theta=500000.0,
                             num_attention_heads=3, num_key_value_heads=1, hidden_size=24,
                             rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                           "high_freq_factor": 4.0,
                                           "original_max_position_embeddings": 16}), "F16", 1, True),
    ("yarn_f32_sharded", dict(model_type="llama", num_attention_heads=2, num_key_value_heads=1,
                              max_position_embeddings=8192,
                              rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                            "original_max_position_embeddings": 2048}), "F32", 3, True),
    ("yarn_mscale_bf16", dict(model_type="llama", num_attention_heads=2, num_key_value_heads=2,
                              rope_scaling={"rope_type": "yarn", "factor": 2.0, "beta_fast": 16.0,
                                            "beta_slow": 2.0, "mscale": 0.707, "mscale_all_dim": 1.0}),
     "BF16", 1, True),
    ("head_dim_partial_f32", dict(model_type="llama", num_attention_heads=3, num_key_value_heads=3,
                                  head_dim=10, partial_rotary_factor=0.6), "F32", 1, True),
    ("qwen3_untied_bf16", dict(model_type="qwen3", head_dim=12, rms_norm_eps=1e-6,
                               rope_theta=1000000.0), "BF16", 1, True),
    ("gemma_mqa_tied_bf16", dict(model_type="gemma", tie_word_embeddings=None, head_dim=16,
                                 num_attention_heads=2, num_key_value_heads=1, hidden_act="gelu",
                                 hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6), "BF16", 1, True),
    ("gemma_untied_f16_default_act", dict(model_type="gemma", tie_word_embeddings=False, head_dim=8,
                                          hidden_size=20, hidden_act="gelu"), "F16", 2, True),
    ("phi3_f32", dict(model_type="phi3", sliding_window=2047, num_key_value_heads=4), "F32", 1, True),
    ("phi3_partial_gqa_bf16_sharded", dict(model_type="phi3", partial_rotary_factor=0.5, hidden_size=32,
                                           num_attention_heads=4, num_key_value_heads=2,
                                           rope_scaling={"rope_type": "linear", "factor": 2.0}),
     "BF16", 2, True),
    ("olmoe_64x8_bf16", dict(model_type="olmoe", num_experts=64, num_experts_per_tok=8, intermediate_size=8,
                             hidden_size=16, num_attention_heads=4, num_key_value_heads=4,
                             router_aux_loss_coef=0.01, norm_topk_prob=False, clip_qkv=None), "BF16", 1, True),
    ("olmoe_norm_topk_f32_sharded", dict(model_type="olmoe", num_experts=6, num_experts_per_tok=2,
                                         intermediate_size=10, num_key_value_heads=2, norm_topk_prob=True),
     "F32", 2, True),
    ("gpt2_f32", dict(model_type="gpt2"), "F32", 1, True),
    ("gpt2_inner_bf16_sharded", dict(model_type="gpt2", n_inner=30, n_head=3, n_embd=18), "BF16", 3, True),
    ("qwen3_tied_f32_sharded", dict(model_type="qwen3", head_dim=8, num_attention_heads=4,
                                    num_key_value_heads=1, tie_word_embeddings=True), "F32", 2, True),
    ("starcoder2_gqa_tied_f32", dict(model_type="starcoder2", hidden_act="gelu_pytorch_tanh",
                                     rms_norm_eps=None, norm_epsilon=1e-5, use_bias=True,
                                     tie_word_embeddings=None, rope_theta=100000.0,
                                     sliding_window=None), "F32", 1, True),
    ("starcoder2_untied_bf16_sharded", dict(model_type="starcoder2", hidden_act="gelu_pytorch_tanh",
                                            rms_norm_eps=None, norm_epsilon=1e-5,
                                            tie_word_embeddings=False, num_key_value_heads=1),
     "BF16", 2, True),
]


def bad_inputs(tmp, rng):
    """Each config is a llama3 checkpoint with one field broken."""
    good = dict(BASE, model_type="llama", rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                         "original_max_position_embeddings": 16})
    bad = [
        ("longrope without its factor lists", {"rope_scaling": {"rope_type": "longrope", "factor": 2.0}},
         "rope_scaling.short_factor"),
        ("unknown type", {"rope_scaling": {"type": "spiral", "factor": 2.0}}, "rope_scaling.rope_type"),
        ("llama3 without low_freq_factor", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                             "high_freq_factor": 4.0,
                                                             "original_max_position_embeddings": 16}},
         "low_freq_factor"),
        ("factor < 1", {"rope_scaling": {"rope_type": "linear", "factor": 0.5}}, "factor"),
        ("per layer type", {"rope_parameters": {"full_attention": {"rope_type": "default"}},
                            "rope_scaling": None}, "rope_parameters"),
        ("odd rotary dim", {"partial_rotary_factor": 0.5, "rope_scaling": None}, "partial_rotary_factor"),
    ]
    # phi3's fused tensors written for other head counts / widths than config.json says
    phi = dict(BASE, model_type="phi3")
    bad += [("qkv_proj rows that do not split", {"model_type": "phi3", "rope_scaling": None,
                                                  "write_as": dict(phi, num_key_value_heads=1)},
             "self_attn.qkv_proj.weight"),
            ("gate_up_proj rows that do not split", {"model_type": "phi3", "rope_scaling": None,
                                                      "gate_up_rows": 3 * BASE["intermediate_size"] // 2},
             "mlp.gate_up_proj.weight")]
    for what, change, field in bad:
        d = os.path.join(tmp, "bad_" + what.replace(" ", "_"))
        cfg = dict(good)
        cfg.update(change)
        write_as, gu_rows = cfg.pop("write_as", None), cfg.pop("gate_up_rows", None)
        cfg = {k: v for k, v in cfg.items() if v is not None}
        if write_as:  # weights of another shape, then the config.json under test
            make_checkpoint(d, write_as, "F32", 1, rng)
            json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
        else:
            make_checkpoint(d, cfg, "F32", 1, rng)
        if gu_rows:  # one fused tensor with rows that are not 2 x intermediate_size
            f = os.path.join(d, "model.safetensors")
            blobs = {}
            for k, a in tc.read_safetensors(f).items():
                if k == "model.layers.1.mlp.gate_up_proj.weight":
                    a = rng.standard_normal((gu_rows, a.shape[1]))
                blobs[k] = ("F32", a.shape, tc.to_dtype(a, "F32")[0])
            tc.write_safetensors(f, blobs)
        out = os.path.join(tmp, "bad_out")
        r1 = subprocess.run([FFN, "run", d, "--ids", "1 2", "--steps", "1"], capture_output=True, text=True)
        r2 = subprocess.run([FFN, "export", d, "--out", out, "--format", "hf"], capture_output=True,
                            text=True)
        msg = r1.stderr.strip()
        check(r1.returncode != 0 and r2.returncode != 0 and "config.json" in msg and field in msg
              and not os.path.exists(out), f"bad input ({what}): refused, names config.json and "
              f"{field}, nothing written: {msg[:160]}")


def inspect_gemma(tmp, rng):
    """`ffn inspect` on a gemma checkpoint: the top neuron of every token (by
    |m_i|, m_i = gelu_tanh(gate_i.x)·(up_i.x) at the FFN input x read through
    the taps) and its promoted tokens through the logit lens, which for
    Gemma scales by the final norm's 1 + w."""
    d = os.path.join(tmp, "gemma_inspect")
    cfg = dict(BASE, model_type="gemma", head_dim=8, hidden_act="gelu")
    cfg.pop("tie_word_embeddings")
    W = make_checkpoint(d, cfg, "F32", 1, rng)
    ids = [3, 1, 4, 1, 5]
    r = subprocess.run([FFN, "inspect", d, "--ids", " ".join(map(str, ids)), "--layer", "1", "--json",
                        "--top", "1", "--promoted", "3"], capture_output=True, text=True)
    if r.returncode != 0:
        check(False, "gemma: ffn inspect: " + r.stderr.strip())
        return
    got = json.loads(r.stdout)["layers"][0]["tokens"]
    cap = {}
    forward(cfg, W, ids, cap)
    p = "model.layers.1.mlp."
    h = cap[1]
    m = gelu_tanh(h @ W[p + "gate_proj.weight"].T) * (h @ W[p + "up_proj.weight"].T)
    emb, g = W["model.embed_tokens.weight"], 1.0 + W["model.norm.weight"]
    worst, same = 0.0, True
    for t, tok in enumerate(got):
        nrn = tok["neurons"][0]
        i = int(torch.argmax(m[t].abs()))
        lens = emb @ (g * W[p + "down_proj.weight"][:, i])
        top = torch.topk(lens, 3)
        same &= nrn["index"] == i and [q["id"] for q in nrn["promoted"]] == [int(j) for j in top.indices]
        worst = max(worst, abs(nrn["product"] - float(m[t, i])) / abs(float(m[t, i])),
                    max(abs(q["logit"] - float(v)) / abs(float(v)) for q, v in zip(nrn["promoted"], top.values)))
    check(same and worst <= 1e-4, f"gemma: ffn inspect's top neurons, m_i and logit-lens tokens (1 + w) "
          f"match the reference (worst rel err {worst:.3g}, tolerance 1e-4, printed to 6 digits)")


def sliding_window(tmp, rng):
    """mistral's sliding_window caps the context: prompts up to the window
    run (full attention is exact there), longer ones are refused naming it."""
    d = os.path.join(tmp, "mistral_window")
    cfg = dict(BASE, model_type="mistral", sliding_window=6)
    W = make_checkpoint(d, cfg, "F32", 1, rng)
    ids = ffn_greedy(d, [1, 2, 3, 4, 5], 1)
    check(ids == greedy(cfg, W, [1, 2, 3, 4, 5], 1), "mistral sliding_window 6: 5 + 1 tokens as the reference")
    r = subprocess.run([FFN, "run", d, "--ids", "1 2 3 4 5 6 7", "--steps", "1"], capture_output=True, text=True)
    check(r.returncode != 0 and "sliding_window" in r.stderr and "context of 6" in r.stderr,
          f"mistral sliding_window 6: a 7-token prompt is refused: {r.stderr.strip()[:150]}")


def main():
    rng = np.random.default_rng(7)
    tmp = tempfile.mkdtemp(prefix="ffn_fam_")
    driver = build_rope_driver(tmp)
    prompt = [3, 17, 5, 29, 11]
    for name, change, dtype, shards, do_greedy in CASES:
        cfg = dict(GPT2_BASE if change.get("model_type") == "gpt2" else BASE)
        cfg.update(change)
        cfg = {k: v for k, v in cfg.items() if v is not None}
        d = os.path.join(tmp, name)
        W = make_checkpoint(d, cfg, dtype, shards, rng)
        T = 20 if "dynamic" in name else 9  # dynamic: beyond its original context (8)
        tokens = [int(t) for t in rng.integers(0, cfg["vocab_size"], T)]
        # 1. inverse frequencies (gpt2: learned positions, no RoPE)
        got, got_af = ffn_freqs(driver, d, T)
        if cfg["model_type"] == "gpt2":
            cfg_r = dict(cfg, hidden_size=cfg["n_embd"], num_attention_heads=cfg["n_head"],
                         max_position_embeddings=cfg["n_positions"])
        else:
            cfg_r = cfg
        want, want_af = inv_freq(cfg_r, T)
        ok = got is not None and got.shape == want.shape and \
            float(((got - want).abs() / want.abs()).max()) <= TOL_FREQ and abs(got_af - want_af) <= 1e-12 * want_af
        if cfg["model_type"] != "gpt2":
            check(ok, f"{name}: inverse frequencies ({len(want)}) and attention factor {want_af:.6g} match")
        # 2. logits
        got = tc.ffn_logits(d, tokens, tmp, name)
        ref = forward(cfg, W, tokens).numpy()
        if got is None:
            check(False, f"{name}: ffn run")
            continue
        err = float(np.abs(got - ref).max() / np.abs(ref).max())
        check(err <= TOL, f"{name} ({cfg['model_type']}, {dtype}, {shards} file(s)): logits rel err "
              f"{err:.3g} (tolerance {TOL:g})")
        # 3. greedy with the KV cache
        if do_greedy:
            ids = ffn_greedy(d, prompt, STEPS)
            want_ids = greedy(cfg, W, prompt, STEPS)
            check(ids == want_ids, f"{name}: {STEPS} greedy KV-cache steps give the reference ids")
        # 4. export round trip
        out = os.path.join(tmp, name + "_export")
        if tc.ffn_export(d, out):
            again = tc.ffn_logits(out, tokens, tmp, name + "_export")
            check(again is not None and np.array_equal(again, got),
                  f"{name}: export hf -> ffn run gives identical logits (bitwise)")
            _, Wx = tc.load_hf_dir(out)
            same = set(Wx) == set(W) and all(torch.equal(Wx[k], W[k]) for k in W)
            check(same, f"{name}: the export holds the family's names and the same values")
            cx = json.load(open(os.path.join(out, "config.json")))
            check(cx["model_type"] == cfg["model_type"], f"{name}: exported model_type {cx['model_type']}")
        else:
            check(False, f"{name}: ffn export")
        # llama2.c: only phi3_f32 is a plain Llama there; the others are refused, nothing written
        bin_out = os.path.join(tmp, name + ".bin")
        r = subprocess.run([FFN, "export", d, "--out", bin_out, "--format", "llama2c"],
                           capture_output=True, text=True)
        if name == "phi3_f32":
            again = tc.ffn_logits(bin_out, tokens, tmp, name + "_l2c") if r.returncode == 0 else None
            e2 = float(np.abs(again - ref).max() / np.abs(ref).max()) if again is not None else 1.0
            check(e2 <= TOL, f"{name}: export llama2c (q/k rows to pairs) -> ffn run: rel err {e2:.3g}")
        else:
            check(r.returncode != 0 and "cannot express" in r.stderr and not os.path.exists(bin_out),
                  f"{name}: export llama2c refused: {r.stderr.strip()[-110:]}")
    bad_inputs(tmp, rng)
    sliding_window(tmp, rng)
    inspect_gemma(tmp, rng)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{failures} failure(s)")
    return failures


if __name__ == "__main__":
    sys.exit(main())
