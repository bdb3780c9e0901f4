#!/usr/bin/env python3
"""test_checkpoints.py -- Hugging Face checkpoints in and out of `ffn run` /
`ffn export`, against an independent PyTorch implementation of the Hugging
Face forward written here (float64): rotate_half RoPE, grouped KV heads,
q/k/v biases (qwen2), and the MoE routing of Mixtral (softmax over all
experts, top-k, renormalised) and Qwen2-MoE (softmax, top-k, renormalised
only with norm_topk_prob, plus sigmoid(shared_expert_gate(x)) *
shared_expert(x)).

1. Small random checkpoints are written here (safetensors by hand) for
   llama (tied and untied), mistral, qwen2, mixtral and qwen2_moe, in F32,
   F16 and BF16, as one model.safetensors or as shards with
   model.safetensors.index.json.  `ffn run DIR --ids ... --steps 0
   --dump-logits` must match the reference within TOL.
2. Round trips:
   - every model above -> `ffn export --format hf` -> `ffn run`: logits
     identical bit for bit (F32 export of fp32-representable weights);
   - an ffn checkpoint written by `ffn train` -> export hf -> ffn: bitwise,
     and the reference forward on the exported files matches ffn's logits;
   - stories260K.bin (llama2.c, interleaved RoPE) -> export hf: the HF
     reference on the exported files equals the llama2.c-convention
     reference on the original file (to float64 rounding), and ffn's
     logits on both are the same within TOL;
   - stories260K -> export llama2c -> ffn: identical logits (bitwise);
     HF llama -> export llama2c (q/k permuted to pairs) -> ffn: within TOL.
Exit code = number of failed checks."""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("FFN_ROOT", os.path.join(HERE, "..", ".."))
FFN = os.environ.get("FFN_BIN", os.path.join(ROOT, "build", "ffn"))
SHARED = os.environ.get("FFN_SHARED", os.path.join(ROOT, "..", "shared"))
TOL = 1e-4
failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
    print(("ok   " if ok else "FAIL ") + what)


# ---- safetensors by hand -----------------------------------------------------------

def to_dtype(a, dtype):
    """fp64 array -> (bytes, the fp64 values the file really holds)."""
    t = torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))
    if dtype == "F32":
        return t.numpy().tobytes(), t.double()
    if dtype == "F16":
        h = t.half()
        return h.numpy().tobytes(), h.double()
    b = t.bfloat16()
    return b.view(torch.int16).numpy().tobytes(), b.double()


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, shape, bytes)."""
    hdr, off, blobs = {}, 0, []
    for name, (dt, shape, raw) in tensors.items():
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    hdr = json.loads(raw[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        buf = raw[8 + n + b:8 + n + e]
        if v["dtype"] == "BF16":
            a = torch.from_numpy(np.frombuffer(buf, dtype="<i2").copy()).view(torch.bfloat16).double().numpy()
        else:
            a = np.frombuffer(buf, dtype={"F32": "<f4", "F16": "<f2", "I32": "<i4"}[v["dtype"]]).astype(
                np.float64 if v["dtype"] != "I32" else np.int64)
        out[k] = a.reshape(v["shape"])
    return out


# ---- random HF checkpoints -------------------------------------------------------

def hf_tensor_names(cfg):
    """name -> shape, in Hugging Face naming for cfg's model_type."""
    mt, D, V = cfg["model_type"], cfg["hidden_size"], cfg["vocab_size"]
    H = cfg["num_attention_heads"]
    G = cfg.get("num_key_value_heads", H)
    Dh = D // H
    names = {"model.embed_tokens.weight": (V, D), "model.norm.weight": (D,)}
    if not cfg.get("tie_word_embeddings", False):
        names["lm_head.weight"] = (V, D)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        names[p + "input_layernorm.weight"] = (D,)
        names[p + "post_attention_layernorm.weight"] = (D,)
        for k, rows in (("q", H * Dh), ("k", G * Dh), ("v", G * Dh)):
            names[p + f"self_attn.{k}_proj.weight"] = (rows, D)
            if mt in ("qwen2", "qwen2_moe"):
                names[p + f"self_attn.{k}_proj.bias"] = (rows,)
        names[p + "self_attn.o_proj.weight"] = (D, H * Dh)
        if mt == "mixtral":
            E, F = cfg["num_local_experts"], cfg["intermediate_size"]
            names[p + "block_sparse_moe.gate.weight"] = (E, D)
            for e in range(E):
                q = p + f"block_sparse_moe.experts.{e}."
                names[q + "w1.weight"] = (F, D)
                names[q + "w2.weight"] = (D, F)
                names[q + "w3.weight"] = (F, D)
        elif mt == "qwen2_moe":
            E, F, Fs = cfg["num_experts"], cfg["moe_intermediate_size"], cfg["shared_expert_intermediate_size"]
            names[p + "mlp.gate.weight"] = (E, D)
            for e in range(E):
                q = p + f"mlp.experts.{e}."
                names[q + "gate_proj.weight"] = (F, D)
                names[q + "up_proj.weight"] = (F, D)
                names[q + "down_proj.weight"] = (D, F)
            names[p + "mlp.shared_expert.gate_proj.weight"] = (Fs, D)
            names[p + "mlp.shared_expert.up_proj.weight"] = (Fs, D)
            names[p + "mlp.shared_expert.down_proj.weight"] = (D, Fs)
            names[p + "mlp.shared_expert_gate.weight"] = (1, D)
        else:
            F = cfg["intermediate_size"]
            names[p + "mlp.gate_proj.weight"] = (F, D)
            names[p + "mlp.up_proj.weight"] = (F, D)
            names[p + "mlp.down_proj.weight"] = (D, F)
    return names


