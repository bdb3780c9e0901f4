#!/usr/bin/env python3
"""test_transcoder.py -- `ffn transcoder step` (the TopK transcoder / SAE
update of include/ffn/transcoder.h) against PyTorch float64.

1. One step on small odd shapes (n 29, D 13, Fp 37, k 5; and n 7, D 6,
   Fp 11, where the encoder runs the plain loop), for a transcoder
   without and with a skip connection and for an SAE (x = y), with some
   features marked dead so that AuxK (k_aux 4, weight 0.5) takes part:
     loss, fvu, aux       against the reference from the same float32
                          inputs: |err| <= 1e-5 relative;
     every gradient       (before Adam) |err| <= 1e-4 of the tensor's max;
     the weights after    Adam from ffn's own first gradients (the decoder
                          rows' parallel part removed, bias-corrected Adam,
                          rows renormalised), in float64: |err| <= 1e-5 of
                          the tensor's max (the step is lr-sized: at t = 1
                          Adam is about lr·sign(g), so comparing it to an
                          update from the reference gradients would test
                          the sign of near-zero gradients, not the code).
2. Recovery: rows x ~ N(0, I) through a known sparse FFN (32 units of
   relu(w1·x - b), each active on ~10% of rows, unit output directions
   W2), 800 Adam steps (lr 5e-3) of a 64-feature transcoder (k 8) on 2048 rows:
   every unit's output direction is found (max cosine with a decoder row
   >= 0.9 for >= 90% of units; mean >= 0.95) and the FVU is < 0.05.
Exit code 0 when everything passes."""
import json
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ffn_testlib import Checker, read_safetensors, run_ffn, write_safetensors  # noqa: E402

torch.set_default_dtype(torch.float64)


def config(kind, D, Fp, k, skip, k_aux, aux_coef, dead_tokens=10000):
    return json.dumps({"format": "ffn-transcoder", "version": 1, "kind": kind, "layer": 0,
                       "d_model": D, "features": Fp, "k": k, "skip": skip,
                       "input": "layers.0.mlp_in", "output": "layers.0.mlp_out",
                       "k_aux": k_aux, "aux_coef": aux_coef, "dead_tokens": dead_tokens})


def reference_loss(x, y, w, dead, k, k_aux, aux_coef):
    """loss, fvu, aux and the gradients, float64."""
    t = {n: torch.tensor(v, dtype=torch.float64, requires_grad=True) for n, v in w.items()}
    X, Y = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    pre = X @ t["encoder.weight"].T + t["encoder.bias"]
    vals, idx = pre.topk(k, dim=1)
    a = torch.zeros_like(pre).scatter(1, idx, torch.relu(vals))
    yhat = a @ t["decoder.weight"] + t["decoder.bias"]
    if "skip.weight" in t:
        yhat = yhat + X @ t["skip.weight"].T
    sst = ((Y - Y.mean(0)) ** 2).sum()
    fvu = ((yhat - Y) ** 2).sum() / sst
    n_dead = int(dead.sum())
    aux = torch.zeros(())
    if k_aux > 0 and n_dead > 0 and aux_coef > 0:
        ka = min(k_aux, n_dead)
        e = (Y - yhat).detach()
        mask = torch.tensor(dead.astype(bool))
        av, ai = torch.where(mask[None, :], pre, torch.tensor(-np.inf)).topk(ka, dim=1)
        aa = torch.zeros_like(pre).scatter(1, ai, torch.relu(av))
        ehat = aa @ t["decoder.weight"]
        aux = min(n_dead / k_aux, 1.0) * ((ehat - e) ** 2).sum() / ((e - e.mean(0)) ** 2).sum()
    loss = fvu + aux_coef * aux
    loss.backward()
    return float(loss), float(fvu), float(aux), {n: v.grad.numpy() for n, v in t.items()}


def reference_adam(w, g, lr):
    """One Adam step at t = 1 from gradients g, float64, as the header says."""
    out = {}
    b1, b2, eps = 0.9, 0.999, 1e-8
    for n in w:
        p = w[n].astype(np.float64)
        gr = g[n].astype(np.float64)
        if n == "decoder.weight":
            gr = gr - np.sum(gr * p, axis=1, keepdims=True) * p
        m = (1 - b1) * gr
        v = (1 - b2) * gr * gr
        p = p - lr * (m / (1 - b1)) / (np.sqrt(v / (1 - b2)) + eps)
        if n == "decoder.weight":
            p = p / np.linalg.norm(p, axis=1, keepdims=True)
        out[n] = p
    return out


def random_weights(rng, D, Fp, skip):
    Wd = rng.standard_normal((Fp, D))
    Wd /= np.linalg.norm(Wd, axis=1, keepdims=True)
    w = {"encoder.weight": (0.5 * rng.standard_normal((Fp, D))).astype(np.float32),
         "encoder.bias": (0.1 * rng.standard_normal(Fp)).astype(np.float32),
         "decoder.weight": Wd.astype(np.float32),
         "decoder.bias": (0.1 * rng.standard_normal(D)).astype(np.float32)}
    if skip:
        w["skip.weight"] = (0.2 * rng.standard_normal((D, D))).astype(np.float32)
    return w


