#!/usr/bin/env python3
"""test_adamw.py -- ten optimizer steps of the trainer (src/train/train.c:
ffn_adamw_step, the code path `ffn train` uses) against torch.optim.AdamW.

A small C driver (below, compiled against build/libffn.a) creates a tiny
model (2 layers, GQA, SwiGLU, untied head) with ffn_model_init_weights, then
takes 10 steps, each of A = 2 micro-batches (gradient accumulation with
grad_scale 1/A), global-norm clipping, linear warmup then cosine decay,
decoupled weight decay on matrices only.  It writes the initial weights, each
step's loss, lr and pre-clip gradient norm, and the final weights.

The reference, written here in PyTorch (float64): the same Llama forward,
the same batches, torch.nn.utils.clip_grad_norm_, torch.optim.AdamW with two
parameter groups (decay: every matrix; no decay: RMSNorm weights), and the
learning rate set each step from the schedule computed here independently.

Checked step by step: the loss (|rel err| <= 1e-6), the lr (rel err <= 1e-6,
float32 in C), the gradient norm (rel err <= 1e-4); at the end every weight
(max |err| <= 2e-5 per tensor, against an lr of 1e-2: a step moves a weight
by up to ~1e-2, so a wrong bias correction, decay or clip shows as >= 1e-4;
measured errors are ~1e-8 for the loss and ~5e-7 for the weights).
Also: clipping must have been active on some step (the test would otherwise
not test it).  Exit code: 0 when everything is within tolerance.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
ROOT = os.environ.get("FFN_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

TOL_LOSS_REL = 1e-6
TOL_LR_REL = 1e-6
TOL_NORM_REL = 1e-4
TOL_WEIGHT = 2e-5

STEPS, A, B, T = 10, 2, 3, 12
HP = dict(lr=1e-2, min_lr=1e-3, warmup=3, weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8,
          clip=1.1)
CFG = dict(vocab_size=29, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=T,
           rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False, hidden_act="silu",
           mlp_type="gated", rope_style="half")

DRIVER = r"""
#include <ffn.h>
#include "ffn/train.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int fail(const char *w) { fprintf(stderr, "adamw_driver: %s: %s\n", w, ffn_last_error()); return 1; }
/* argv: config.json tokens.i32 outdir steps A B T lr min_lr warmup wd b1 b2 eps clip */
int main(int argc, char **argv) {
    if (argc != 16) { fprintf(stderr, "adamw_driver: bad arguments\n"); return 2; }
    const char *cfg_path = argv[1], *tok_path = argv[2], *out = argv[3];
    int64_t steps = atoll(argv[4]), A = atoll(argv[5]), B = atoll(argv[6]), T = atoll(argv[7]);
    ffn_train_options o; ffn_train_options_default(&o);
    o.steps = steps; o.lr = atof(argv[8]); o.min_lr = atof(argv[9]); o.warmup = atoll(argv[10]);
    o.weight_decay = atof(argv[11]); o.beta1 = atof(argv[12]); o.beta2 = atof(argv[13]);
    o.eps = atof(argv[14]); o.clip = atof(argv[15]);
    ffn_ctx *ctx; if (ffn_ctx_create(2, &ctx)) return fail("ctx");
    ffn_model_config cfg; if (ffn_model_config_load(cfg_path, &cfg)) return fail("config");
    ffn_model_options mo = {.max_batch = B, .max_seq = T, .training = 1};
    ffn_model *m; if (ffn_model_create(ctx, &cfg, &mo, &m)) return fail("create");
    if (ffn_model_init_weights(m, 77)) return fail("init");
    int64_t P; float *p = ffn_model_params(m, &P);
    char path[4096]; FILE *f;
    snprintf(path, sizeof path, "%s/table.txt", out); f = fopen(path, "w");
    for (int64_t i = 0; i < ffn_model_num_tensors(m); i++) {
        const ffn_model_tensor *t = ffn_model_tensor_at(m, i);
        fprintf(f, "%s %lld %lld %lld %lld\n", t->name, (long long)t->offset, (long long)t->numel,
                (long long)t->shape[0], (long long)t->shape[1]);
    }
    fclose(f);
    snprintf(path, sizeof path, "%s/params0.f32", out); f = fopen(path, "wb");
    fwrite(p, sizeof(float), (size_t)P, f); fclose(f);
    size_t n = (size_t)(steps * A * B * T * 2);
    int32_t *tok = malloc(n * sizeof(int32_t));
    f = fopen(tok_path, "rb"); if (!f || fread(tok, sizeof(int32_t), n, f) != n) return fail("tokens"); fclose(f);
    ffn_adamw *opt; if (ffn_adamw_create(m, &o, &opt)) return fail("adamw");
    snprintf(path, sizeof path, "%s/steps.txt", out); FILE *log = fopen(path, "w");
    for (int64_t s = 0; s < steps; s++) {
        ffn_model_zero_grads(m);
        double loss = 0;
        for (int64_t a = 0; a < A; a++) {
            const int32_t *x = tok + ((s * A + a) * 2) * B * T, *y = x + B * T;
            ffn_model_loss l;
            if (ffn_model_forward_backward(m, x, y, B, T, 1.0f / (float)A, &l)) return fail("fwd/bwd");
            loss += l.total / (double)A;
        }
        double lr, norm;
        if (ffn_adamw_step(opt, s + 1, &lr, &norm)) return fail("step");
        fprintf(log, "%.17g %.17g %.17g\n", loss, lr, norm);
    }
    fclose(log);
    snprintf(path, sizeof path, "%s/params1.f32", out); f = fopen(path, "wb");
    fwrite(p, sizeof(float), (size_t)P, f); fclose(f);
    ffn_adamw_free(opt); ffn_model_free(m); ffn_ctx_free(ctx); free(tok);
    return 0;
}
"""


def schedule(step):
    """Linear warmup to lr over `warmup` steps, then cosine to min_lr at STEPS."""
    lr, lo, w = HP["lr"], HP["min_lr"], HP["warmup"]
    if step <= w:
        return lr * step / w
    prog = (step - w) / (STEPS - w)
    return lo + 0.5 * (lr - lo) * (1 + math.cos(math.pi * prog))


def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope_half(x, theta):
    """x (B, T, nh, Dh) at positions 0..T-1, Hugging Face rotate_half pairs."""
    Tn, Dh = x.shape[1], x.shape[-1]
    half = Dh // 2
    inv = theta ** (-2.0 * torch.arange(half) / Dh)
    ang = torch.arange(Tn)[:, None] * inv[None, :]
    c, s = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


def forward_loss(P, tokens, targets):
    D, H, G = CFG["hidden_size"], CFG["num_attention_heads"], CFG["num_key_value_heads"]
    Dh, eps, theta = D // H, CFG["rms_norm_eps"], CFG["rope_theta"]
    Bn, Tn = tokens.shape
    x = P["model.embed_tokens.weight"][tokens]
    mask = torch.full((Tn, Tn), float("-inf")).triu(1)
    for l in range(CFG["num_hidden_layers"]):
        pre = f"model.layers.{l}"
        h = rmsnorm(x, P[f"{pre}.input_layernorm.weight"], eps)
        q = rope_half((h @ P[f"{pre}.self_attn.q_proj.weight"].T).view(Bn, Tn, H, Dh), theta)
        k = rope_half((h @ P[f"{pre}.self_attn.k_proj.weight"].T).view(Bn, Tn, G, Dh), theta)
        v = (h @ P[f"{pre}.self_attn.v_proj.weight"].T).view(Bn, Tn, G, Dh)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        k = k.repeat_interleave(H // G, dim=1)
        v = v.repeat_interleave(H // G, dim=1)
        att = torch.softmax(q @ k.transpose(-1, -2) / Dh ** 0.5 + mask, -1) @ v
        x = x + att.transpose(1, 2).reshape(Bn, Tn, D) @ P[f"{pre}.self_attn.o_proj.weight"].T
        h2 = rmsnorm(x, P[f"{pre}.post_attention_layernorm.weight"], eps)
        g = torch.nn.functional.silu(h2 @ P[f"{pre}.mlp.gate_proj.weight"].T)
        u = h2 @ P[f"{pre}.mlp.up_proj.weight"].T
        x = x + (g * u) @ P[f"{pre}.mlp.down_proj.weight"].T
    x = rmsnorm(x, P["model.norm.weight"], eps)
    logits = x @ P["lm_head.weight"].T
    return torch.nn.functional.cross_entropy(logits.reshape(-1, CFG["vocab_size"]),
                                             targets.reshape(-1))


def main():
    import json
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "adamw_driver.c"), os.path.join(tmp, "adamw_driver")
        with open(src, "w") as f:
            f.write(DRIVER)
        subprocess.run(["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-fopenmp",
                        "-I" + os.path.join(ROOT, "include"), src,
                        os.path.join(ROOT, "build/libffn.a"), "-ldnnl", "-fopenmp", "-lm",
                        "-lpthread", "-lpcre2-8", "-o", exe], check=True)
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(CFG, f)
        # Learnable data, so that the loss moves: each sequence follows a fixed
        # random permutation (next = perm[current]) from a random start, with
        # 10% of the tokens replaced by noise.
        rng = np.random.default_rng(2024)
        V = CFG["vocab_size"]
        perm = rng.permutation(V)
        toks = np.zeros((STEPS, A, 2, B, T), dtype=np.int32)
        for s in range(STEPS):
            for a in range(A):
                for b in range(B):
                    seq = [int(rng.integers(0, V))]
                    for _ in range(T):
                        seq.append(int(perm[seq[-1]]) if rng.random() > 0.1 else int(rng.integers(0, V)))
                    toks[s, a, 0, b] = seq[:T]
                    toks[s, a, 1, b] = seq[1:]
        toks.tofile(os.path.join(tmp, "tokens.i32"))
        subprocess.run([exe, os.path.join(tmp, "config.json"), os.path.join(tmp, "tokens.i32"),
                        tmp, str(STEPS), str(A), str(B), str(T)] +
                       [repr(HP[k]) for k in ("lr", "min_lr", "warmup", "weight_decay", "beta1",
                                               "beta2", "eps", "clip")], check=True)
        table = [l.split() for l in open(os.path.join(tmp, "table.txt")).read().splitlines()]
        p0 = np.fromfile(os.path.join(tmp, "params0.f32"), dtype=np.float32)
        p1 = np.fromfile(os.path.join(tmp, "params1.f32"), dtype=np.float32)
        c_steps = [list(map(float, l.split()))
                   for l in open(os.path.join(tmp, "steps.txt")).read().splitlines()]

    P, decay, no_decay = {}, [], []
    for name, off, numel, r, c in table:
        off, numel, r, c = int(off), int(numel), int(r), int(c)
        t = torch.tensor(p0[off:off + numel].astype(np.float64)).view(r, c) if c > 1 else \
            torch.tensor(p0[off:off + numel].astype(np.float64))
        P[name] = t.requires_grad_(True)
        (no_decay if name.endswith("norm.weight") else decay).append(P[name])
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": HP["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=HP["lr"], betas=(HP["beta1"], HP["beta2"]), eps=HP["eps"])
    clipped = 0
    print(f"{'step':>4} {'loss C':>12} {'loss torch':>12} {'rel err':>9} {'lr':>10} "
          f"{'norm C':>10} {'norm torch':>10}")
    for s in range(STEPS):
        opt.zero_grad()
        loss = 0.0
        for a in range(A):
            x = torch.tensor(toks[s, a, 0], dtype=torch.long)
            y = torch.tensor(toks[s, a, 1], dtype=torch.long)
            l = forward_loss(P, x, y) / A
            l.backward()
            loss += l.item()
        norm = torch.nn.utils.clip_grad_norm_(list(P.values()), HP["clip"]).item()
        clipped += norm > HP["clip"]
        lr = schedule(s + 1)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        c_loss, c_lr, c_norm = c_steps[s]
        e_loss = abs(c_loss - loss) / abs(loss)
        e_lr = abs(c_lr - lr) / lr
        e_norm = abs(c_norm - norm) / norm
        print(f"{s + 1:4d} {c_loss:12.8f} {loss:12.8f} {e_loss:9.2e} {lr:10.3e} {c_norm:10.6f} "
              f"{norm:10.6f}")
        if e_loss > TOL_LOSS_REL:
            failures.append(f"step {s + 1}: loss rel err {e_loss:.2e} > {TOL_LOSS_REL:.0e}")
        if e_lr > TOL_LR_REL:
            failures.append(f"step {s + 1}: lr C {c_lr} vs {lr} (rel err {e_lr:.2e})")
        if e_norm > TOL_NORM_REL:
            failures.append(f"step {s + 1}: grad norm rel err {e_norm:.2e} > {TOL_NORM_REL:.0e}")
    print(f"clipping active on {clipped} of {STEPS} steps (clip {HP['clip']})")
    if clipped == 0 or clipped == STEPS:
        print("note: clipping was active on " + ("no" if clipped == 0 else "every") + " step")
    if clipped == 0:
        failures.append("clipping never engaged: the test would not test it")

    worst = 0.0
    for name, off, numel, r, c in table:
        off, numel = int(off), int(numel)
        ref = P[name].detach().numpy().reshape(-1)
        err = np.abs(p1[off:off + numel] - ref).max()
        moved = np.abs(p0[off:off + numel] - ref).max()
        worst = max(worst, err)
        if err > TOL_WEIGHT:
            failures.append(f"{name}: final weight max err {err:.3e} > {TOL_WEIGHT:.0e} "
                            f"(moved by up to {moved:.3e})")
    print(f"final weights: {len(table)} tensors, max abs err {worst:.3e} (tol {TOL_WEIGHT:.0e})")
    for f in failures:
        print("FAIL " + f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
