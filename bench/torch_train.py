#!/usr/bin/env python3
"""bench/torch_train.py -- the PyTorch peer of `ffn train` for bench/bench_train.sh.

The same small Llama-style decoder that `ffn train` builds, written in plain
PyTorch eager (torch 1.13 has no F.scaled_dot_product_attention, so attention
is the explicit softmax(Q·Kᵀ/√hd + causal mask)·V):

  token embedding (V, D) -> L x [ x += attn(rmsnorm(x)); x += ffn(rmsnorm(x)) ]
  -> final rmsnorm -> tied LM head (logits = x · Embᵀ)

  attention  H heads of width hd = D/H, RoPE (theta 1e4, rotate-half form),
             causal, q/k/v/o projections without bias
  ffn        SwiGLU: down(silu(gate(x)) * up(x)), width F
  moe        top-K of E SwiGLU experts of width Fe; softmax router, the K
             weights renormalised (Mixtral), load-balancing loss 0.01 and
             router z-loss 0.001 as ffn's defaults; experts run grouped
             (index_select the routed rows, one expert at a time, index_add_)

Trained with AdamW (decoupled decay 0.1 on matrices only, betas 0.9/0.95),
linear warmup + cosine learning rate, global-norm clipping at 1.0, on random
windows of a char-tokenized text file (vocabulary: the text's code points
plus <unk>), like ffn.

Tokens/s counts the training steps after --warmup steps, wall clock, no
evaluation.  Letters: B batch, T sequence, D hidden, F FFN width, H heads,
V vocab, E experts, K top-k.

--autocast runs the forward under torch.autocast("cpu", dtype=torch.bfloat16)
(mixed precision: the products on oneDNN's bf16 kernels, fp32 master
weights and optimizer), the strongest CPU training set-up of torch 1.13.

--check-ffn RUN_DIR --ids FILE: no training; load the weights of an ffn run
directory (model.safetensors, Hugging Face names) into this model, which
must have exactly its tensors and shapes, and print the mean next-token
cross-entropy over consecutive windows of --seq-len of the ids in FILE
(whitespace-separated, as `ffn tokenize --ids-only` prints them),
each window's first token unscored: what `ffn eval RUN_DIR --window T
--stride T` reports, so the two models can be compared at the same weights.

usage: torch_train.py --data FILE [--steps S] [--warmup W] [--batch-size B]
       [--seq-len T] [--hidden-size D] [--intermediate-size F] [--layers L]
       [--heads H] [--moe E,K,Fe] [--threads N] [--seed S] [--autocast] [--json]
       torch_train.py --check-ffn RUN_DIR --ids FILE [the model flags] [--json]
"""
import argparse
import contextlib
import json
import math
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(T, hd, theta):
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)  # (T, hd/2)
    ang = torch.cat([ang, ang], dim=-1)                            # (T, hd)
    return ang.cos(), ang.sin()


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.hd = h, d // h
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, T, D = x.shape
        q = self.q(x).view(B, T, self.h, self.hd).transpose(1, 2)  # (B, H, T, hd)
        k = self.k(x).view(B, T, self.h, self.hd).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(self.hd))  # (B, H, T, T)
        s = s.masked_fill(mask, float("-inf"))
        y = F.softmax(s, dim=-1) @ v                                  # (B, H, T, hd)
        return self.o(y.transpose(1, 2).reshape(B, T, D))