def make_checkpoint(d, cfg, dtype, shards, rng):
    """Write config.json + weights; return name -> fp64 torch tensor (as stored)."""
    os.makedirs(d, exist_ok=True)
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    weights, blobs = {}, {}
    for name, shape in hf_tensor_names(cfg).items():
        if name.endswith("norm.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            a = 0.1 * rng.standard_normal(shape)
        else:
            a = rng.standard_normal(shape) * (0.5 if "embed" in name else 0.25)
        raw, stored = to_dtype(a, dtype)
        weights[name] = stored
        blobs[name] = (dtype, shape, raw)
    names = list(blobs)
    if shards == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), blobs)
    else:
        wmap = {}
        per = (len(names) + shards - 1) // shards
        for s in range(shards):
            fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: blobs[n] for n in names[s * per:(s + 1) * per]}
            write_safetensors(os.path.join(d, fn), part)
            for n in part:
                wmap[n] = fn
        json.dump({"metadata": {"total_size": 0}, "weight_map": wmap},
                  open(os.path.join(d, "model.safetensors.index.json"), "w"))
    return weights


# ---- the reference: Hugging Face forward in float64 ---------------------------------------

def rmsnorm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_half(x, theta):
    """x (T, n, Dh), HF style: pairs (j, j + Dh/2)."""
    T, Dh = x.shape[0], x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, Dh, 2, dtype=torch.float64) / Dh))
    f = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat((f, f), dim=-1)[:, None, :]
    return x * torch.cos(emb) + rotate_half(x) * torch.sin(emb)


def swiglu(x, g, u, d):
    return (torch.nn.functional.silu(x @ g.T) * (x @ u.T)) @ d.T


