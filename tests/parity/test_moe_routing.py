#!/usr/bin/python3
"""test_moe_routing.py -- the routing `ffn layer` infers from a MoE config
that does not spell it out, against a PyTorch reference (float64, autograd)
of Mixtral's sparse MoE block (softmax over E, top-k, the k weights
renormalised to sum to 1, SiLU-gated experts w1 / w3 / w2):

  * a Mixtral-shaped config without model_type (num_local_experts) is
    renormalised, and the weights may carry Mixtral's own names
    (experts.{e}.w1/w2/w3.weight) and a block prefix
    (block_sparse_moe.), as `ffn export` writes them;
  * num_experts alone, model_type other than mixtral, or an explicit
    norm_topk_prob false are not renormalised;
  * `ffn layer` states the routing it used in one line on stderr.

Odd sizes (D 7, F 11, E 5, K 2, N 13).  Tolerances (relative to the largest
|reference| of each tensor): forward 2e-5, gradients 1e-4.  Exit code =
result.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ffn_testlib as T  # noqa: E402

RNG = np.random.default_rng(20261201)
FWD_TOL, GRAD_TOL = 2e-5, 1e-4
check = T.Checker("test_moe_routing")
TMP = tempfile.mkdtemp(prefix="test_moe_routing_")
D, F, E, K, N = 7, 11, 5, 2, 13


def mixtral_block(W, x, dy, renorm):
    """Mixtral's MixtralSparseMoeBlock (renorm=True) or the same block
    without renormalisation, in float64; returns y, topk weights and the
    gradients of sum(y * dy) by Mixtral's tensor name."""
    W = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in W.items()}
    x = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    logits = x @ W["gate.weight"].T
    p = torch.softmax(logits, dim=-1)
    # top-k with ties to the lower index (stable sort), as ffn documents
    ids = torch.sort(p.detach(), dim=-1, descending=True, stable=True).indices[:, :K]
    w = p.gather(1, ids)
    if renorm:
        w = w / w.sum(-1, keepdim=True)
    y = torch.zeros_like(x)
    for e in range(E):
        sel = (ids == e).nonzero()
        if len(sel) == 0:
            continue
        tok, slot = sel[:, 0], sel[:, 1]
        xe = x[tok]
        h = torch.nn.functional.silu(xe @ W["experts.%d.w1.weight" % e].T) * \
            (xe @ W["experts.%d.w3.weight" % e].T)
        y = y.index_add(0, tok, (h @ W["experts.%d.w2.weight" % e].T) * w[tok, slot].unsqueeze(1))
    (y * torch.tensor(dy, dtype=torch.float64)).sum().backward()
    grads = {"grad." + k: v.grad.numpy() for k, v in W.items()}
    grads["dx"] = x.grad.numpy()
    return y.detach().numpy(), w.detach().numpy(), ids.numpy(), grads


def make_weights():
    W = {"gate.weight": (RNG.standard_normal((E, D)) * 2.0 / math.sqrt(D)).astype(np.float32)}
    for e in range(E):
        W["experts.%d.w1.weight" % e] = (RNG.standard_normal((F, D)) / math.sqrt(D)).astype(np.float32)
        W["experts.%d.w3.weight" % e] = (RNG.standard_normal((F, D)) / math.sqrt(D)).astype(np.float32)
        W["experts.%d.w2.weight" % e] = (RNG.standard_normal((D, F)) / math.sqrt(F)).astype(np.float32)
    return W


def to_qwen_names(W):
    kinds = {"w1": "gate_proj", "w3": "up_proj", "w2": "down_proj"}
    out = {}
    for k, v in W.items():
        parts = k.split(".")
        if parts[0] == "experts":
            parts[2] = kinds[parts[2]]
        out[".".join(parts)] = v
    return out


W = make_weights()
x = RNG.standard_normal((N, D)).astype(np.float32)
dy = RNG.standard_normal((N, D)).astype(np.float32)
T.write_safetensors(os.path.join(TMP, "in.safetensors"), {"x": x, "dy": dy})
mixtral_cfg = {"hidden_size": D, "intermediate_size": F, "num_local_experts": E,
               "num_experts_per_tok": K, "hidden_act": "silu"}


