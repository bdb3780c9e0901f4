#!/usr/bin/env python3
"""kquants_e2e.py WORKDIR NODE_DIR LIBDIR -- GGUF files of q2_K, q3_K,
q5_K and iq4_xs, written by llama.cpp's own quantizer and by ffn, run in
both, against an exact forward.

A llama model of random weights (every matrix width a multiple of 256, so
no tensor falls back to a 32-block type) is written by `ffn export --format
gguf --dtype F32`, then per type:
  cpp-T.gguf  llama.cpp's llama_model_quantize (libllama through ctypes,
              the ftype of T with `pure`: every matrix in T);
  ffn-T.gguf  `ffn quantize --dtype T`.
On each file, on the same 48 ids, three next-token distributions:
  P_ffn    `ffn run --dump-logits`
  P_cpp    llama.cpp (probs.mjs, node-llama-cpp)
  P_exact  a float64 PyTorch forward (tests/parity/test_checkpoints.py's)
           over the file's weights as ffn decodes them (`ffn export --format
           hf`; ffn's decoders equal ggml's bit for bit, kquants.py).
L1 = mean over positions of Σ_v |P − Q|.  Checked: top-1 of P_ffn equals
top-1 of P_cpp wherever the exact forward's top-2 logit gap exceeds GAP (at
least MIN_DECIDED positions), and L1(ffn, cpp) <= 2 · L1(cpp, exact) +
SLACK (both round the activations to 8 bits, each its own way: the distance
between them is bounded by their distances from the exact one).  Prints all
three distances per file; for ffn's files, that ffn quantize wrote the
weights llama.cpp's quantizer wrote (decoded equal, ffn's logits bitwise
equal), llama.cpp running one of them in full."""
import ctypes
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
import ffn_testlib as tl  # noqa: E402
import test_checkpoints as ref  # noqa: E402  (the float64 HF forward)
sys.path.insert(0, HERE)
import interop  # noqa: E402  (llama.cpp's answers, kept by content)

TYPES = {"q2_K": 10, "q3_K": 12, "q5_K": 17, "iq4_xs": 30}  # llama.cpp ftypes
BYTES = {"q2_K": 84, "q3_K": 110, "q5_K": 176, "iq4_xs": 136}  # per 256 weights
GAP = 0.5
MIN_DECIDED = 16
SLACK = 0.02
V, D, H, G, L, F, CTX = 259, 256, 8, 2, 2, 512, 64
IDS = [int(x) for x in np.random.default_rng(5).integers(3, 256, size=48)]


def make_model(path, F_=F, seed=3):
    rng = np.random.default_rng(seed)
    Dh = D // H

    def mat(o, i, std=0.06):
        return (rng.standard_normal((o, i)) * std).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = {"model.embed_tokens.weight": mat(V, D, 0.15), "model.norm.weight": norm(D),
         "lm_head.weight": mat(V, D, 0.15)}
    for l in range(L):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = norm(D)
        w[p + "post_attention_layernorm.weight"] = norm(D)
        w[p + "self_attn.q_proj.weight"] = mat(H * Dh, D, 0.1)
        w[p + "self_attn.k_proj.weight"] = mat(G * Dh, D, 0.1)
        w[p + "self_attn.v_proj.weight"] = mat(G * Dh, D)
        w[p + "self_attn.o_proj.weight"] = mat(D, H * Dh)
        w[p + "mlp.gate_proj.weight"] = mat(F_, D)
        w[p + "mlp.up_proj.weight"] = mat(F_, D)
        w[p + "mlp.down_proj.weight"] = mat(D, F_)
    os.makedirs(path, exist_ok=True)
    tl.write_config(os.path.join(path, "config.json"), model_type="llama", vocab_size=V, hidden_size=D,
                    intermediate_size=F_, num_hidden_layers=L, num_attention_heads=H,
                    num_key_value_heads=G, max_position_embeddings=CTX, rms_norm_eps=1e-5,
                    rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False)
    tl.write_safetensors(os.path.join(path, "model.safetensors"), w)


_quiet = None


class QParams(ctypes.Structure):  # llama_model_quantize_params (include/llama.h)
    _fields_ = [("nthread", ctypes.c_int32), ("ftype", ctypes.c_int32),
                ("output_tensor_type", ctypes.c_int32), ("token_embedding_type", ctypes.c_int32),
                ("allow_requantize", ctypes.c_bool), ("quantize_output_tensor", ctypes.c_bool),
                ("only_copy", ctypes.c_bool), ("pure", ctypes.c_bool), ("keep_split", ctypes.c_bool),
                ("dry_run", ctypes.c_bool), ("imatrix", ctypes.c_void_p), ("kv_overrides", ctypes.c_void_p),
                ("tt_overrides", ctypes.c_void_p), ("prune_layers", ctypes.c_void_p),
                ("max_buf_size", ctypes.c_size_t)]


def cpp_quantize(libdir, src, out, ftype):
    for dep in ("libggml-base.so", "libggml.v0.4.0.so"):
        ctypes.CDLL(os.path.join(libdir, dep), mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(os.path.join(libdir, "libllama.v0.4.0.so"))
    lib.llama_model_quantize_default_params.restype = QParams
    lib.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(QParams)]
    lib.llama_model_quantize.restype = ctypes.c_uint32
    global _quiet
    _quiet = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)(lambda *a: None)
    lib.llama_log_set(_quiet, None)
    lib.llama_backend_init()
    p = lib.llama_model_quantize_default_params()
    p.nthread, p.ftype, p.pure = 1, ftype, True
    rc = lib.llama_model_quantize(src.encode(), out.encode(), ctypes.byref(p))
    if rc != 0:
        raise RuntimeError("llama_model_quantize(%s, ftype %d) returned %d" % (src, ftype, rc))