class SwiGLU(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate = nn.Linear(d, f, bias=False)
        self.up = nn.Linear(d, f, bias=False)
        self.down = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """Top-K of E SwiGLU experts, grouped per expert; returns (y, aux, z)."""

    def __init__(self, d, e, k, f):
        super().__init__()
        self.e, self.k = e, k
        self.router = nn.Linear(d, e, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d, f) for _ in range(e))

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])                       # (N, D)
        logits = self.router(x)                            # (N, E)
        p = F.softmax(logits, dim=-1)
        w, idx = p.topk(self.k, dim=-1)                    # (N, K)
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
        y = torch.zeros_like(x)
        flat_idx = idx.reshape(-1)                         # (N·K)
        flat_w = w.reshape(-1)
        tok = torch.arange(x.shape[0]).repeat_interleave(self.k)
        for e in range(self.e):
            sel = (flat_idx == e).nonzero(as_tuple=True)[0]
            if sel.numel() == 0:
                continue
            rows = tok[sel]
            out = self.experts[e](x.index_select(0, rows)) * flat_w[sel].unsqueeze(1)
            y.index_add_(0, rows, out.to(y.dtype))  # autocast: bf16 products, fp32 sum
        f = torch.bincount(flat_idx, minlength=self.e).to(x.dtype) / flat_idx.numel()
        aux = self.e * (f * p.mean(0)).sum()
        z = torch.logsumexp(logits, dim=-1).pow(2).mean()
        return y.reshape(shape), aux, z


class Block(nn.Module):
    def __init__(self, d, h, f, moe):
        super().__init__()
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.attn = Attention(d, h)
        self.ffn = MoE(d, *moe) if moe else SwiGLU(d, f)

    def forward(self, x, cos, sin, mask):
        x = x + self.attn(self.n1(x), cos, sin, mask)
        out = self.ffn(self.n2(x))
        if isinstance(out, tuple):
            return x + out[0], out[1], out[2]
        return x + out, None, None


