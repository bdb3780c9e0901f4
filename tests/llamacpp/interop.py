"""interop.py -- GGUF files written by ffn, checked against llama.cpp.

For each architecture (llama, qwen2, a Mixtral-style llama MoE, qwen2moe)
a Hugging Face directory of random small weights is made here (numpy,
seeded; q/k rows in Hugging Face's rotate_half order), written as GGUF by
`ffn export --format gguf` (f32, f16) and `ffn quantize` (bf16, q8_0, q4_0,
q4_K), and evaluated on the same token sequence three ways:
  ffn on the source directory        P_src   (ffn run --dump-logits)
  ffn on the GGUF file               P_ffn
  llama.cpp on the GGUF file         P_cpp   (probs.mjs, node-llama-cpp)
Per position t (T = 60 of them) the next-token distributions are compared:
  f32:   max |P_ffn - P_cpp| <= 1e-4 and max |P_src - P_cpp| <= 1e-4;
  every type: top-1 of P_ffn equals top-1 of P_cpp at every position whose
         top-2 logit gap (ffn) exceeds GAP[type] (at least 20 positions), and
         mean KL(P_ffn || P_cpp) <= KL_SAME[type] (the same weights; llama.cpp
         rounds the activations of a quantized product to 8 bits, ffn does not);
  every type: mean KL(P_src || P_cpp) <= KL_SRC[type] (the format's own loss),
         and for f32, f16, bf16 top-1 of P_src equals top-1 of P_cpp where the
         source's gap exceeds GAP[type].
The llama.cpp run succeeding at all is the check that the metadata,
tensor names and vocabulary are complete; the f32 agreement is the check
of the q/k permutation (llama) and of the RoPE convention (qwen2*).

  python3 interop.py WORKDIR NODE_DIR      (FFN_BIN: the ffn binary)
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
import ffn_testlib as tl  # noqa: E402

TYPES = ["f32", "f16", "bf16", "q8_0", "q4_0", "q4_K", "q6_K"]
F32_TOL = 1e-4
# A position counts for top-1 when ffn's top-2 logit gap exceeds GAP[type]:
# the rounding of the type and the 8-bit activations of the integer formats
# (llama.cpp's and ffn's kernels each round them their own way) can flip
# nearer ties.  At least MIN_DECIDED positions must count.
GAP = {"f32": 0.01, "f16": 0.05, "bf16": 0.1, "q8_0": 0.3, "q4_0": 0.5, "q4_K": 0.7, "q6_K": 0.3}
MIN_DECIDED = 20
# Mean KL bounds in nats, about 3x the largest value measured over the four
# architectures.  These random models have no redundancy, so 4-bit types
# lose much more here than on a trained model (docs/QUANTIZATION.md).
KL_SAME = {"f32": 1e-6, "f16": 3e-5, "bf16": 1e-3, "q8_0": 1e-2, "q4_0": 1.5e-2, "q4_K": 2.5e-2,
           "q6_K": 1e-2}
KL_SRC = {"f32": 1e-6, "f16": 5e-5, "bf16": 2e-3, "q8_0": 7e-2, "q4_0": 2.7, "q4_K": 2.6,
          "q6_K": 0.2}
# top-1 against the source model is required for the types that keep it
SRC_TOP1 = {"f32", "f16", "bf16"}

V, D, H, G, L, T_CTX = 259, 256, 8, 2, 2, 64
globals_dims = (V, D, H, G, L, T_CTX)
IDS = [int(x) for x in np.random.default_rng(7).integers(3, 256, size=60)]


def make_model(path, arch, seed, small=False):
    """A Hugging Face directory of random weights for `arch` (small: tiny
    dimensions, for seed files)."""
    rng = np.random.default_rng(seed)
    V, D, H, G, L, T_CTX = (40, 32, 2, 1, 1, 16) if small else globals_dims
    Dh = D // H
    F = 32 if small else 320
    Fe, Fs = (32, 32) if small else (192, 256)
    cfg = dict(vocab_size=V, hidden_size=D, intermediate_size=F, num_hidden_layers=L,
               num_attention_heads=H, num_key_value_heads=G, max_position_embeddings=T_CTX,
               rms_norm_eps=1e-5, rope_theta=10000.0, hidden_act="silu",
               tie_word_embeddings=True)
    if arch == "llama":
        cfg.update(model_type="llama")
    elif arch == "qwen2":
        cfg.update(model_type="qwen2", rope_theta=1e6, rms_norm_eps=1e-6,
                   tie_word_embeddings=False)
    elif arch == "mixtral":
        cfg.update(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2)
    elif arch == "qwen2moe":
        cfg.update(model_type="qwen2_moe", num_experts=4, num_experts_per_tok=2,
                   moe_intermediate_size=Fe, shared_expert_intermediate_size=Fs,
                   norm_topk_prob=False, decoder_sparse_step=1, tie_word_embeddings=False)
    w = {}

    def mat(out, inp, std=0.06):
        return (rng.standard_normal((out, inp)) * std).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w["model.embed_tokens.weight"] = mat(V, D, 0.15)
    for l in range(L):
        p = "model.layers.%d." % l
        w[p + "input_layernorm.weight"] = norm(D)
        w[p + "self_attn.q_proj.weight"] = mat(H * Dh, D, 0.1)
        w[p + "self_attn.k_proj.weight"] = mat(G * Dh, D, 0.1)
        w[p + "self_attn.v_proj.weight"] = mat(G * Dh, D)
        w[p + "self_attn.o_proj.weight"] = mat(D, H * Dh)
        if arch in ("qwen2", "qwen2moe"):
            for n, rows in (("q", H * Dh), ("k", G * Dh), ("v", G * Dh)):
                w[p + "self_attn.%s_proj.bias" % n] = (0.2 * rng.standard_normal(rows)).astype(np.float32)
        w[p + "post_attention_layernorm.weight"] = norm(D)
        if arch in ("llama", "qwen2"):
            w[p + "mlp.gate_proj.weight"] = mat(F, D)
            w[p + "mlp.up_proj.weight"] = mat(F, D)
            w[p + "mlp.down_proj.weight"] = mat(D, F)
        elif arch == "mixtral":
            w[p + "block_sparse_moe.gate.weight"] = mat(4, D, 0.3)
            for e in range(4):
                q = p + "block_sparse_moe.experts.%d." % e
                w[q + "w1.weight"] = mat(F, D)
                w[q + "w2.weight"] = mat(D, F)
                w[q + "w3.weight"] = mat(F, D)
        else:
            w[p + "mlp.gate.weight"] = mat(4, D, 0.3)
            for e in range(4):
                q = p + "mlp.experts.%d." % e
                w[q + "gate_proj.weight"] = mat(Fe, D)
                w[q + "up_proj.weight"] = mat(Fe, D)
                w[q + "down_proj.weight"] = mat(D, Fe)
            w[p + "mlp.shared_expert.gate_proj.weight"] = mat(Fs, D)
            w[p + "mlp.shared_expert.up_proj.weight"] = mat(Fs, D)
            w[p + "mlp.shared_expert.down_proj.weight"] = mat(D, Fs)
            w[p + "mlp.shared_expert_gate.weight"] = mat(1, D, 0.1)
    w["model.norm.weight"] = norm(D)
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = mat(V, D, 0.15)
    os.makedirs(path, exist_ok=True)
    tl.write_config(os.path.join(path, "config.json"), **cfg)
    tl.write_safetensors(os.path.join(path, "model.safetensors"), w)


def ffn_probs(model, work, tag):
    out = os.path.join(work, tag + ".logits.safetensors")
    tl.run_ffn(["run", model, "--ids", " ".join(map(str, IDS)), "--steps", "0",
                "--dump-logits", out])
    z = tl.read_safetensors(out)["logits"].astype(np.float64)
    return z


def softmax(z):
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


# llama.cpp's probabilities are kept by the sha-256 of everything they
# depend on (the GGUF's bytes, the ids, the script that ran llama.cpp --
# probs.mjs or probs_many.mjs -- and node-llama-cpp's lock file) in NODE_DIR/probs-cache: the asan-cli round of a test writes the
# same files as the plain round (ffn's writers are deterministic) and
# reads llama.cpp's answer back instead of running it again.  A file whose
# bytes differ is a new key, so it is run; CACHE_USED counts the reuses
# (the test prints them as a note).
CACHE_USED = [0]


def _cache_key(gguf, node_dir, script, ids):
    import hashlib
    h = hashlib.sha256()
    for path in (gguf, os.path.join(node_dir, script), os.path.join(node_dir, "package-lock.json")):
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    h.update(" ".join(map(str, ids)).encode())
    return h.hexdigest()


def cached_probs(gguf, node_dir, script="probs.mjs", ids=None):
    """llama.cpp's probabilities for gguf on ids (IDS if None), as script
    gives them, from the cache; or None."""
    key = _cache_key(gguf, node_dir, script, IDS if ids is None else ids)
    path = os.path.join(node_dir, "probs-cache", key + ".json")
    try:
        with open(path) as f:
            r = json.load(f)
        p = np.array(r["probs"], dtype=np.float64)
    except (OSError, ValueError, KeyError):
        return None
    CACHE_USED[0] += 1
    return p


def cache_probs(gguf, node_dir, text, script="probs.mjs", ids=None):
    """Keep llama.cpp's answer (script's JSON text) for gguf, written whole or not at all."""
    import tempfile
    cache = os.path.join(node_dir, "probs-cache")
    os.makedirs(cache, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=cache, suffix=".tmp", delete=False) as f:
        f.write(text)
    key = _cache_key(gguf, node_dir, script, IDS if ids is None else ids)
    os.replace(f.name, os.path.join(cache, key + ".json"))


def cpp_probs(gguf, node_dir, ids=None):
    """llama.cpp's next-token distributions on ids (IDS if None): probs.mjs, or the cache."""
    ids = IDS if ids is None else ids
    p = cached_probs(gguf, node_dir, ids=ids)
    if p is not None:
        return p
    env = dict(os.environ, NODE_LLAMA_CPP_SKIP_DOWNLOAD="true", NODE_PATH=os.path.join(node_dir, "node_modules"))
    script = os.path.join(node_dir, "probs.mjs")
    p = subprocess.run(["node", script, gguf, " ".join(map(str, ids))], capture_output=True,
                       text=True, env=env, cwd=node_dir)
    if p.returncode != 0:
        raise RuntimeError("llama.cpp (probs.mjs) on %s: exit %d\n%s" % (gguf, p.returncode, p.stderr[-3000:]))
    r = json.loads(p.stdout)
    cache_probs(gguf, node_dir, p.stdout, ids=ids)
    return np.array(r["probs"], dtype=np.float64)