def ffn_logits(model, work, tag):
    out = os.path.join(work, tag + ".logits.safetensors")
    tl.run_ffn(["run", model, "--ids", " ".join(map(str, IDS)), "--steps", "0", "--dump-logits", out])
    return tl.read_safetensors(out)["logits"].astype(np.float64)


def exact_logits(gguf, work, tag, run=True):
    """float64 forward over the file's weights as ffn decodes them, and the weights."""
    hf = os.path.join(work, tag + ".hf")
    tl.run_ffn(["export", gguf, "--format", "hf", "--out", hf])
    with open(os.path.join(hf, "config.json")) as f:
        cfg = json.load(f)
    W = {k: torch.from_numpy(np.asarray(v, dtype=np.float64))
         for k, v in tl.read_safetensors(os.path.join(hf, "model.safetensors")).items()}
    if not run:
        return None, W
    with torch.no_grad():
        return ref.hf_forward(cfg, W, IDS).numpy(), W


def softmax(z):
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def l1(p, q):
    return float(np.abs(p - q).sum(axis=1).mean())


def evaluate(tag, path, work, node_dir):
    """One file: the three distances and the checks; returns (line, failures)."""
    z_ffn = ffn_logits(path, work, tag)
    p_ffn, p_cpp = softmax(z_ffn), interop.cpp_probs(path, node_dir, IDS)
    z_ex, W = exact_logits(path, work, tag)
    p_ex = softmax(z_ex)
    if p_cpp.shape != p_ffn.shape:
        return "FAIL %s" % tag, ["%s: llama.cpp gave %s, ffn %s" % (tag, p_cpp.shape, p_ffn.shape)], z_ffn, W
    srt = np.sort(z_ex, axis=1)
    decided = (srt[:, -1] - srt[:, -2]) > GAP
    top_ok = (p_ffn.argmax(1) == p_cpp.argmax(1)) | ~decided
    a, b, c = l1(p_ffn, p_cpp), l1(p_cpp, p_ex), l1(p_ffn, p_ex)
    bound = 2 * b + SLACK
    bad = []
    if not top_ok.all():
        bad.append("top-1 differs at positions %s" % list(np.nonzero(~top_ok)[0]))
    if decided.sum() < MIN_DECIDED:
        bad.append("only %d positions with a top-2 gap > %g" % (decided.sum(), GAP))
    if not a <= bound:
        bad.append("L1(ffn, cpp) over 2 L1(cpp, exact) + %g" % SLACK)
    line = "%s %-11s %.2e    %.2e      %.2e      %.3f  %d/%d  %d" % (
        "FAIL" if bad else "ok  ", tag, a, b, c, bound, int((top_ok & decided).sum()),
        int(decided.sum()), os.path.getsize(path))
    return line + (("  <- " + "; ".join(bad)) if bad else ""), ["%s: %s" % (tag, m) for m in bad], z_ffn, W


def main():
    work, node_dir, libdir = sys.argv[1:4]
    src = os.path.join(work, "src")
    make_model(src)
    f32 = os.path.join(work, "src-f32.gguf")
    tl.run_ffn(["export", src, "--format", "gguf", "--dtype", "F32", "--out", f32])
    failures, checks = [], 0
    print("file            L1(ffn,cpp)  L1(cpp,exact)  L1(ffn,exact)  bound  top-1   bytes")
    for ty, ftype in TYPES.items():
        cpp = os.path.join(work, "cpp-%s.gguf" % ty)
        cpp_quantize(libdir, f32, cpp, ftype)
        line, bad, z_cpp_file, W_cpp = evaluate("cpp-" + ty, cpp, work, node_dir)
        checks += 1
        failures += bad
        print(line)
        # ffn quantize writes the same weights: decoded equal, ffn's logits equal bit for bit;
        # llama.cpp runs one of ffn's files (its metadata) in the full check
        own = os.path.join(work, "ffn-%s.gguf" % ty)
        tl.run_ffn(["quantize", src, "--dtype", ty, "--out", own])
        if ty == "iq4_xs":
            line, bad, _, _ = evaluate("ffn-" + ty, own, work, node_dir)
            checks += 1
            failures += bad
            print(line)
        z_own = ffn_logits(own, work, "ffn-" + ty)
        _, W_own = exact_logits(own, work, "ffn-w-" + ty, run=False)
        same_w = W_own.keys() == W_cpp.keys() and all(torch.equal(W_own[k], W_cpp[k]) for k in W_cpp)
        checks += 1
        if not (same_w and np.array_equal(z_own, z_cpp_file)):
            failures.append("ffn-%s: ffn quantize's weights %s llama.cpp's, logits %s" % (
                ty, "equal" if same_w else "differ from", "equal" if np.array_equal(z_own, z_cpp_file) else "differ"))
            print("FAIL " + failures[-1])
        else:
            print("ok   ffn-%-7s the weights llama.cpp's quantizer wrote (decoded equal), logits bitwise equal; "
                  "%d bytes (f32 %d), %.4f bits per matrix weight" % (ty, os.path.getsize(own), os.path.getsize(f32),
                                                                     8.0 * BYTES[ty] / 256))
    print("note: llama.cpp's results for %d files reused (by content, from an earlier run)" % interop.CACHE_USED[0])
    print("kquants_e2e: %d checks, %d failed" % (checks, len(failures)))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