class Model(nn.Module):
    def __init__(self, v, d, f, layers, h, T, moe):
        super().__init__()
        self.emb = nn.Embedding(v, d)
        self.blocks = nn.ModuleList(Block(d, h, f, moe) for _ in range(layers))
        self.norm = RMSNorm(d)
        cos, sin = rope_tables(T, d // h, 1e4)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1))
        nn.init.normal_(self.emb.weight, std=0.02)

    def forward(self, tokens, targets):
        x = self.emb(tokens)                                 # (B, T, D)
        aux = z = 0.0
        for b in self.blocks:
            x, a, zz = b(x, self.cos, self.sin, self.mask)
            if a is not None:
                aux, z = aux + a, z + zz
        logits = self.norm(x) @ self.emb.weight.t()          # (B, T, V), tied head
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return loss + 0.01 * aux + 0.001 * z, loss


def hf_names(model):
    """This model's parameters under the Hugging Face names ffn writes."""
    names = {"model.embed_tokens.weight": model.emb.weight, "model.norm.weight": model.norm.weight}
    for i, b in enumerate(model.blocks):
        pre = f"model.layers.{i}."
        names[pre + "input_layernorm.weight"] = b.n1.weight
        names[pre + "post_attention_layernorm.weight"] = b.n2.weight
        for a in "qkvo":
            names[pre + f"self_attn.{a}_proj.weight"] = getattr(b.attn, a).weight
        if isinstance(b.ffn, MoE):
            names[pre + "mlp.gate.weight"] = b.ffn.router.weight
            for e, ex in enumerate(b.ffn.experts):
                for part in ("gate", "up", "down"):
                    names[pre + f"mlp.experts.{e}.{part}_proj.weight"] = getattr(ex, part).weight
        else:
            for part in ("gate", "up", "down"):
                names[pre + f"mlp.{part}_proj.weight"] = getattr(b.ffn, part).weight
    return names


def load_safetensors_f32(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        if v["dtype"] != "F32":
            sys.exit(f"{path}: {k}: dtype {v['dtype']}, expected F32")
        lo, hi = v["data_offsets"]
        out[k] = torch.frombuffer(bytearray(blob[lo:hi]), dtype=torch.float32).reshape(v["shape"])
    return out


def check_ffn(a, moe):
    """Load an ffn run directory's weights; the mean CE over windows of ids."""
    cfg = json.load(open(f"{a.check_ffn}/config.json"))
    V = cfg["vocab_size"]
    model = Model(V, a.hidden_size, a.intermediate_size, a.layers, a.heads, a.seq_len, moe)
    tensors = load_safetensors_f32(f"{a.check_ffn}/model.safetensors")
    mine = hf_names(model)
    if sorted(tensors) != sorted(mine):
        sys.exit(f"tensors differ: only in ffn {sorted(set(tensors) - set(mine))}, "
                 f"only here {sorted(set(mine) - set(tensors))}")
    with torch.no_grad():
        for k, p in mine.items():
            if tuple(tensors[k].shape) != tuple(p.shape):
                sys.exit(f"{k}: ffn {tuple(tensors[k].shape)}, here {tuple(p.shape)}")
            p.copy_(tensors[k])
    ids = [int(w) for w in open(a.ids).read().split()]
    T = a.seq_len
    n = len(ids) // T
    x = torch.tensor(ids[:n * T], dtype=torch.long).reshape(n, T)
    with torch.no_grad():
        h = model.emb(x)
        for b in model.blocks:
            h, _, _ = b(h, model.cos, model.sin, model.mask)
        logits = model.norm(h) @ model.emb.weight.t()
        ce = F.cross_entropy(logits[:, :-1].reshape(-1, V), x[:, 1:].reshape(-1))
    n_params = sum(p.numel() for p in model.parameters())
    r = {"params": n_params, "windows": n, "scored": n * (T - 1), "nll": ce.item()}
    print(json.dumps(r) if a.json else f"{n_params} params, nll {ce.item():.6f} over {n} windows")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3, help="untimed first steps")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--hidden-size", type=int, default=128)
    ap.add_argument("--intermediate-size", type=int, default=344)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--moe", default="", help="E,K,Fe: top-K of E SwiGLU experts of width Fe")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--autocast", action="store_true",
                    help="forward under torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--check-ffn", metavar="RUN_DIR", help="load an ffn run directory's weights "
                    "and print the loss over --ids instead of training")
    ap.add_argument("--ids", help="token ids for --check-ffn (first field of each line)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    moe = tuple(int(s) for s in a.moe.split(",")) if a.moe else None
    if a.check_ffn:
        return check_ffn(a, moe)
    if not a.data:
        ap.error("--data FILE is required (unless --check-ffn)")
    text = open(a.data, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i + 1 for i, c in enumerate(chars)}         # 0 = <unk>
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    V = len(chars) + 1
    B, T = a.batch_size, a.seq_len
    model = Model(V, a.hidden_size, a.intermediate_size, a.layers, a.heads, T, moe)
    n_params = sum(p.numel() for p in model.parameters())

    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    warm = max(1, min(100, a.steps // 10))

    def lr_at(step):  # step 1..S
        if step <= warm:
            return a.lr * step / warm
        t = (step - warm) / max(1, a.steps - warm)
        return 1e-4 + 0.5 * (a.lr - 1e-4) * (1 + math.cos(math.pi * t))

    g = torch.Generator().manual_seed(a.seed)
    t_start = None
    loss = None
    for step in range(1, a.steps + 1):
        if step == a.warmup + 1:
            t_start = time.perf_counter()
        ix = torch.randint(0, len(data) - T - 1, (B,), generator=g)
        x = torch.stack([data[i:i + T] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + T] for i in ix])
        for grp in opt.param_groups:
            grp["lr"] = lr_at(step)
        with torch.autocast("cpu", dtype=torch.bfloat16) if a.autocast else contextlib.nullcontext():
            total, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    secs = time.perf_counter() - t_start
    timed = a.steps - a.warmup
    r = {"peer": "pytorch-bf16" if a.autocast else "pytorch", "torch": torch.__version__,
         "variant": "moe" if moe else "swiglu",
         "params": n_params, "vocab": V, "batch_size": B, "seq_len": T, "threads": a.threads,
         "steps": a.steps, "timed_steps": timed, "seconds": round(secs, 3),
         "tokens_per_s": round(timed * B * T / secs, 1), "final_loss": round(loss.item(), 4)}
    if a.json:
        print(json.dumps(r))
    else:
        print(f"pytorch {r['variant']}: {n_params} params, {r['tokens_per_s']} tokens/s "
              f"over {timed} steps ({secs:.1f} s), loss {r['final_loss']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