def kl(p, q):
    """Mean over positions of KL(p || q), nats."""
    q = np.maximum(q, 1e-30)
    pl = np.where(p > 0, p * (np.log(np.maximum(p, 1e-300)) - np.log(q)), 0.0)
    return float(pl.sum(axis=1).mean())


def main():
    work, node_dir = sys.argv[1], sys.argv[2]
    failures = []
    checks = 0
    for seed, arch in enumerate(["llama", "qwen2", "mixtral", "qwen2moe"]):
        src = os.path.join(work, arch)
        make_model(src, arch, 100 + seed)
        z_src = ffn_probs(src, work, arch + ".src")
        p_src = softmax(z_src)
        for ty in TYPES:
            gguf = os.path.join(work, "%s-%s.gguf" % (arch, ty))
            if ty in ("f32", "f16"):
                tl.run_ffn(["export", src, "--format", "gguf", "--dtype", ty.upper(), "--out", gguf])
            else:
                tl.run_ffn(["quantize", src, "--dtype", ty, "--out", gguf])
            z_ffn = ffn_probs(gguf, work, "%s-%s" % (arch, ty))
            p_ffn = softmax(z_ffn)
            p_cpp = cpp_probs(gguf, node_dir)
            if p_cpp.shape != p_ffn.shape:
                failures.append("%s %s: llama.cpp gave %s, ffn %s" % (arch, ty, p_cpp.shape, p_ffn.shape))
                continue
            srt = np.sort(z_ffn, axis=1)
            decided = (srt[:, -1] - srt[:, -2]) > GAP[ty]
            top_ok = (p_ffn.argmax(1) == p_cpp.argmax(1)) | ~decided
            srt = np.sort(z_src, axis=1)
            src_decided = (srt[:, -1] - srt[:, -2]) > GAP[ty]
            src_top_ok = (p_src.argmax(1) == p_cpp.argmax(1)) | ~src_decided
            k_same, k_src = kl(p_ffn, p_cpp), kl(p_src, p_cpp)
            d_same = float(np.abs(p_ffn - p_cpp).max())
            d_src = float(np.abs(p_src - p_cpp).max())
            agree = float((p_src.argmax(1) == p_cpp.argmax(1)).mean())
            line = ("%-8s %-5s T=%d  KL(ffn||cpp) %.2e (<= %.0e)  KL(src||cpp) %.2e (<= %.0e)  "
                    "max|dP| same %.1e src %.1e  top-1 same %d/%d decided  src-vs-cpp %.0f%%"
                    % (arch, ty, len(IDS), k_same, KL_SAME[ty], k_src, KL_SRC[ty], d_same, d_src,
                       int((top_ok & decided).sum()), int(decided.sum()), 100 * agree))
            bad = []
            if not top_ok.all():
                bad.append("top-1 differs at positions %s" % list(np.nonzero(~top_ok)[0]))
            if decided.sum() < MIN_DECIDED:
                bad.append("only %d positions with a top-2 gap > %g" % (decided.sum(), GAP[ty]))
            if ty in SRC_TOP1 and not src_top_ok.all():
                bad.append("top-1 of the source differs at positions %s"
                           % list(np.nonzero(~src_top_ok)[0]))
            if k_same > KL_SAME[ty]:
                bad.append("KL(ffn||cpp) over its bound")
            if k_src > KL_SRC[ty]:
                bad.append("KL(src||cpp) over its bound")
            if ty == "f32" and (d_same > F32_TOL or d_src > F32_TOL):
                bad.append("f32 probabilities differ by more than %g" % F32_TOL)
            checks += 1
            print(("FAIL " if bad else "ok   ") + line + ("  <- " + "; ".join(bad) if bad else ""))
            if bad:
                failures.append("%s %s: %s" % (arch, ty, "; ".join(bad)))
    print("interop: %d checks, %d failed" % (checks, len(failures)))
    if CACHE_USED[0]:
        print("note: interop: llama.cpp's results for %d of the %d GGUF files reused (the same bytes, "
              "ids and llama.cpp as an earlier run)" % (CACHE_USED[0], checks))
    for f in failures:
        print("FAIL " + f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
