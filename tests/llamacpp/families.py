"""families.py -- every architecture ffn writes as GGUF, checked against
llama.cpp and against ffn's own Hugging Face path.

For each family (llama with llama3 RoPE scaling, and the others listed in
FAMILIES) a Hugging Face directory of random small weights is made here
(numpy, seeded), written by `ffn export --format gguf` (f32), and the same
token sequence is evaluated:
  ffn on the source directory        P_src   (ffn run --dump-logits)
  ffn on the GGUF file               P_ffn
  llama.cpp on the GGUF file         P_cpp   (probs.mjs, node-llama-cpp)
  ffn on the GGUF exported again     P_rt    (GGUF -> GGUF round trip)
  ffn on the GGUF exported as HF     P_hf    (GGUF -> HF directory)
Checks per family (T = 40 positions):
  max |P_src - P_ffn| <= 1e-5  (the GGUF reader gives the HF-dir model back;
                                the only difference is the f32 rounding of
                                generated tensors such as rope_freqs);
  max |P_ffn - P_cpp| <= 1e-4 (2e-3 for the dense GELU families gpt2 and
        starcoder2: ggml's GELU reads a table at fp16 inputs and outputs,
        ggml-cpu/vec.h GGML_GELU_FP16; measured 3.7e-4) and top-1 equal at every position whose
        top-2 logit gap exceeds 0.01 (interop.py's f32 bounds), at least 15;
  max |P_ffn - P_rt| <= 5e-6 (llama3 scaling is refitted from the f32
        factors written), max |P_ffn - P_hf| <= 1e-5.
For gemma2, gemma3, starcoder2 and phi3 with LongRoPE (long factors: a context of 64
past O = 16; short: O = 4096, beyond the context llama.cpp pads to) (EXACT_FAMILIES) also an exact forward written
here in PyTorch float64 (gemma_reference, phi3_reference, from Hugging
Face's modeling_gemma2 / modeling_gemma3 / modeling_phi3 formulas;
starcoder2's is tests/parity/test_families.py's) over the
same weights, P_ref:
  max |P_src - P_ref| <= 1e-5, and the mean L1 over positions of
  L1(P_ffn, P_cpp) <= 2 · L1(P_cpp, P_ref) + 1e-6 (ffn no farther from
  llama.cpp than about twice llama.cpp's own distance from the exact
  forward); both distances are printed.  For these families the bound on
  max |P_ffn - P_cpp| is also at least 2 · max |P_cpp - P_ref| + 1e-6:
  llama.cpp's own error from the exact forward (its f32 soft-capping and
  windowed attention) can exceed 1e-4 where ffn's is 4e-7.

  python3 families.py WORKDIR NODE_DIR [FAMILY ...]   (FFN_BIN: the ffn binary)
"""
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
import ffn_testlib as tl  # noqa: E402
import interop  # noqa: E402

SAME_TOL, CPP_TOL, RT_TOL, HF_TOL = 1e-5, 1e-4, 5e-6, 1e-5
CPP_TOL_GELU = 2e-3
GELU_FAMILIES = {"gpt2", "starcoder2"}
GAP, MIN_DECIDED = 0.01, 15
V, D, H, G, L, T_CTX, F = 259, 128, 4, 2, 2, 64, 192
IDS = [int(x) for x in np.random.default_rng(11).integers(3, 256, size=40)]