def one_step(ck, tmp, kind, skip, threads, shape=(29, 13, 37)):
    rng = np.random.default_rng(11 + skip + 2 * (kind == "sae"))
    (n, D, Fp), k, k_aux, aux_coef, lr = shape, 5, 4, 0.5, 0.01
    x = rng.standard_normal((n, D)).astype(np.float32)
    y = x.copy() if kind == "sae" else (np.tanh(x @ rng.standard_normal((D, D))) * 0.7).astype(np.float32)
    w = random_weights(rng, D, Fp, skip)
    dead = np.zeros(Fp, dtype=np.uint8)
    dead[rng.choice(Fp, 9, replace=False)] = 1
    inp, out = os.path.join(tmp, "in.st"), os.path.join(tmp, "out.st")
    tensors = dict(w)
    tensors.update({"x": x, "y": y, "dead": dead})
    write_safetensors(inp, tensors,
                      metadata={"ffn_transcoder": config(kind, D, Fp, k, skip, k_aux, aux_coef)})
    run_ffn(["transcoder", "step", inp, out, "--lr", lr, "--threads", threads])
    got = read_safetensors(out, as_f32=False)
    loss, fvu, aux, grads = reference_loss(x, y, w, dead, k, k_aux, aux_coef)
    tag = "%s%s t%d %s" % (kind, " skip" if skip else "", threads, "x".join(map(str, shape)))
    ck.true("%s: AuxK takes part (aux %.4g)" % (tag, aux), aux > 0)
    ck.close(tag + ": loss", got["loss"], [loss], 1e-5)
    ck.close(tag + ": fvu", got["fvu"], [fvu], 1e-5)
    ck.close(tag + ": aux", got["aux"], [aux], 1e-5)
    gc = {}
    for name in w:
        gc[name] = got["grad." + name]
        ck.close(tag + ": d " + name, gc[name], grads[name], 1e-4)
    after = reference_adam(w, gc, lr)
    for name in w:
        ck.close(tag + ": after Adam " + name, got[name], after[name], 1e-5)


def recovery(ck, tmp):
    rng = np.random.default_rng(5)
    n, D, F0, Fp, k = 2048, 24, 32, 64, 8
    W1 = rng.standard_normal((F0, D))
    W1 = 3.0 * W1 / np.linalg.norm(W1, axis=1, keepdims=True)
    b = np.full(F0, 3.0 * 1.2816)  # w1·x ~ N(0, 9): P(w1·x > b) = 10%
    W2 = rng.standard_normal((F0, D))
    W2 /= np.linalg.norm(W2, axis=1, keepdims=True)
    x = rng.standard_normal((n, D))
    h = np.maximum(x @ W1.T - b, 0)
    y = (h @ W2).astype(np.float32)
    x = x.astype(np.float32)
    w = random_weights(rng, D, Fp, False)
    w["encoder.weight"] = (0.3 * w["decoder.weight"]).astype(np.float32)
    w["encoder.bias"][:] = 0
    w["decoder.bias"] = y.mean(0).astype(np.float32)
    inp, out = os.path.join(tmp, "rin.st"), os.path.join(tmp, "rout.st")
    tensors = dict(w)
    tensors.update({"x": x, "y": y})
    write_safetensors(inp, tensors, metadata={"ffn_transcoder": config(
        "transcoder", D, Fp, k, False, D // 2, 1.0 / 32, dead_tokens=5 * n)})
    run_ffn(["transcoder", "step", inp, out, "--steps", 800, "--lr", 5e-3, "--threads", 2])
    got = read_safetensors(out)
    Wd = got["decoder.weight"].astype(np.float64)
    cos = W2 @ Wd.T  # (F0, Fp), both unit rows
    best = cos.max(axis=1)
    # the FVU of the trained layer on the same rows, recomputed here
    pre = x @ got["encoder.weight"].T + got["encoder.bias"]
    a = np.zeros_like(pre)
    top = np.argsort(-pre, axis=1)[:, :k]
    np.put_along_axis(a, top, np.maximum(np.take_along_axis(pre, top, axis=1), 0), axis=1)
    yhat = a @ Wd + got["decoder.bias"]
    fvu = float(((yhat - y) ** 2).sum() / ((y - y.mean(0)) ** 2).sum())
    print("  recovery: max cosine per unit: min %.3f mean %.3f; >= 0.9: %d of %d; fvu %.4f"
          % (best.min(), best.mean(), int((best >= 0.9).sum()), F0, fvu))
    ck.true("recovery: >= 90% of the units found (cos >= 0.9)", (best >= 0.9).mean() >= 0.9)
    ck.true("recovery: mean max cosine >= 0.95", best.mean() >= 0.95, "(%.3f)" % best.mean())
    ck.true("recovery: fvu < 0.05", fvu < 0.05, "(%.4f)" % fvu)


def main():
    ck = Checker("test_transcoder")
    with tempfile.TemporaryDirectory() as tmp:
        for kind, skip in (("transcoder", False), ("transcoder", True), ("sae", False)):
            one_step(ck, tmp, kind, skip, 1)
        one_step(ck, tmp, "transcoder", True, 2)
        one_step(ck, tmp, "transcoder", True, 1, shape=(7, 6, 11))  # below the product's threshold
        recovery(ck, tmp)
    ck.exit()


if __name__ == "__main__":
    main()
