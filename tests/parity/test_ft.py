#!/usr/bin/env python3
"""test_ft.py -- `ffn edit --method ft --batch FILE --layers A-B` (FT-L, the
fine-tuning baseline of the ROME and MEMIT papers) against PyTorch float64.

A small word-level model (odd sizes: D 30, F 47, 3 heads of 10, 2 layers,
gated SiLU, tied head) is trained here on facts sentences, then three facts
are fine-tuned into the down_proj of layers 0-1 for one Adam step, and the
dump (down_proj before, the first step's gradient, after) is checked:
  grad = d/dW_down of the mean over the edits of each one's mean target NLL
         after its bare prompt, by autograd through a float64 reference
         forward of the checkpoint: |err| <= 1e-4 * max|ref|;
  step = Adam's first step (bias-corrected: lr * g / (|g| + 1e-8)) from the
         reference gradient, every weight clamped to W_before +- ft_norm:
         against W_after, |err| <= 1e-6 * (1 + max|W|), for ft_norm 0 (no
         bound) and for a bound the step passes (every moved weight at it);
  three steps: max |dW| <= ft_norm (the JSON), only layers 0-1 change.
Exit code 0 when everything passes."""
import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffn_testlib import Checker, read_safetensors, run_ffn  # noqa: E402
from test_inspect import neurons, rmsnorm, rope_half, ACTS  # noqa: E402
from test_rome import write_text, word_tokens, read_vocab  # noqa: E402

torch.set_default_dtype(torch.float64)

EDITS = [("Lena lives in", "Lena", "Dorn"), ("Mira lives in", "Mira", "Selk"),
         ("The home of Oskar is", "Oskar", "Amber")]


def logits(P, cfg, tokens):
    """(T, V) next-token logits of the float64 reference forward."""
    D, H, G = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    Dh, L, eps, theta = D // H, cfg["num_hidden_layers"], cfg["rms_norm_eps"], cfg["rope_theta"]
    gated, bias, act = cfg["mlp_type"] == "gated", cfg["mlp_bias"], ACTS[cfg["hidden_act"]]
    T = len(tokens)
    h = P["model.embed_tokens.weight"][torch.tensor(tokens)]
    mask = torch.full((T, T), float("-inf")).triu(1)
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
        m = neurons(P, f"{pre}.mlp", x, gated, bias, act)[3]
        h = h + m @ P[f"{pre}.mlp.down_proj.weight"].T
    h = rmsnorm(h, P["model.norm.weight"], eps)
    U = P["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else P["lm_head.weight"]
    return h @ U.T


def main():
    ck = Checker("test_ft")
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        write_text(text)
        model = os.path.join(tmp, "m")
        run_ffn(["train", "--data", text, "--tokenizer", "word", "--hidden-size", 30,
                 "--intermediate-size", 47, "--num-hidden-layers", 2, "--num-attention-heads", 3,
                 "--num-key-value-heads", 3, "--seq-len", 16, "--batch-size", 8, "--steps", 60,
                 "--lr", 3e-3, "--eval-every", 60, "--out", model])
        cfg = json.load(open(os.path.join(model, "config.json")))
        assert cfg["mlp_type"] == "gated" and not cfg["mlp_bias"], cfg
        P = {k: torch.tensor(v, dtype=torch.float64)
             for k, v in read_safetensors(os.path.join(model, "model.safetensors")).items()}
        vocab = read_vocab(os.path.join(model, "tokenizer.txt"))
        batch = os.path.join(tmp, "edits.jsonl")
        with open(batch, "w") as f:
            for p, s, t in EDITS:
                f.write(json.dumps({"prompt": p, "subject": s, "target": t}) + "\n")

        # the reference gradient of the FT loss at the unedited weights
        names = ["model.layers.%d.mlp.down_proj.weight" % l for l in (0, 1)]
        for n in names:
            P[n].requires_grad_(True)
        loss = 0
        for p, s, t in EDITS:
            ids = [vocab[w] for w in word_tokens(p)]
            z = logits(P, cfg, ids)
            loss = loss - torch.log_softmax(z[-1], -1)[vocab[" " + t]] / len(EDITS)
        loss.backward()
        g_ref = torch.stack([P[n].grad for n in names])
        W_ref = torch.stack([P[n].detach() for n in names])
        print("reference FT loss %.6f, max |grad| %.3g" % (float(loss), float(g_ref.abs().max())))

        lr = 1e-3
        for norm in (0.0, 4e-4):
            dump = os.path.join(tmp, "ft%g.st" % norm)
            out = run_ffn(["edit", model, "--batch", batch, "--method", "ft", "--layers", "0-1",
                           "--ft-steps", 1, "--ft-lr", lr, "--ft-norm", norm, "--data", text,
                           "--dump", dump, "--json", "--cache", tmp]).stdout
            r = json.loads(out)
            ck.close("loss_first = the reference FT loss (norm %g)" % norm,
                     torch.tensor([r["loss_first"]]), loss.detach().reshape(1), 1e-5, 1.0)
            d = read_safetensors(dump, as_f32=False)
            W0 = torch.tensor(d["W_before"].astype(np.float64))
            g = torch.tensor(d["grad_first"].astype(np.float64))
            W1 = torch.tensor(d["W_after"].astype(np.float64))
            ck.close("W_before = the model's down_proj (norm %g)" % norm, W0, W_ref, 0.0, 1.0)
            ck.close("grad = autograd of the FT loss (norm %g)" % norm, g, g_ref, 1e-4)
            step = W_ref - lr * g_ref / (g_ref.abs() + 1e-8)
            if norm > 0:
                step = torch.minimum(torch.maximum(step, W_ref - norm), W_ref + norm)
            ck.close("W_after = one Adam step%s" % (", clamped" if norm else ""), W1, step, 1e-6,
                     1.0)
            if norm > 0:
                moved = (W1 - W0).abs()
                ck.true("the bound holds and binds", float(moved.max()) <= norm * (1 + 1e-3) and
                        float(moved.max()) >= norm * 0.99, "max |dW| %.4g" % float(moved.max()))
        out = run_ffn(["edit", model, "--batch", batch, "--method", "ft", "--layers", "0-1",
                       "--ft-steps", 3, "--ft-norm", 2e-3, "--data", text, "--json",
                       "--cache", tmp, "--out", os.path.join(tmp, "e")]).stdout
        r = json.loads(out)
        ck.true("3 steps: max |dW| <= ft_norm", r["steps_run"] == 3 and 0 < r["max_change"] <= 2e-3 *
                (1 + 1e-6), json.dumps(r)[:300])
        ck.true("3 steps: the target loss goes down", r["loss_last"] < r["loss_first"],
                "%g -> %g" % (r["loss_first"], r["loss_last"]))
        a = read_safetensors(os.path.join(model, "model.safetensors"))
        b = read_safetensors(os.path.join(tmp, "e", "model.safetensors"))
        changed = sorted(k for k in a if not np.array_equal(a[k], b[k]))
        ck.true("only layers 0-1's down_proj change", changed == names, str(changed))
    ck.exit()


if __name__ == "__main__":
    main()