def run(name, cfg, weights, renorm, prefix=""):
    print("%s: %s" % (name, cfg))
    base = os.path.join(TMP, name.replace(" ", "_"))
    T.write_config(base + ".json", **cfg)
    T.write_safetensors(base + ".w.safetensors", {prefix + k: v for k, v in weights.items()})
    p = T.run_ffn(["layer", "--config", base + ".json", "--weights", base + ".w.safetensors",
                   "--input", os.path.join(TMP, "in.safetensors"), "--output",
                   base + ".out.safetensors", "--backward", "--threads", 2], check=False)
    if p.returncode != 0:
        check.fail(name, "ffn layer exit %d: %s" % (p.returncode, p.stderr.strip()))
        return
    want = "ffn layer: routing: softmax scoring, top-%d of %d experts, %s, dropless" % (
        K, E, "renormalised" if renorm else "not renormalised")
    lines = [l for l in p.stderr.splitlines() if "routing:" in l]
    check.true("%s: stderr states the routing" % name, lines == [want],
               "got %r, expected %r" % (lines, want))
    got = T.read_safetensors(base + ".out.safetensors")
    y, w, ids, grads = mixtral_block(W, x, dy, renorm)
    check.true("%s: topk_ids equal the reference" % name, np.array_equal(got["topk_ids"], ids))
    check.close("%s: y" % name, got["y"], y, FWD_TOL, abs_floor=1e-3)
    check.close("%s: topk_weights" % name, got["topk_weights"], w, FWD_TOL, abs_floor=1e-3)
    check.close("%s: dx" % name, got["dx"], grads["dx"], GRAD_TOL, abs_floor=1e-3)
    qwen = not any(".w1." in k for k in weights)
    for k in sorted(grads):
        if k == "dx":
            continue
        fk = "grad." + prefix + (to_qwen_names({k[5:]: 0}).popitem()[0] if qwen else k[5:])
        if fk not in got:
            check.fail("%s: %s" % (name, fk), "missing from the output (has %s ...)" % sorted(got)[:6])
            continue
        check.close("%s: %s" % (name, fk), got[fk], grads[k], GRAD_TOL, abs_floor=1e-3)


# Mixtral without model_type: renormalised, under Mixtral's or Qwen's names.
run("mixtral no model_type, w1 w2 w3", mixtral_cfg, W, True)
run("mixtral no model_type, block prefix", mixtral_cfg, W, True, prefix="block_sparse_moe.")
run("mixtral no model_type, layer prefix", mixtral_cfg, W, True,
    prefix="model.layers.3.block_sparse_moe.")
run("mixtral no model_type, gate_proj names", mixtral_cfg, to_qwen_names(W), True)
run("model_type mixtral", dict(mixtral_cfg, model_type="mixtral"), W, True)
# Not renormalised: another family's key, another model_type, an explicit false,
# or two expert-count keys (ambiguous).
qwen_cfg = {k: v for k, v in mixtral_cfg.items() if k != "num_local_experts"}
run("num_experts alone", dict(qwen_cfg, num_experts=E), W, False)
run("n_routed_experts alone", dict(qwen_cfg, n_routed_experts=E), W, False)
run("model_type qwen2_moe", dict(mixtral_cfg, model_type="qwen2_moe"), W, False)
run("norm_topk_prob false", dict(mixtral_cfg, norm_topk_prob=False), W, False)
run("two expert keys", dict(mixtral_cfg, num_experts=E), W, False)
run("num_experts, norm_topk_prob true", dict(qwen_cfg, num_experts=E, norm_topk_prob=True), W, True)

# The difference the inference makes is not small: Mixtral's routing against
# the unrenormalised one on the same problem.
y1 = mixtral_block(W, x, dy, True)[0]
y0 = mixtral_block(W, x, dy, False)[0]
print("  max |y renormalised - y not| = %.3f" % float(np.max(np.abs(y1 - y0))))
check.true("the two routings differ on this problem", float(np.max(np.abs(y1 - y0))) > 1e-2)

# Two routers in one file: refused with both names.
T.write_safetensors(os.path.join(TMP, "two.w.safetensors"),
                    dict({"a.block_sparse_moe." + k: v for k, v in W.items()},
                         **{"b.block_sparse_moe.gate.weight": W["gate.weight"]}))
T.write_config(os.path.join(TMP, "two.json"), **mixtral_cfg)
p = T.run_ffn(["layer", "--config", os.path.join(TMP, "two.json"), "--weights",
               os.path.join(TMP, "two.w.safetensors"), "--input", os.path.join(TMP, "in.safetensors"),
               "--output", os.path.join(TMP, "two.out.safetensors")], check=False)
check.true("two routers refused, naming both", p.returncode == 1 and "two routers" in p.stderr and
           "a.block_sparse_moe.gate.weight" in p.stderr and "b.block_sparse_moe.gate.weight" in p.stderr,
           "exit %d: %s" % (p.returncode, p.stderr.strip()))
check.exit()