def family_config(fam):
    cfg = dict(vocab_size=V, hidden_size=D, intermediate_size=F, num_hidden_layers=L,
               num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=T_CTX,
               rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
               tie_word_embeddings=False, model_type="llama")
    if fam == "llama3":
        # Llama 3.1's scaling, shrunk: Dh 32 puts pairs 2..4 on the ramp
        cfg.update(rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=64))
    elif fam == "qwen3":  # heads wider than D / H: attention.key_length
        cfg.update(model_type="qwen3", head_dim=48, rope_theta=1e6, rms_norm_eps=1e-6)
    elif fam == "qwen3moe":
        cfg.update(model_type="qwen3_moe", head_dim=32, num_experts=4, num_experts_per_tok=2,
                   moe_intermediate_size=96, norm_topk_prob=True, decoder_sparse_step=1,
                   mlp_only_layers=[])
    elif fam == "olmoe":  # llama.cpp's olmoe has k_norm of n_embd: G = H
        cfg.update(model_type="olmoe", num_key_value_heads=H, num_experts=4,
                   num_experts_per_tok=2, intermediate_size=96, norm_topk_prob=False)
    elif fam == "gemma":
        cfg.update(model_type="gemma", head_dim=48, hidden_activation="gelu_pytorch_tanh",
                   tie_word_embeddings=True, rms_norm_eps=1e-6)
    elif fam == "gemma2":  # caps small enough to bite, a window shorter than the 40 ids
        cfg.update(model_type="gemma2", head_dim=48, hidden_activation="gelu_pytorch_tanh",
                   tie_word_embeddings=True, rms_norm_eps=1e-6, query_pre_attn_scalar=48,
                   attn_logit_softcapping=2.0, final_logit_softcapping=10.0, sliding_window=8)
    elif fam == "gemma3":  # layer 0 slides on the local base, layer 1 global with linear scaling
        cfg.update(model_type="gemma3_text", head_dim=32, hidden_activation="gelu_pytorch_tanh",
                   tie_word_embeddings=True, rms_norm_eps=1e-6, query_pre_attn_scalar=32,
                   rope_theta=1e6, rope_local_base_freq=1e4, sliding_window=8,
                   sliding_window_pattern=2, final_logit_softcapping=None,
                   attn_logit_softcapping=None, rope_scaling=dict(rope_type="linear", factor=2.0))
    elif fam == "phi3":  # fused qkv_proj and gate_up_proj
        cfg.update(model_type="phi3", sliding_window=None, rope_scaling=None)
    elif fam in ("phi3long", "phi3short"):  # LongRoPE: a context of 64 past (or within) O
        r = np.random.default_rng(5)
        cfg.update(model_type="phi3", sliding_window=None,
                   original_max_position_embeddings=16 if fam == "phi3long" else 4096,
                   rope_scaling=dict(type="longrope",
                                     short_factor=[round(float(x), 4) for x in 1 + r.random(D // H // 2)],
                                     long_factor=[round(float(x), 4) for x in 1 + 8 * r.random(D // H // 2)]))
    elif fam == "starcoder2":
        cfg.update(model_type="starcoder2", hidden_act="gelu_pytorch_tanh", norm_epsilon=1e-5,
                   use_bias=True, tie_word_embeddings=True, rope_theta=1e5, sliding_window=None)
        del cfg["rms_norm_eps"]
    elif fam == "gpt2":
        cfg = dict(model_type="gpt2", vocab_size=V, n_embd=D, n_layer=L, n_head=H,
                   n_positions=T_CTX, n_inner=F, activation_function="gelu_new",
                   layer_norm_epsilon=1e-5, tie_word_embeddings=True)
    else:
        raise ValueError(fam)
    return cfg


def gpt2_model(rng, cfg):
    def mat(*shape, std=0.08):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"transformer.wte.weight": mat(V, D, std=0.3), "transformer.wpe.weight": mat(T_CTX, D, std=0.1)}
    for l in range(L):
        p = "transformer.h.%d." % l
        w.update({p + "ln_1.weight": norm(D), p + "ln_1.bias": mat(D, std=0.05),
                  p + "attn.c_attn.weight": mat(D, 3 * D, std=0.15), p + "attn.c_attn.bias": mat(3 * D, std=0.1),
                  p + "attn.c_proj.weight": mat(D, D), p + "attn.c_proj.bias": mat(D, std=0.05),
                  p + "ln_2.weight": norm(D), p + "ln_2.bias": mat(D, std=0.05),
                  p + "mlp.c_fc.weight": mat(D, F), p + "mlp.c_fc.bias": mat(F, std=0.05),
                  p + "mlp.c_proj.weight": mat(F, D), p + "mlp.c_proj.bias": mat(D, std=0.05)})
    w.update({"transformer.ln_f.weight": norm(D), "transformer.ln_f.bias": mat(D, std=0.05)})
    return w


def make_model(path, fam, seed):
    rng = np.random.default_rng(seed)
    cfg = family_config(fam)
    if fam == "gpt2":
        os.makedirs(path, exist_ok=True)
        tl.write_config(os.path.join(path, "config.json"), **cfg)
        tl.write_safetensors(os.path.join(path, "model.safetensors"), gpt2_model(rng, cfg))
        return
    Dh = cfg.get("head_dim", D // H)
    E = cfg.get("num_experts", 0)
    Fe = cfg.get("moe_intermediate_size", cfg["intermediate_size"])
    Gh = cfg["num_key_value_heads"]

    def mat(out, inp, std=0.08):
        return (rng.standard_normal((out, inp)) * std).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(V, D, 0.3)}
    for l in range(L):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = norm(D)
        w[p + "self_attn.q_proj.weight"] = mat(H * Dh, D, 0.15)
        w[p + "self_attn.k_proj.weight"] = mat(Gh * Dh, D, 0.15)
        w[p + "self_attn.v_proj.weight"] = mat(Gh * Dh, D)
        if fam in ("qwen3", "qwen3moe", "gemma3"):
            w[p + "self_attn.q_norm.weight"] = norm(Dh)
            w[p + "self_attn.k_norm.weight"] = norm(Dh)
        if fam == "olmoe":
            w[p + "self_attn.q_norm.weight"] = norm(H * Dh)
            w[p + "self_attn.k_norm.weight"] = norm(Gh * Dh)
        w[p + "self_attn.o_proj.weight"] = mat(D, H * Dh)
        w[p + "post_attention_layernorm.weight"] = norm(D)
        if fam in ("gemma2", "gemma3"):  # post_attention_layernorm is the attention output's norm
            w[p + "pre_feedforward_layernorm.weight"] = norm(D)
            w[p + "post_feedforward_layernorm.weight"] = norm(D)
        if E:
            w[p + "mlp.gate.weight"] = mat(E, D, 0.3)
            for e in range(E):
                q = p + "mlp.experts.%d." % e
                w[q + "gate_proj.weight"] = mat(Fe, D)
                w[q + "up_proj.weight"] = mat(Fe, D)
                w[q + "down_proj.weight"] = mat(D, Fe)
        else:
            w[p + "mlp.gate_proj.weight"] = mat(F, D)
            w[p + "mlp.up_proj.weight"] = mat(F, D)
            w[p + "mlp.down_proj.weight"] = mat(D, F)
    if fam == "starcoder2":  # LayerNorm and projection biases, mlp.c_fc / mlp.c_proj
        for l in range(L):
            p = "model.layers.%d." % l
            for n in ("input_layernorm", "post_attention_layernorm"):
                w[p + n + ".bias"] = (0.05 * rng.standard_normal(D)).astype(np.float32)
            for n, rows in (("q", H * Dh), ("k", Gh * Dh), ("v", Gh * Dh), ("o", D)):
                w[p + "self_attn.%s_proj.bias" % n] = (0.1 * rng.standard_normal(rows)).astype(np.float32)
            w.pop(p + "mlp.gate_proj.weight")
            w[p + "mlp.c_fc.weight"] = w.pop(p + "mlp.up_proj.weight")
            w[p + "mlp.c_proj.weight"] = w.pop(p + "mlp.down_proj.weight")
            w[p + "mlp.c_fc.bias"] = (0.05 * rng.standard_normal(F)).astype(np.float32)
            w[p + "mlp.c_proj.bias"] = (0.05 * rng.standard_normal(D)).astype(np.float32)
        w["model.norm.bias"] = (0.05 * rng.standard_normal(D)).astype(np.float32)
    if fam.startswith("phi3"):
        for l in range(L):
            p = "model.layers.%d." % l
            w[p + "self_attn.qkv_proj.weight"] = np.concatenate(
                [w.pop(p + "self_attn.%s_proj.weight" % n) for n in "qkv"])
            w[p + "mlp.gate_up_proj.weight"] = np.concatenate(
                [w.pop(p + "mlp.gate_proj.weight"), w.pop(p + "mlp.up_proj.weight")])
    w["model.norm.weight"] = norm(D)
    if fam == "gemma3":  # (1 + w) about 0.2: logits spread enough that the distribution is not one-hot
        w["model.norm.weight"] = (-0.8 + 0.05 * rng.standard_normal(D)).astype(np.float32)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(V, D, 0.3)
    os.makedirs(path, exist_ok=True)
    tl.write_config(os.path.join(path, "config.json"), **cfg)
    tl.write_safetensors(os.path.join(path, "model.safetensors"), w)
    return w, cfg


EXACT_FAMILIES = ("gemma2", "gemma3", "phi3long", "phi3short", "starcoder2")


def starcoder2_reference(w, cfg, ids):
    """starcoder2 in float64: tests/parity/test_families.py's forward
    (modeling_starcoder2: LayerNorm, RoPE, GQA, biases, c_fc / c_proj)."""
    import torch
    import test_families as tf
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in w.items()}
    return torch.softmax(tf.starcoder2_forward(cfg, t, ids), -1).numpy()


def phi3_reference(w, cfg, ids):
    """Phi-3 with LongRoPE in float64 (transformers' modeling_phi3 and
    _compute_longrope_parameters): fused q|k|v and gate|up, SiLU GLU."""
    import torch
    f64 = torch.float64
    t = {k: torch.tensor(v, dtype=f64) for k, v in w.items()}
    Dh, eps, Gh, n = D // H, cfg["rms_norm_eps"], cfg["num_key_value_heads"], len(ids)
    O, ctx = cfg["original_max_position_embeddings"], cfg["max_position_embeddings"]
    rs = cfg["rope_scaling"]
    factor = ctx / O
    af = math.sqrt(1 + math.log(factor) / math.log(O)) if factor > 1 else 1.0
    ext = torch.tensor(rs["long_factor"] if ctx > O else rs["short_factor"], dtype=f64)
    inv = 1.0 / (ext * cfg["rope_theta"] ** (torch.arange(0, Dh, 2, dtype=f64) / Dh))
    ang = torch.arange(n, dtype=f64)[:, None] * inv[None, :]
    cos = (torch.cat([ang.cos()] * 2, -1) * af)[:, None, :]
    sin = (torch.cat([ang.sin()] * 2, -1) * af)[:, None, :]

    def rope(x):
        return x * cos + torch.cat([-x[..., Dh // 2:], x[..., : Dh // 2]], -1) * sin

    def rms(x, wt):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * wt

    x = t["model.embed_tokens.weight"][ids]
    mask = torch.arange(n)[None, :] > torch.arange(n)[:, None]
    for l in range(L):
        p = "model.layers.%d." % l
        h = rms(x, t[p + "input_layernorm.weight"])
        qkv = h @ t[p + "self_attn.qkv_proj.weight"].T
        q = qkv[:, : H * Dh].view(n, H, Dh)
        k = qkv[:, H * Dh: (H + Gh) * Dh].view(n, Gh, Dh)
        v = qkv[:, (H + Gh) * Dh:].view(n, Gh, Dh)
        q, k = rope(q), rope(k)
        k, v = k.repeat_interleave(H // Gh, 1), v.repeat_interleave(H // Gh, 1)
        s_ = torch.einsum("thd,shd->hts", q, k) / math.sqrt(Dh)
        a = torch.einsum("hts,shd->thd", torch.softmax(s_.masked_fill(mask[None], float("-inf")), -1), v)
        x = x + a.reshape(n, H * Dh) @ t[p + "self_attn.o_proj.weight"].T
        h = rms(x, t[p + "post_attention_layernorm.weight"])
        gu = h @ t[p + "mlp.gate_up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gu[:, :F]) * gu[:, F:]) @ t[p + "mlp.down_proj.weight"].T
    z = rms(x, t["model.norm.weight"]) @ t["lm_head.weight"].T
    return torch.softmax(z, -1).numpy()


def gemma_reference(w, cfg, ids, ffn_taps=None):
    """Gemma 2 / Gemma 3 (text) in float64: the next-token distributions.
    ffn_taps, a list: gets per layer {"m": the neurons' activations (n, F),
    "z": the down projection's output, "y": what is added to the residual
    (z through post_feedforward_layernorm)}."""
    import torch
    f64 = torch.float64
    t = {k: torch.tensor(v, dtype=f64) for k, v in w.items()}
    Dh, eps, Gh = cfg["head_dim"], cfg["rms_norm_eps"], cfg["num_key_value_heads"]
    g3 = cfg["model_type"] == "gemma3_text"
    window = cfg["sliding_window"]
    pattern = cfg.get("sliding_window_pattern", 2)
    n = len(ids)

    def rms(x, wt):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * (1.0 + wt)

    def rope(x, base, factor):  # x (n, heads, Dh), rotate_half
        inv = 1.0 / (base ** (torch.arange(0, Dh, 2, dtype=f64) / Dh)) / factor
        ang = torch.arange(n, dtype=f64)[:, None] * inv[None, :]
        cos, sin = torch.cat([ang.cos()] * 2, -1)[:, None, :], torch.cat([ang.sin()] * 2, -1)[:, None, :]
        x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def cap(x, c):
        return c * torch.tanh(x / c) if c else x

    x = t["model.embed_tokens.weight"][ids] * math.sqrt(D)
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    for l in range(L):
        p = "model.layers.%d." % l
        slides = (l + 1) % pattern != 0
        h = rms(x, t[p + "input_layernorm.weight"])
        q = (h @ t[p + "self_attn.q_proj.weight"].T).view(n, H, Dh)
        k = (h @ t[p + "self_attn.k_proj.weight"].T).view(n, Gh, Dh)
        v = (h @ t[p + "self_attn.v_proj.weight"].T).view(n, Gh, Dh)
        if g3:
            q, k = rms(q, t[p + "self_attn.q_norm.weight"]), rms(k, t[p + "self_attn.k_norm.weight"])
            base, factor = (cfg["rope_local_base_freq"], 1.0) if slides else \
                (cfg["rope_theta"], cfg["rope_scaling"]["factor"])
        else:
            base, factor = cfg["rope_theta"], 1.0
        q, k = rope(q, base, factor), rope(k, base, factor)
        k, v = k.repeat_interleave(H // Gh, 1), v.repeat_interleave(H // Gh, 1)
        s = torch.einsum("thd,shd->hts", q, k) * cfg["query_pre_attn_scalar"] ** -0.5
        s = cap(s, cfg.get("attn_logit_softcapping"))
        mask = (j > i) | ((i - j >= window) if slides else torch.zeros_like(j > i))
        s = s.masked_fill(mask[None], float("-inf"))
        a = torch.einsum("hts,shd->thd", torch.softmax(s, -1), v).reshape(n, H * Dh)
        x = x + rms(a @ t[p + "self_attn.o_proj.weight"].T, t[p + "post_attention_layernorm.weight"])
        h = rms(x, t[p + "pre_feedforward_layernorm.weight"])
        g = torch.nn.functional.gelu(h @ t[p + "mlp.gate_proj.weight"].T, approximate="tanh")
        act = g * (h @ t[p + "mlp.up_proj.weight"].T)
        m = act @ t[p + "mlp.down_proj.weight"].T
        x = x + rms(m, t[p + "post_feedforward_layernorm.weight"])
        if ffn_taps is not None:
            ffn_taps.append({"m": act, "z": m, "y": rms(m, t[p + "post_feedforward_layernorm.weight"])})
    z = rms(x, t["model.norm.weight"]) @ t["model.embed_tokens.weight"].T
    z = cap(z, cfg.get("final_logit_softcapping"))
    return torch.softmax(z, -1).numpy()


def probs(model, work, tag):
    out = os.path.join(work, tag + ".logits.safetensors")
    tl.run_ffn(["run", model, "--ids", " ".join(map(str, IDS)), "--steps", "0",
                "--dump-logits", out])
    z = tl.read_safetensors(out)["logits"].astype(np.float64)
    return z, interop.softmax(z)


def check_family(fam, seed, work, node_dir):
    src = os.path.join(work, fam)
    w, cfg = make_model(src, fam, seed) or (None, None)
    gguf = os.path.join(work, fam + ".gguf")
    tl.run_ffn(["export", src, "--format", "gguf", "--dtype", "F32", "--out", gguf, "--force"])
    rt = os.path.join(work, fam + ".rt.gguf")
    tl.run_ffn(["export", gguf, "--format", "gguf", "--dtype", "F32", "--out", rt, "--force"])
    hf = os.path.join(work, fam + ".hf")
    tl.run_ffn(["export", gguf, "--format", "hf", "--out", hf, "--force"])
    _, p_src = probs(src, work, fam + ".src")
    z_ffn, p_ffn = probs(gguf, work, fam + ".gguf")
    _, p_rt = probs(rt, work, fam + ".rt")
    _, p_hf = probs(hf, work, fam + ".hf")
    interop.IDS[:] = IDS
    p_cpp = interop.cpp_probs(gguf, node_dir)
    bad = []
    if p_cpp.shape != p_ffn.shape:
        return ["llama.cpp gave %s, ffn %s" % (p_cpp.shape, p_ffn.shape)], "%s: shapes" % fam
    srt = np.sort(z_ffn, axis=1)
    decided = (srt[:, -1] - srt[:, -2]) > GAP
    top_ok = (p_ffn.argmax(1) == p_cpp.argmax(1)) | ~decided
    d = {k: float(np.abs(p_ffn - q).max()) for k, q in
         (("src", p_src), ("cpp", p_cpp), ("rt", p_rt), ("hf", p_hf))}
    l1 = float(np.abs(p_ffn - p_cpp).sum(axis=1).max())
    if d["src"] > SAME_TOL: bad.append("GGUF vs HF dir %.1e > %g" % (d["src"], SAME_TOL))
    tol = CPP_TOL_GELU if fam in GELU_FAMILIES else CPP_TOL
    p_ref = None
    if fam in EXACT_FAMILIES:
        p_ref = (phi3_reference if fam.startswith("phi3") else
                 starcoder2_reference if fam == "starcoder2" else gemma_reference)(w, cfg, IDS)
        # where the exact forward is known, llama.cpp's own largest error
        # from it bounds how far ffn may be from llama.cpp (soft-capped
        # logits have been seen 1.6e-4 away on gemma3, ffn 4e-7 from exact)
        tol = max(tol, 2 * float(np.abs(p_cpp - p_ref).max()) + 1e-6)
    if d["cpp"] > tol: bad.append("ffn vs llama.cpp %.1e > %.1e" % (d["cpp"], tol))
    if d["rt"] > RT_TOL: bad.append("GGUF round trip %.1e > %g" % (d["rt"], RT_TOL))
    if d["hf"] > HF_TOL: bad.append("GGUF -> HF %.1e > %g" % (d["hf"], HF_TOL))
    if not top_ok.all(): bad.append("top-1 differs at %s" % list(np.nonzero(~top_ok)[0]))
    exact = ""
    if fam in EXACT_FAMILIES:
        d_ref = float(np.abs(p_src - p_ref).max())
        l1_fc = float(np.abs(p_ffn - p_cpp).sum(axis=1).mean())
        l1_cr = float(np.abs(p_cpp - p_ref).sum(axis=1).mean())
        l1_fr = float(np.abs(p_ffn - p_ref).sum(axis=1).mean())
        if d_ref > SAME_TOL: bad.append("HF dir vs float64 reference %.1e > %g" % (d_ref, SAME_TOL))
        if l1_fc > 2 * l1_cr + 1e-6:
            bad.append("L1(ffn, llama.cpp) %.2e > 2 L1(llama.cpp, exact) %.2e + 1e-6" % (l1_fc, l1_cr))
        exact = ("  exact: max|dP| hf-dir %.1e, mean L1 ffn-cpp %.2e cpp-exact %.2e ffn-exact %.2e"
                 % (d_ref, l1_fc, l1_cr, l1_fr))
    if decided.sum() < MIN_DECIDED: bad.append("only %d decided positions" % decided.sum())
    line = ("%-9s T=%d max|dP| hf-dir %.1e  llama.cpp %.1e (L1 %.1e)  round-trip %.1e  "
            "->hf %.1e  top-1 %d/%d" % (fam, len(IDS), d["src"], d["cpp"], l1, d["rt"], d["hf"],
                                        int((top_ok & decided).sum()), int(decided.sum())))
    return bad, line + exact


FAMILIES = ["llama3", "qwen3", "qwen3moe", "olmoe", "gemma", "phi3", "gpt2", "starcoder2", "gemma2",
            "gemma3", "phi3long", "phi3short"]


def main():
    work, node_dir = sys.argv[1], sys.argv[2]
    fams = sys.argv[3:] or FAMILIES
    failures = []
    for seed, fam in enumerate(fams):
        try:
            bad, line = check_family(fam, 300 + seed, work, node_dir)
        except Exception as e:  # noqa: BLE001 -- a failed run is a failed check
            bad, line = [str(e).strip()[-1500:]], fam
        print(("FAIL " if bad else "ok   ") + line + ("  <- " + "; ".join(bad) if bad else ""))
        if bad:
            failures.append(fam)
    print("families: %d checked, %d failed %s" % (len(fams), len(failures), " ".join(failures)))
    if interop.CACHE_USED[0]:
        print("note: families: llama.cpp's results for %d GGUF files reused (the same bytes, ids and "
              "llama.cpp as an earlier run)" % interop.CACHE_USED[0])
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
