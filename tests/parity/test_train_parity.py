#!/usr/bin/env python3
"""test_train_parity.py -- `ffn train` end to end, against the PyTorch model
of the training benchmark (bench/torch_train.py), so that the benchmark
compares the same model and the checkpoint means what it says.

For a dense SwiGLU model and a MoE model (top-2 of 4 SwiGLU experts), each
tiny (D 32, 2 layers, 4 heads, T 32, B 4) and trained 5 steps on the first
60 kB of tinyshakespeare with the char tokenizer:
  1. the checkpoint's model.safetensors (Hugging Face names) loads into
     bench/torch_train.py's Model with every tensor used and the same
     parameter count;
  2. tokenizer.txt is read back (escapes undone) and the text re-encoded
     here; the held-out split is the last floor(0.1·n) tokens and the
     evaluation windows are the --eval-batches·B windows spaced evenly over
     it, as src/train/train.c's evaluate() takes them;
  3. the cross-entropy of the PyTorch model (float64) over those windows
     must equal the final val_loss in ffn's --log within 1e-5 relative
     (float32 in C; measured ~1e-10).
Also: the logged loss decreases from step 1 to step 5 (it trains).
Exit code: 0 when every check passes.
"""
import importlib.util
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.environ.get("FFN_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FFN = os.environ.get("FFN_BIN", os.path.join(ROOT, "build", "ffn"))
SHARED = os.environ.get("FFN_SHARED", os.path.join(ROOT, "..", "shared"))
TOL = 1e-5

spec = importlib.util.spec_from_file_location("torch_train", os.path.join(ROOT, "bench", "torch_train.py"))
tt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tt)


def read_safetensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    out = {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        assert v["dtype"] == "F32", (k, v["dtype"])
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype="<f4").reshape(v["shape"])
    return out


def unescape(line):
    out, i = bytearray(), 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line):
            d = line[i + 1]
            if d == "x":
                out.append(int(line[i + 2:i + 4], 16))
                i += 4
                continue
            out += {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\"}[d]
            i += 2
            continue
        out += c.encode("utf-8")
        i += 1
    return out.decode("utf-8")


def read_tokenizer(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    assert lines[0] == "ffn-tokenizer 1" and lines[1] == "mode char", lines[:2]
    v = int(lines[2].split()[1])
    toks = [unescape(l) for l in lines[3:3 + v]]
    assert len(toks) == v and toks[0] == "<unk>", (len(toks), toks[:1])
    return {t: i for i, t in enumerate(toks)}, v


def torch_state(w, layers, moe):
    """HF tensor names -> bench/torch_train.py's module names."""
    sd = {"emb.weight": w["model.embed_tokens.weight"], "norm.weight": w["model.norm.weight"]}
    for i in range(layers):
        p, q = f"model.layers.{i}.", f"blocks.{i}."
        sd[q + "n1.weight"] = w[p + "input_layernorm.weight"]
        sd[q + "n2.weight"] = w[p + "post_attention_layernorm.weight"]
        for a in "qkvo":
            sd[q + f"attn.{a}.weight"] = w[p + f"self_attn.{a}_proj.weight"]
        names = [("", "")]
        if moe:
            sd[q + "ffn.router.weight"] = w[p + "mlp.gate.weight"]
            names = [(f"experts.{e}.", f"experts.{e}.") for e in range(moe[0])]
        for hf, mine in names:
            for a, b in (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down")):
                sd[q + f"ffn.{mine}{b}.weight"] = w[p + f"mlp.{hf}{a}.weight"]
    return {k: torch.from_numpy(np.array(v, dtype=np.float64)) for k, v in sd.items()}, len(sd)


def case(name, extra, moe, text_path, tmp):
    D, L, H, T, B, EB = 32, 2, 4, 32, 4, 3
    out, log = os.path.join(tmp, name), os.path.join(tmp, name + ".jsonl")
    cmd = [FFN, "train", "--data", text_path, "--tokenizer", "char", "--hidden-size", str(D),
           "--intermediate-size", "48", "--num-hidden-layers", str(L), "--num-attention-heads",
           str(H), "--num-key-value-heads", str(H), "--seq-len", str(T), "--batch-size", str(B),
           "--steps", "5", "--eval-every", "0", "--eval-batches", str(EB), "--threads", "2",
           "--out", out, "--log", log, "--quiet"] + extra
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    rows = [json.loads(l) for l in open(log) if l.strip()]
    ffn_val = rows[-1]["val_loss"]
    bad = []

    stoi, V = read_tokenizer(os.path.join(out, "tokenizer.txt"))
    text = open(text_path, encoding="utf-8").read()
    ids = np.array([stoi.get(c, 0) for c in text], dtype=np.int64)
    n = len(ids)
    n_val = int(n * 0.1)
    val = ids[n - n_val:]
    windows, last = EB * B, n_val - T - 1
    offs = [int(w * last / (windows - 1)) for w in range(windows)]

    w = read_safetensors(os.path.join(out, "model.safetensors"))
    model = tt.Model(V, D, 48, L, H, T, moe).double()
    sd, used = torch_state(w, L, moe)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    buffers = {k for k, _ in model.named_buffers()}  # RoPE tables and the mask: not weights
    missing = [k for k in missing if k not in buffers]
    n_params = sum(p.numel() for p in model.parameters())
    n_ffn = sum(a.size for a in w.values())
    for what, ok in ((f"every checkpoint tensor used ({used} of {len(w)})", used == len(w)),
                     (f"no torch parameter left unset {list(missing)}", not missing),
                     (f"no unknown tensor {list(unexpected)}", not unexpected),
                     (f"parameter count torch {n_params} == checkpoint {n_ffn}", n_params == n_ffn)):
        print(("ok   " if ok else "FAIL ") + f"{name}: {what}")
        if not ok:
            bad.append(what)
    with torch.no_grad():
        ce = 0.0
        for k in range(EB):
            o = offs[k * B:(k + 1) * B]
            x = torch.from_numpy(np.stack([val[s:s + T] for s in o]))
            y = torch.from_numpy(np.stack([val[s + 1:s + 1 + T] for s in o]))
            _, loss = model(x, y)
            ce += loss.item()
        ce /= EB
    rel = abs(ce - ffn_val) / abs(ce)
    ok = rel <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {name}: val loss ffn {ffn_val:.8f} torch {ce:.8f} "
          f"rel err {rel:.2e} (tol {TOL:g})")
    if not ok:
        bad.append("val loss")
    ok = rows[-1]["loss"] < rows[0]["loss"]
    print(f"{'ok  ' if ok else 'FAIL'} {name}: training loss {rows[0]['loss']:.4f} -> {rows[-1]['loss']:.4f}")
    if not ok:
        bad.append("loss did not decrease")
    return bad


def main():
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        text_path = os.path.join(tmp, "data.txt")
        with open(os.path.join(SHARED, "data", "tinyshakespeare.txt"), "rb") as f:
            open(text_path, "wb").write(f.read(60000))
        bad = case("swiglu", ["--mlp-type", "gated", "--hidden-act", "silu"], None, text_path, tmp)
        bad += case("moe", ["--mlp-type", "moe", "--num-experts", "4", "--num-experts-per-tok", "2",
                            "--moe-intermediate-size", "24"], (4, 2, 24), text_path, tmp)
    print(f"{len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
