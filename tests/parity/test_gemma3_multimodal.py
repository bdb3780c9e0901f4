#!/usr/bin/env python3
"""test_gemma3_multimodal.py -- Gemma3ForConditionalGeneration directories
(what gemma-3-4b and larger are published as): config.json of model_type
gemma3 with the text model's config under text_config (its absent fields
Gemma3TextConfig's defaults), the text model's tensors under
language_model.model.* (Google's files) or model.language_model.*
(save_pretrained since transformers 4.52), and the vision tower's and the
projector's tensors, which ffn leaves unread.

A small random Gemma 3 text model (tests/llamacpp/families.py, gemma3:
sliding and global layers, q/k norms, post-norms, linear RoPE scaling) is
written as a plain gemma3_text directory and in both multimodal layouts
(one file; three shards with model.safetensors.index.json), with random
vision tensors beside it.  Checks:
  - ffn run --dump-logits on each multimodal directory = on the plain one,
    bit for bit, and within 1e-5 (max |dP|) of the float64 forward
    (families.gemma_reference) over the same weights;
  - text_config leaving out the fields whose values here are
    Gemma3TextConfig's defaults (rope_theta 1e6, rms_norm_eps 1e-6, ...)
    gives the same logits bitwise;
  - ffn run says how many vision tensors it left unread;
  - ffn export --format hf writes a gemma3_text directory that runs to the
    same logits bitwise;
  - ffn params on the multimodal config.json = on the plain one = the text
    model's weight count; on gemma-3-4b's published config.json (most sizes
    left to the defaults) the count computed here from its sizes;
  - bad input: no text_config; a text_config of another model_type; a
    language-model tensor missing -- each a non-zero exit naming
    config.json / text_config or the tensor.
Exit code = number of failed checks."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "llamacpp"))
import ffn_testlib as tl  # noqa: E402
import families as fam  # noqa: E402

FFN = tl.FFN if hasattr(tl, "FFN") else os.environ.get("FFN_BIN", "build/ffn")
TOL = 1e-5
IDS = [1, 5, 7, 9, 11, 3, 20, 2, 31, 8, 14, 6]
failures = 0


def check(ok, what):
    global failures
    failures += not ok
    print(("ok   " if ok else "FAIL ") + what)


def logits(model, tmp, tag):
    out = os.path.join(tmp, tag + ".logits.safetensors")
    r = subprocess.run([FFN, "run", model, "--ids", " ".join(map(str, IDS)), "--steps", "0",
                        "--dump-logits", out], capture_output=True, text=True)
    if r.returncode:
        print("  ffn run %s: %s" % (model, r.stderr.strip()[-400:]))
        return None, r.stderr
    return tl.read_safetensors(out)["logits"], r.stderr


def vision_tensors(rng, newer):
    pre = "model." if newer else ""
    w = {}
    for l in range(2):
        p = pre + "vision_tower.vision_model.encoder.layers.%d." % l
        w[p + "self_attn.q_proj.weight"] = rng.standard_normal((16, 16)).astype(np.float32)
        w[p + "mlp.fc1.weight"] = rng.standard_normal((24, 16)).astype(np.float32)
    w[pre + "vision_tower.vision_model.embeddings.patch_embedding.weight"] = \
        rng.standard_normal((16, 3, 4, 4)).astype(np.float32)
    w[pre + "multi_modal_projector.mm_input_projection_weight"] = \
        rng.standard_normal((16, fam.D)).astype(np.float32)
    w[pre + "multi_modal_projector.mm_soft_emb_norm.weight"] = np.ones(16, np.float32)
    return w


def wrap_config(cfg, drop=()):
    text = {k: v for k, v in cfg.items() if k not in drop}
    return {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
            "text_config": text, "boi_token_index": 255999, "image_token_index": 262144,
            "mm_tokens_per_image": 256,
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 16,
                              "num_hidden_layers": 2, "patch_size": 4}}


def write_multimodal(d, w, cfg, rng, newer, shards=1, drop=(), skip=None):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(wrap_config(cfg, drop), f, indent=1)
    t = {}
    for k, v in w.items():
        if k == skip:
            continue
        if k.startswith("model."):
            k = ("model.language_model." if newer else "language_model.model.") + k[6:]
        else:  # lm_head.weight
            k = k if newer else "language_model." + k
        t[k] = v
    t.update(vision_tensors(rng, newer))
    names = sorted(t)
    if shards == 1:
        tl.write_safetensors(os.path.join(d, "model.safetensors"), t)
        return
    per = (len(names) + shards - 1) // shards
    wmap = {}
    for s in range(shards):
        fn = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = {n: t[n] for n in names[s * per:(s + 1) * per]}
        tl.write_safetensors(os.path.join(d, fn), part)
        wmap.update({n: fn for n in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": wmap}, f)


def expect_fail(d, want, what, tmp):
    out = os.path.join(tmp, "never.logits.safetensors")
    r = subprocess.run([FFN, "run", d, "--ids", "1 2", "--steps", "0", "--dump-logits", out],
                       capture_output=True, text=True)
    ok = r.returncode != 0 and want in r.stderr and not os.path.exists(out)
    check(ok, "%s: exit %d, %s" % (what, r.returncode, r.stderr.strip()[-160:]))


def main():
    tmp = tempfile.mkdtemp(prefix="ffn_gemma3mm_")
    rng = np.random.default_rng(21)
    fam.V, fam.D, fam.H, fam.G, fam.L, fam.T_CTX, fam.F = 40, 32, 2, 1, 2, 32, 48
    plain = os.path.join(tmp, "plain")
    w, cfg = fam.make_model(plain, "gemma3", 77)
    base, _ = logits(plain, tmp, "plain")
    check(base is not None, "the plain gemma3_text directory runs")
    if base is None:
        return 1
    p_ref = fam.gemma_reference(w, cfg, IDS)
    z = base.astype(np.float64)
    p_plain = np.exp(z - z.max(1, keepdims=True))
    p_plain /= p_plain.sum(1, keepdims=True)
    check(float(np.abs(p_plain - p_ref).max()) <= TOL,
          "plain gemma3_text vs float64 forward: max |dP| %.1e (tolerance %g)"
          % (float(np.abs(p_plain - p_ref).max()), TOL))
    n_vision = len(vision_tensors(np.random.default_rng(0), False))
    for newer in (0, 1):
        for shards in (1, 3):
            tag = "model.language_model" if newer else "language_model.model"
            d = os.path.join(tmp, "mm_%d_%d" % (newer, shards))
            write_multimodal(d, w, cfg, rng, newer, shards)
            got, err = logits(d, tmp, "mm_%d_%d" % (newer, shards))
            same = got is not None and np.array_equal(got, base)
            check(same, "%s.* in %d file(s): logits = the plain directory's, bitwise" % (tag, shards))
            note = "%d tensors of the vision tower" % n_vision
            check(note in err, "%s in %d file(s): ffn run says '%s ... left unread'"
                  % (tag, shards, note))
    # text_config without the fields whose values here are Gemma3TextConfig's defaults
    cfg_d = dict(cfg)
    assert cfg_d["rope_theta"] == 1e6
    d = os.path.join(tmp, "mm_defaults")
    write_multimodal(d, w, cfg_d, rng, 0, 1, drop=("rope_theta", "rms_norm_eps",
                                                   "hidden_activation", "tie_word_embeddings",
                                                   "rope_local_base_freq"))
    got, _ = logits(d, tmp, "mm_defaults")
    check(got is not None and np.array_equal(got, base),
          "text_config without rope_theta, rms_norm_eps, hidden_activation, tie_word_embeddings, "
          "rope_local_base_freq (Gemma3TextConfig's defaults): the same logits bitwise")
    # export: a plain gemma3_text directory
    out = os.path.join(tmp, "exported")
    r = subprocess.run([FFN, "export", os.path.join(tmp, "mm_0_1"), "--format", "hf", "--out", out],
                       capture_output=True, text=True)
    got = logits(out, tmp, "exported")[0] if r.returncode == 0 else None
    mt = json.load(open(os.path.join(out, "config.json")))["model_type"] if r.returncode == 0 else None
    check(got is not None and np.array_equal(got, base) and mt == "gemma3_text",
          "export --format hf of the multimodal directory: model_type %s, same logits bitwise" % mt)
    # ffn params: the multimodal config.json counts its text model
    def params(config):
        r = subprocess.run([FFN, "params", config, "--json"], capture_output=True, text=True)
        return json.loads(r.stdout)["total_params"] if r.returncode == 0 else r.stderr.strip()
    n_plain = params(os.path.join(plain, "config.json"))
    got = [params(os.path.join(tmp, d, "config.json")) for d in ("mm_0_1", "mm_defaults")]
    n_st = sum(v.size for v in w.values())
    check(got == [n_plain, n_plain] and n_plain == n_st,
          "ffn params on the multimodal config.json (full, and with defaults left out) = on the plain "
          "one = the text model's %d weights: %s" % (n_st, got))
    # gemma-3-4b's text_config as published (its other sizes Gemma3TextConfig's
    # defaults: vocab 262208, 8 heads, 4 kv heads, head_dim 256, tied head)
    g4 = os.path.join(tmp, "g4")
    os.makedirs(g4)
    with open(os.path.join(g4, "config.json"), "w") as f:
        json.dump({"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
                   "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                                   "model_type": "gemma3_text", "num_hidden_layers": 34,
                                   "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                                   "sliding_window": 1024},
                   "vision_config": {"model_type": "siglip_vision_model"}}, f)
    V, D, F, L, H, G, Dh = 262208, 2560, 10240, 34, 8, 4, 256
    want = V * D + D + L * (D * (H + 2 * G) * Dh + H * Dh * D + 2 * Dh + 4 * D + 3 * D * F)
    check(params(os.path.join(g4, "config.json")) == want,
          "ffn params on gemma-3-4b's config.json: %s, the text model's count from its sizes %d"
          % (params(os.path.join(g4, "config.json")), want))
    # bad input
    d = os.path.join(tmp, "bad_no_text")
    write_multimodal(d, w, cfg, rng, 0)
    c = json.load(open(os.path.join(d, "config.json")))
    del c["text_config"]
    json.dump(c, open(os.path.join(d, "config.json"), "w"))
    expect_fail(d, "config.json: text_config: expected an object", "no text_config", tmp)
    d = os.path.join(tmp, "bad_text_type")
    write_multimodal(d, w, dict(cfg, model_type="llama"), rng, 0)
    expect_fail(d, "text_config: model_type 'llama', expected gemma3_text", "text_config of llama", tmp)
    d = os.path.join(tmp, "bad_missing")
    write_multimodal(d, w, cfg, rng, 0, skip="model.layers.1.mlp.down_proj.weight")
    expect_fail(d, "language_model.model.layers.1.mlp.down_proj.weight", "a text tensor missing", tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    print("%d failure(s)" % failures)
    return failures


if __name__ == "__main__":
    sys.exit(main())
