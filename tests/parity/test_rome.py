#!/usr/bin/env python3
"""test_rome.py -- `ffn edit --dump` (ROME) against PyTorch float64.

A small word-level model (odd sizes: D 30, F 47, 3 heads of 10, 2 layers,
gated SiLU, tied head) is trained here on facts sentences, then edited at
layer 1 with one prompt (--prefixes 1, so k* is the key of the bare prompt)
and the dump (k*, v*, the old value, C, lambda, down_proj before and after)
is checked:
  k*   = m at the subject's last token of the prompt, from a float64
         reference forward of the checkpoint: |err| <= 1e-4 * (1 + max|ref|)
  C    = E[k k^T] over the same windows of the text's first 90% as ffn
         (windows of max_seq tokens, the first --samples rows), from the
         reference forward: |err| <= 1e-4 * max|ref|
  dW   = (v* - W k* - b) u^T / (u^T k*), u = (C + lambda I)^-1 k* in float64
         from the dumped k*, v*, C: against W_after - W_before,
         |err| <= 1e-4 * max|dW| (float32 weights);
  rank: the second singular value of W_after - W_before <= 1e-4 of the first;
  W_after k* + b = v*: |err| <= 1e-5 * (1 + max|v*|).
Exit code 0 when everything passes."""
import json
import os
import re
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffn_testlib import Checker, read_safetensors, run_ffn  # noqa: E402
from test_inspect import neurons, reference, ACTS  # noqa: E402,F401

torch.set_default_dtype(torch.float64)

NAMES = ["Mira", "Tomas", "Lena", "Oskar", "Ines", "Pavel", "Rosa", "Kenji"]
CITIES = ["Osk", "Varn", "Telo", "Brisk", "Quell", "Dorn", "Amber", "Selk"]


def write_text(path):
    lines = []
    for rep in range(40):
        for i, n in enumerate(NAMES):
            c = CITIES[(i + rep // 39) % len(CITIES)]
            lines.append("%s lives in %s." % (n, c))
            lines.append("The home of %s is %s." % (n, c))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def word_tokens(text):
    """ffn's word pieces for this text: a single space attaches to the word
    after it, '.' and '\\n' stand alone."""
    pieces = re.findall(r"\n| ?[A-Za-z]+|\.", text)
    assert "".join(pieces) == text
    return pieces


def read_vocab(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    assert lines[0].startswith("ffn-tokenizer") and lines[1] == "mode word"
    V = int(lines[2].split()[1])
    toks = [t.replace("\\n", "\n") for t in lines[3:3 + V]]
    return {t: i for i, t in enumerate(toks)}


def main():
    ck = Checker("test_rome")
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        write_text(text)
        model = os.path.join(tmp, "m")
        run_ffn(["train", "--data", text, "--tokenizer", "word", "--hidden-size", 30,
                 "--intermediate-size", 47, "--num-hidden-layers", 2, "--num-attention-heads", 3, "--num-key-value-heads", 3,
                 "--seq-len", 16, "--batch-size", 8, "--steps", 60, "--lr", 3e-3,
                 "--eval-every", 60, "--out", model])
        cfg = json.load(open(os.path.join(model, "config.json")))
        P = {k: torch.tensor(v, dtype=torch.float64)
             for k, v in read_safetensors(os.path.join(model, "model.safetensors")).items()}
        vocab = read_vocab(os.path.join(model, "tokenizer.txt"))
        samples = 150
        dump = os.path.join(tmp, "rome.st")
        run_ffn(["edit", model, "--prompt", "Lena lives in", "--subject", "Lena", "--target",
                 "Dorn", "--layer", 1, "--prefixes", 1, "--samples", samples, "--data", text,
                 "--steps", 5, "--out", os.path.join(tmp, "e"), "--dump", dump, "--cache", tmp])
        d = read_safetensors(dump, as_f32=False)
        k = torch.tensor(d["k_star"].astype(np.float64))
        vs = torch.tensor(d["v_star"].astype(np.float64))
        C = torch.tensor(d["C"])
        lam = float(d["lambda"][0])
        W0 = torch.tensor(d["W_before"].astype(np.float64))
        W1 = torch.tensor(d["W_after"].astype(np.float64))
        F = k.shape[0]
        print("D %d F %d lambda %.4g" % (vs.shape[0], F, lam))

        # k*: the key at "Lena" of the bare prompt
        ids = [vocab[p] for p in word_tokens("Lena lives in")]
        rec = reference(P, cfg, ids)[1]
        m = neurons(P, "model.layers.1.mlp", rec["x"], True, False, ACTS["silu"])[3]
        ck.close("k* = m(prompt)[subject]", k, m[0], 1e-4, 1.0)

        # C over the windows ffn reads: the first 90% of the tokens, windows of max_seq
        toks = [vocab[p] for p in word_tokens(open(text).read())]
        n_val = max(1, int(len(toks) * 0.1))
        n_train = len(toks) - n_val
        T = cfg["max_position_embeddings"]
        keys = []
        at = 0
        while len(keys) < samples and at + T <= n_train:
            r = reference(P, cfg, toks[at:at + T])[1]
            mm = neurons(P, "model.layers.1.mlp", r["x"], True, False, ACTS["silu"])[3]
            keys.extend(mm[i] for i in range(T))
            at += T
        K = torch.stack(keys[:samples])
        ck.close("C = E[k k^T]", C, K.T @ K / K.shape[0], 1e-4)

        # the rank-one update from the dumped k*, v*, C
        u = torch.linalg.solve(C + lam * torch.eye(F), k)
        lam_ref = 1e-3 * torch.trace(C) / F
        ck.close("lambda = 1e-3 tr(C)/F", torch.tensor([lam]), lam_ref.reshape(1), 1e-12)
        dW = torch.outer(vs - W0 @ k, u) / (u @ k)
        ck.close("W_after - W_before = dW", W1 - W0, dW, 1e-4)
        sv = torch.linalg.svdvals(W1 - W0)
        ck.true("the update has rank one", float(sv[1] / sv[0]) <= 1e-4,
                "second/first singular value %.3g" % float(sv[1] / sv[0]))
        ck.close("W_after k* = v*", W1 @ k, vs, 1e-5, 1.0)

    ck.exit()


if __name__ == "__main__":
    main()
