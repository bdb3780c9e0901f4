#!/usr/bin/env python3
"""torch_transcoder.py -- the TopK transcoder step of include/ffn/transcoder.h
in PyTorch (float32, autograd, torch.optim.Adam), for bench_transcoder.sh.

  torch_transcoder.py make FILE n D Fp k     write a step file (random rows,
                                             the layer's initial weights)
  torch_transcoder.py run FILE steps threads time `steps` steps on its rows;
                                             prints rows/s as JSON
The same objective as ffn (FVU + AuxK, decoder rows' gradient projected,
rows renormalised after Adam); the decoder is a dense product with the
scattered codes (how plain PyTorch SAE code writes it)."""
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "parity"))
from ffn_testlib import read_safetensors, write_safetensors  # noqa: E402


def make(path, n, D, Fp, k):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, D)).astype(np.float32)
    y = np.tanh(x @ rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    Wd = rng.standard_normal((Fp, D))
    Wd /= np.linalg.norm(Wd, axis=1, keepdims=True)
    cfg = {"format": "ffn-transcoder", "version": 1, "kind": "transcoder", "layer": 0,
           "d_model": D, "features": Fp, "k": k, "skip": False, "input": "layers.0.mlp_in",
           "output": "layers.0.mlp_out", "k_aux": D // 2, "aux_coef": 1 / 32,
           "dead_tokens": 10 ** 12}
    write_safetensors(path, {"encoder.weight": (0.2 * Wd).astype(np.float32),
                             "encoder.bias": np.zeros(Fp, np.float32),
                             "decoder.weight": Wd.astype(np.float32),
                             "decoder.bias": y.mean(0).astype(np.float32), "x": x, "y": y},
                      metadata={"ffn_transcoder": json.dumps(cfg)})


def run(path, steps, threads):
    torch.set_num_threads(threads)
    f = read_safetensors(path)
    x, y = torch.tensor(f["x"]), torch.tensor(f["y"])
    hdr = open(path, "rb").read()
    n = int.from_bytes(hdr[:8], "little")
    cfg = json.loads(json.loads(hdr[8:8 + n])["__metadata__"]["ffn_transcoder"])
    k = cfg["k"]
    We = torch.tensor(f["encoder.weight"], requires_grad=True)
    be = torch.tensor(f["encoder.bias"], requires_grad=True)
    Wd = torch.tensor(f["decoder.weight"], requires_grad=True)
    bd = torch.tensor(f["decoder.bias"], requires_grad=True)
    opt = torch.optim.Adam([We, be, Wd, bd], lr=1e-3, eps=1e-8)
    sst = ((y - y.mean(0)) ** 2).sum()

    def step():
        opt.zero_grad(set_to_none=True)
        pre = x @ We.T + be
        vals, idx = pre.topk(k, dim=1)
        a = torch.zeros_like(pre).scatter(1, idx, torch.relu(vals))
        yhat = a @ Wd + bd
        loss = ((yhat - y) ** 2).sum() / sst  # no feature is dead (dead_tokens huge)
        loss.backward()
        with torch.no_grad():
            Wd.grad -= (Wd.grad * Wd).sum(1, keepdim=True) * Wd
        opt.step()
        with torch.no_grad():
            Wd.div_(Wd.norm(dim=1, keepdim=True))
        return loss

    step()  # warm-up
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    secs = time.perf_counter() - t0
    print(json.dumps({"steps": steps, "rows": x.shape[0], "seconds": secs,
                      "rows_per_s": steps * x.shape[0] / secs, "threads": threads}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], *map(int, sys.argv[3:7]))
    else:
        run(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