def hf_forward(cfg, W, tokens):
    """logits (T, V) of an HF-layout model (W: HF names -> fp64 tensors)."""
    mt, D = cfg["model_type"], cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    G = cfg.get("num_key_value_heads", H)
    Dh, T = D // H, len(tokens)
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", 10000.0)
    x = W["model.embed_tokens.weight"][torch.tensor(tokens)]
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=torch.float64), 1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rmsnorm(x, W[p + "input_layernorm.weight"], eps)

        def proj(k):
            y = h @ W[p + f"self_attn.{k}_proj.weight"].T
            b = W.get(p + f"self_attn.{k}_proj.bias")
            return y if b is None else y + b

        q = rope_half(proj("q").view(T, H, Dh), theta)
        k = rope_half(proj("k").view(T, G, Dh), theta).repeat_interleave(H // G, dim=1)
        v = proj("v").view(T, G, Dh).repeat_interleave(H // G, dim=1)
        a = torch.softmax(torch.einsum("thd,shd->hts", q, k) / Dh ** 0.5 + mask, dim=-1)
        x = x + torch.einsum("hts,shd->thd", a, v).reshape(T, H * Dh) @ W[p + "self_attn.o_proj.weight"].T
        h = rmsnorm(x, W[p + "post_attention_layernorm.weight"], eps)
        if mt == "mixtral":
            E, K = cfg["num_local_experts"], cfg["num_experts_per_tok"]
            probs = torch.softmax(h @ W[p + "block_sparse_moe.gate.weight"].T, dim=-1)
            top, idx = torch.topk(probs, K, dim=-1)
            top = top / top.sum(-1, keepdim=True)
            y = torch.zeros_like(h)
            for t in range(T):
                for j in range(K):
                    e = int(idx[t, j])
                    q_ = p + f"block_sparse_moe.experts.{e}."
                    y[t] += top[t, j] * swiglu(h[t:t + 1], W[q_ + "w1.weight"], W[q_ + "w3.weight"],
                                               W[q_ + "w2.weight"])[0]
        elif mt == "qwen2_moe":
            K = cfg["num_experts_per_tok"]
            probs = torch.softmax(h @ W[p + "mlp.gate.weight"].T, dim=-1)
            top, idx = torch.topk(probs, K, dim=-1)
            if cfg.get("norm_topk_prob", False):
                top = top / top.sum(-1, keepdim=True)
            y = torch.zeros_like(h)
            for t in range(T):
                for j in range(K):
                    q_ = p + f"mlp.experts.{int(idx[t, j])}."
                    y[t] += top[t, j] * swiglu(h[t:t + 1], W[q_ + "gate_proj.weight"], W[q_ + "up_proj.weight"],
                                               W[q_ + "down_proj.weight"])[0]
            s = p + "mlp.shared_expert."
            y = y + torch.sigmoid(h @ W[p + "mlp.shared_expert_gate.weight"].T) * swiglu(
                h, W[s + "gate_proj.weight"], W[s + "up_proj.weight"], W[s + "down_proj.weight"])
        else:
            y = swiglu(h, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"], W[p + "mlp.down_proj.weight"])
        x = x + y
    x = rmsnorm(x, W["model.norm.weight"], eps)
    head = W["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else W["lm_head.weight"]
    return x @ head.T


def load_hf_dir(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    W = {}
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    for f in files:
        for k, v in read_safetensors(os.path.join(d, f)).items():
            W[k] = torch.from_numpy(v.astype(np.float64))
    return cfg, W


def unescape(b):
    """A token line of ffn's tokenizer.txt (see include/ffn/data.h)."""
    out, i = bytearray(), 0
    while i < len(b):
        if b[i:i + 1] == b"\\":
            c = b[i + 1:i + 2]
            if c == b"x":
                out.append(int(b[i + 2:i + 4], 16)); i += 4; continue
            out += {b"\\": b"\\", b"n": b"\n", b"t": b"\t", b"r": b"\r"}[c]; i += 2; continue
        out.append(b[i]); i += 1
    return bytes(out)


# ---- running ffn ---------------------------------------------------------------------

def ffn_logits(model, ids, tmp, tag):
    out = os.path.join(tmp, f"logits_{tag}.safetensors")
    r = subprocess.run([FFN, "run", model, "--ids", " ".join(map(str, ids)), "--steps", "0",
                        "--dump-logits", out, "--threads", "2"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  ffn run {model} failed: {r.stderr.strip()}")
        return None
    return read_safetensors(out)["logits"]


def ffn_export(model, out, fmt="hf"):
    r = subprocess.run([FFN, "export", model, "--out", out, "--format", fmt, "--threads", "2"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  ffn export {model} failed: {r.stderr.strip()}")
    return r.returncode == 0


def main():
    rng = np.random.default_rng(2024)
    tmp = tempfile.mkdtemp(prefix="ffn_ckpt_")
    base = dict(vocab_size=37, hidden_size=24, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=40, max_position_embeddings=64,
                rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu")
    cases = [
        ("llama_tied_f32", dict(model_type="llama", tie_word_embeddings=True), "F32", 1),
        ("llama_untied_f16", dict(model_type="llama", tie_word_embeddings=False, rope_theta=500.0), "F16", 1),
        ("llama_untied_bf16_sharded", dict(model_type="llama", tie_word_embeddings=False), "BF16", 3),
        ("mistral_bf16", dict(model_type="mistral", sliding_window=4096, num_key_value_heads=1, rms_norm_eps=1e-6), "BF16", 1),
        ("qwen2_f32_sharded", dict(model_type="qwen2", tie_word_embeddings=True, use_sliding_window=False,
                                   sliding_window=32), "F32", 2),
        ("qwen2_f16", dict(model_type="qwen2", tie_word_embeddings=False), "F16", 1),
        ("mixtral_f32", dict(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2,
                             intermediate_size=20, sliding_window=None), "F32", 1),
        ("mixtral_bf16_sharded", dict(model_type="mixtral", num_local_experts=3, num_experts_per_tok=2,
                                      intermediate_size=12), "BF16", 2),
        ("qwen2_moe_f16", dict(model_type="qwen2_moe", num_experts=4, num_experts_per_tok=2,
                               moe_intermediate_size=12, shared_expert_intermediate_size=20,
                               decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=False,
                               tie_word_embeddings=False), "F16", 1),
        ("qwen2_moe_norm_f32_sharded", dict(model_type="qwen2_moe", num_experts=5, num_experts_per_tok=3,
                                            moe_intermediate_size=8, shared_expert_intermediate_size=16,
                                            norm_topk_prob=True, tie_word_embeddings=True), "F32", 2),
    ]
    ids = [int(t) for t in rng.integers(0, base["vocab_size"], 11)]
    for name, over, dtype, shards in cases:
        cfg = dict(base, **over)
        d = os.path.join(tmp, name)
        W = make_checkpoint(d, cfg, dtype, shards, rng)
        with torch.no_grad():
            ref = hf_forward(cfg, W, ids).numpy()
        got = ffn_logits(d, ids, tmp, name)
        if got is None:
            check(False, f"{name}: ffn run")
            continue
        err = float(np.abs(got - ref).max())
        check(got.shape == ref.shape and err <= TOL,
              f"{name} ({cfg['model_type']}, {dtype}, {shards} file(s)): max |ffn - ref| = {err:.3g} "
              f"(tolerance {TOL:g}, logits up to {np.abs(ref).max():.2f})")
        # round trip: export hf -> ffn, bitwise
        ex = os.path.join(tmp, name + "_export")
        if ffn_export(d, ex):
            again = ffn_logits(ex, ids, tmp, name + "_export")
            check(again is not None and np.array_equal(again, got),
                  f"{name}: export hf -> ffn gives identical logits (bitwise)")
            ecfg, EW = load_hf_dir(ex)
            with torch.no_grad():
                eref = hf_forward(ecfg, EW, ids).numpy()
            check(float(np.abs(eref - ref).max()) <= 1e-9,
                  f"{name}: the reference forward on the exported files (model_type "
                  f"{ecfg['model_type']}) equals it on the originals: {np.abs(eref - ref).max():.3g}")
        else:
            check(False, f"{name}: ffn export")

    # ---- an ffn checkpoint from `ffn train` ----
    ck = os.path.join(tmp, "trained")
    r = subprocess.run([FFN, "train", "--corpus-sentences", "300", "--steps", "3", "--hidden-size", "32",
                        "--intermediate-size", "48", "--num-hidden-layers", "2", "--num-attention-heads", "4",
                        "--num-key-value-heads", "2", "--seq-len", "48", "--batch-size", "2",
                        "--eval-every", "0", "--eval-batches", "1", "--threads", "2", "--out", ck],
                       capture_output=True, text=True)
    if r.returncode != 0:
        check(False, f"ffn train for a checkpoint: {r.stderr.strip()[-300:]}")
    else:
        tcfg = json.load(open(os.path.join(ck, "config.json")))
        tids = [int(t) for t in rng.integers(0, tcfg["vocab_size"], 9)]
        a = ffn_logits(ck, tids, tmp, "trained")
        ex = os.path.join(tmp, "trained_hf")
        if a is not None and ffn_export(ck, ex):
            b = ffn_logits(ex, tids, tmp, "trained_hf")
            check(b is not None and np.array_equal(a, b), "ffn checkpoint -> export hf -> ffn: identical logits (bitwise)")
            ecfg, EW = load_hf_dir(ex)
            with torch.no_grad():
                eref = hf_forward(ecfg, EW, tids).numpy()
            err = float(np.abs(eref - a).max())
            check(err <= TOL, f"ffn checkpoint -> export hf: HF reference vs ffn {err:.3g} (tolerance {TOL:g})")
            check(os.path.exists(os.path.join(ex, "tokenizer.txt")), "the exported directory carries tokenizer.txt")
            # ffn's own tokenizer: --prompt encodes with it, --emit text decodes with it
            texts = []
            for model_dir in (ck, ex):
                r1 = subprocess.run([FFN, "run", model_dir, "--prompt", "Mary gave John", "--steps", "12",
                                     "--temperature", "0", "--emit", "ids", "--threads", "2"], capture_output=True, text=True)
                r2 = subprocess.run([FFN, "run", model_dir, "--prompt", "Mary gave John", "--steps", "12",
                                     "--temperature", "0", "--emit", "text", "--threads", "2"], capture_output=True)
                texts.append(r2.stdout)
                ok = r1.returncode == 0 and r2.returncode == 0
                if ok:
                    lines = open(os.path.join(model_dir, "tokenizer.txt"), "rb").read().split(b"\n")
                    vocab = [unescape(t) for t in lines[3:3 + tcfg["vocab_size"]]]
                    dec = b"".join(vocab[int(t)] for t in r1.stdout.split())
                    ok = dec + b"\n" == r2.stdout
                check(ok, f"{os.path.basename(model_dir)}: --prompt with ffn's tokenizer.txt; --emit text "
                          f"equals the decoded --emit ids ({r2.stdout[:40]!r})")
            check(texts[0] == texts[1], "the exported directory generates the same text")
        else:
            check(False, "ffn checkpoint: run / export")

    # ---- stories260K (llama2.c) -> HF and -> llama2.c ----
    model = os.path.join(SHARED, "models", "stories260K.bin")
    sys.path.insert(0, HERE)
    import test_stories260k as l2c
    p = l2c.load_llama2c(model)
    sids = [1] + [int(t) for t in rng.integers(3, p["V"], 14)]
    with torch.no_grad():
        ref_l2c = l2c.forward(p, sids).numpy()
    orig = ffn_logits(model, sids, tmp, "stories")
    ex = os.path.join(tmp, "stories_hf")
    if orig is not None and ffn_export(model, ex):
        ecfg, EW = load_hf_dir(ex)
        with torch.no_grad():
            ref_hf = hf_forward(ecfg, EW, sids).numpy()
        err = float(np.abs(ref_hf - ref_l2c).max())
        check(ecfg["model_type"] == "llama" and err <= 1e-9,
              f"stories260K -> export hf: HF rotate_half reference on the exported files vs llama2.c "
              f"reference on the .bin: {err:.3g} (tolerance 1e-9)")
        again = ffn_logits(ex, sids, tmp, "stories_hf")
        err = float(np.abs(again - orig).max()) if again is not None else float("inf")
        check(err <= TOL, f"stories260K: ffn on the HF export vs ffn on the .bin: {err:.3g} (tolerance {TOL:g})")
        err = float(np.abs(orig - ref_l2c).max())
        check(err <= TOL, f"stories260K: ffn vs llama2.c reference {err:.3g} (tolerance {TOL:g})")
        # HF -> llama2.c -> ffn, and .bin -> llama2.c -> ffn (bitwise)
        back = os.path.join(tmp, "stories_back.bin")
        if ffn_export(ex, back, "llama2c"):
            b = ffn_logits(back, sids, tmp, "stories_back")
            err = float(np.abs(b - orig).max()) if b is not None else float("inf")
            check(err <= TOL, f"stories260K -> hf -> llama2c -> ffn vs the original: {err:.3g} (tolerance {TOL:g})")
            w0 = np.fromfile(model, dtype="<f4")[7:]
            w1 = np.fromfile(back, dtype="<f4")[7:]
            hs = p["hs"]
            fr = 2 * p["T"] * (hs // 2)
            nw = w0.size - fr  # weights before freq_cis (shared classifier: nothing after)
            check(open(model, "rb").read(28) == open(back, "rb").read(28) and np.array_equal(w0[:nw], w1[:nw])
                  and float(np.abs(w0[nw:] - w1[nw:]).max()) < 1e-5,
                  "stories260K -> hf -> llama2c: same header, same weights bit for bit (q/k permuted back)")
        else:
            check(False, "export llama2c from the HF export")
        same = os.path.join(tmp, "stories_same.bin")
        if ffn_export(model, same, "llama2c"):
            b = ffn_logits(same, sids, tmp, "stories_same")
            check(b is not None and np.array_equal(b, orig), "stories260K -> export llama2c -> ffn: identical logits (bitwise)")
        else:
            check(False, "export llama2c")
    else:
        check(False, "stories260K: run / export hf")
    # an HF llama -> llama2.c (needs eps 1e-5, theta 1e4)
    d = os.path.join(tmp, "llama_tied_f32")
    out = os.path.join(tmp, "llama_tied.bin")
    if ffn_export(d, out, "llama2c"):
        a = ffn_logits(d, ids, tmp, "lt")
        b = ffn_logits(out, ids, tmp, "lt_bin")
        err = float(np.abs(a - b).max()) if a is not None and b is not None else float("inf")
        check(err <= TOL, f"HF llama -> export llama2c (pairs) -> ffn: {err:.3g} (tolerance {TOL:g})")
    else:
        check(False, "HF llama -> export llama2c")
    print("FAIL" if failures else "PASS", f"({failures} failed checks)")
    return failures


if __name__ == "__main__":
    sys.exit(main())
