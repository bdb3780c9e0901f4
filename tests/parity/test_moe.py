#!/usr/bin/python3
"""test_moe.py -- Mixture of Experts through `ffn layer` against PyTorch
references written here (float64, autograd):

  * Mixtral style:   softmax scoring, top-2, renormalised;
  * Qwen2-MoE style: softmax, no renormalisation, a shared expert with a
                     sigmoid gate;
  * DeepSeek style:  sigmoid scoring, renormalised, routed_scaling_factor,
                     ungated shared experts;

each with forward (y, router logits, top-k ids and weights, tokens per
expert, aux and z losses), dx and the gradient of every tensor (router
included, with nonzero aux and z coefficients), on random shapes including
E = 1, k = E, N < E, N = 1, N = 0, an expert that gets no tokens, exact ties
in the scores, dense and gated experts of several activations, BF16 inputs;
capacity tests that check which slots drop; repeated runs bitwise equal; and
the relation of aux to Hugging Face's load_balancing_loss_func (k times).

Tolerances (relative to the largest |reference| of each tensor): forward
2e-5, gradients 1e-4 (fp32 against float64).  Exit code = result.

Letters: N tokens, D hidden, F expert width, E experts, K top-k.
"""
import math
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ffn_testlib as T  # noqa: E402

torch.manual_seed(0)
RNG = np.random.default_rng(20261129)
FWD_TOL, GRAD_TOL = 2e-5, 1e-4
check = T.Checker("test_moe")
TMP = tempfile.mkdtemp(prefix="test_moe_")


# ---- the PyTorch reference --------------------------------------------------

def act_fn(name):
    return {
        "silu": torch.nn.functional.silu,
        "gelu": lambda v: torch.nn.functional.gelu(v),
        "gelu_pytorch_tanh": lambda v: torch.nn.functional.gelu(v, approximate="tanh"),
        "relu": torch.relu,
        "sigmoid": torch.sigmoid,
        "linear": lambda v: v,
    }[name]


def expert_ref(W, prefix, x, act, gated, bias):
    def proj(name, v):
        out = v @ W[prefix + "." + name + ".weight"].T
        if bias:
            out = out + W[prefix + "." + name + ".bias"]
        return out
    up = proj("up_proj", x)
    h = act(proj("gate_proj", x)) * up if gated else act(up)
    return proj("down_proj", h)


def routing(cfg, p):
    """Top-k ids with ties to the lower index: a stable descending sort."""
    k = cfg["num_experts_per_tok"]
    return torch.sort(p.detach(), dim=-1, descending=True, stable=True).indices[:, :k]


def kept_mask(cfg, ids, E):
    """Capacity: per expert, the first C slots in token order are kept."""
    N, K = ids.shape
    c = cfg.get("capacity_factor", 0) or 0
    cap = N * K if c <= 0 else min(N * K, math.ceil(c * N * K / E))
    fill = [0] * E
    kept = np.ones((N, K), dtype=bool)
    for n in range(N):
        for j in range(K):
            e = int(ids[n, j])
            kept[n, j] = fill[e] < cap
            fill[e] += 1
    return kept, cap


def moe_ref(cfg, W, x, dy):
    """Forward and backward in float64.  Returns (outputs, grads)."""
    E = cfg["num_experts"]
    K = cfg["num_experts_per_tok"]
    gated = cfg["mlp_type"] == "gated"
    bias = cfg.get("mlp_bias", False)
    act = act_fn(cfg.get("hidden_act", "silu"))
    sigmoid = cfg.get("scoring_func", "softmax") == "sigmoid"
    W = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in W.items()}
    x = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    dy = torch.tensor(dy, dtype=torch.float64)
    N = x.shape[0]
    logits = x @ W["gate.weight"].T
    p = torch.sigmoid(logits) if sigmoid else torch.softmax(logits, dim=-1)
    ids = routing(cfg, p)
    pk = p.gather(1, ids)
    w = pk / (pk.sum(-1, keepdim=True) + 1e-20) if cfg.get("norm_topk_prob") else pk
    w = w * cfg.get("routed_scaling_factor", 1.0)
    kept, cap = kept_mask(cfg, ids.numpy(), E)
    y = torch.zeros_like(x)
    for e in range(E):  # the usual grouped reference: index_select / index_add
        sel = np.argwhere((ids.numpy() == e) & kept)
        if len(sel) == 0:
            continue
        tok = torch.tensor(sel[:, 0])
        out = expert_ref(W, "experts.%d" % e, x[tok], act, gated, bias)
        y = y.index_add(0, tok, out * w[tok, torch.tensor(sel[:, 1])].unsqueeze(1))
    if cfg.get("shared_expert_intermediate_size", 0):
        g = torch.sigmoid(x @ W["shared_expert_gate.weight"].T)
        y = y + g * expert_ref(W, "shared_expert", x, act, gated, bias)
    if cfg.get("n_shared_experts", 0):
        y = y + expert_ref(W, "shared_experts", x, act, gated, bias)
    counts = torch.bincount(ids.reshape(-1), minlength=E).to(torch.float64)
    if N > 0:
        q = p / (p.sum(-1, keepdim=True) + 1e-20) if sigmoid else p
        aux = E * torch.sum(counts / (N * K) * q.mean(0))
        z = torch.mean(torch.logsumexp(logits, dim=-1) ** 2)
    else:
        aux = z = torch.zeros((), dtype=torch.float64)
    L = (y * dy).sum() + cfg.get("router_aux_loss_coef", 0) * aux + \
        cfg.get("router_z_loss_coef", 0) * z
    if N > 0:
        L.backward()
    outs = {"y": y.detach().numpy(), "router_logits": logits.detach().numpy(),
            "topk_ids": ids.numpy().astype(np.int32), "topk_weights": w.detach().numpy(),
            "tokens_per_expert": counts.numpy().astype(np.int32),
            "aux_loss": np.array([aux.item()]), "z_loss": np.array([z.item()]),
            "kept": kept, "capacity": cap, "p": p.detach().numpy()}
    grads = {"dx": x.grad.numpy() if x.grad is not None else np.zeros(x.shape)}
    for k, v in W.items():
        grads["grad." + k] = v.grad.numpy() if v.grad is not None else np.zeros(v.shape)
    return outs, grads


# ---- building problems ------------------------------------------------------

def layer_tensors(W, prefix, D, F, gated, bias, scale=1.0):
    def r(*shape, fan):
        return (RNG.standard_normal(shape) * scale / math.sqrt(fan)).astype(np.float32)
    if gated:
        W[prefix + ".gate_proj.weight"] = r(F, D, fan=D)
    W[prefix + ".up_proj.weight"] = r(F, D, fan=D)
    W[prefix + ".down_proj.weight"] = r(D, F, fan=F)
    if bias:
        if gated:
            W[prefix + ".gate_proj.bias"] = r(F, fan=1) * 0.1
        W[prefix + ".up_proj.bias"] = r(F, fan=1) * 0.1
        W[prefix + ".down_proj.bias"] = r(D, fan=1) * 0.1


def make_weights(cfg, router_scale=1.0):
    D, E = cfg["hidden_size"], cfg["num_experts"]
    F = cfg.get("moe_intermediate_size") or cfg["intermediate_size"]
    gated = cfg["mlp_type"] == "gated"
    bias = cfg.get("mlp_bias", False)
    W = {"gate.weight": (RNG.standard_normal((E, D)) * router_scale / math.sqrt(D)).astype(np.float32)}
    for e in range(E):
        layer_tensors(W, "experts.%d" % e, D, F, gated, bias)
    if cfg.get("shared_expert_intermediate_size", 0):
        layer_tensors(W, "shared_expert", D, cfg["shared_expert_intermediate_size"], gated, bias)
        W["shared_expert_gate.weight"] = (RNG.standard_normal((1, D)) / math.sqrt(D)).astype(np.float32)
    if cfg.get("n_shared_experts", 0):
        layer_tensors(W, "shared_experts", D, cfg["n_shared_experts"] * F, gated, bias)
    return W


def run_case(name, cfg, N, W=None, x=None, router_scale=3.0, in_dtype="F32", threads=2,
             file_cfg=None):
    """Run ffn layer forward+backward on one problem and compare everything.
    Returns (outputs of ffn, reference outputs)."""
    print("%s: N=%d %s" % (name, N, {k: v for k, v in cfg.items() if k != "hidden_size"}))
    D = cfg["hidden_size"]
    if W is None:
        W = make_weights(cfg, router_scale)
    if x is None:
        x = RNG.standard_normal((N, D)).astype(np.float32)
    dy = RNG.standard_normal((N, D)).astype(np.float32)
    x_used = T.round_to(x, in_dtype)
    dy_used = T.round_to(dy, in_dtype)
    base = os.path.join(TMP, name.replace(" ", "_").replace("=", ""))
    T.write_config(base + ".json", **(file_cfg if file_cfg is not None else cfg))
    T.write_safetensors(base + ".w.safetensors", W)
    T.write_safetensors(base + ".in.safetensors", {"x": x, "dy": dy}, dtype=in_dtype)
    T.run_ffn(["layer", "--config", base + ".json", "--weights", base + ".w.safetensors",
               "--input", base + ".in.safetensors", "--output", base + ".out.safetensors",
               "--backward", "--threads", threads])
    got = T.read_safetensors(base + ".out.safetensors", as_f32=False)
    hdr = T.read_header(base + ".out.safetensors")
    ref, grads = moe_ref(cfg, W, x_used, dy_used)
    E, K = cfg["num_experts"], cfg["num_experts_per_tok"]
    expect = {"y": ("F32", [N, D]), "router_logits": ("F32", [N, E]), "topk_ids": ("I32", [N, K]),
              "topk_weights": ("F32", [N, K]), "tokens_per_expert": ("I32", [E]),
              "aux_loss": ("F32", [1]), "z_loss": ("F32", [1]), "dx": ("F32", [N, D])}
    for k, v in W.items():
        expect["grad." + k] = ("F32", list(v.shape))
    names = sorted(k for k in hdr if k != "__metadata__")
    check.true("%s: output tensors are exactly the contract's" % name, names == sorted(expect),
               "" if names == sorted(expect) else "got %s" % names)
    for k, (dt, shape) in expect.items():
        if k in hdr and (hdr[k]["dtype"] != dt or hdr[k]["shape"] != shape):
            check.fail("%s: %s" % (name, k), "%s %s, expected %s %s" % (hdr[k]["dtype"], hdr[k]["shape"], dt, shape))
    if "topk_ids" in got:
        same = np.array_equal(got["topk_ids"], ref["topk_ids"])
        check.true("%s: topk_ids equal the reference (ties to the lower index)" % name, same)
        if not same:
            bad = np.argwhere(got["topk_ids"] != ref["topk_ids"])[:3]
            print("    first differences at", bad.tolist(), "scores", [ref["p"][i[0]].tolist() for i in bad])
    if "tokens_per_expert" in got:
        check.true("%s: tokens_per_expert" % name,
                   np.array_equal(got["tokens_per_expert"], ref["tokens_per_expert"]),
                   "%s vs %s" % (got["tokens_per_expert"].tolist(), ref["tokens_per_expert"].tolist()))
    for k in ["y", "router_logits", "topk_weights", "aux_loss", "z_loss"]:
        if k in got:
            check.close("%s: %s" % (name, k), got[k], ref[k], FWD_TOL, abs_floor=1e-3)
    for k in sorted(grads):
        if k in got:
            check.close("%s: %s" % (name, k), got[k], grads[k], GRAD_TOL, abs_floor=1e-3)
    return got, ref, base


# ---- the cases --------------------------------------------------------------

def cfg_of(D, E, K, F, **kw):
    c = {"hidden_size": D, "num_experts": E, "num_experts_per_tok": K,
         "moe_intermediate_size": F, "hidden_act": "silu", "mlp_type": "gated",
         "router_aux_loss_coef": 0.3, "router_z_loss_coef": 0.05}
    c.update(kw)
    return c


def mixtral(D, E, K, F, **kw):
    return cfg_of(D, E, K, F, norm_topk_prob=True, **kw)


def qwen2(D, E, K, F, Fs, **kw):
    return cfg_of(D, E, K, F, norm_topk_prob=False, shared_expert_intermediate_size=Fs, **kw)


def deepseek(D, E, K, F, ns, r=2.5, **kw):
    return cfg_of(D, E, K, F, scoring_func="sigmoid", norm_topk_prob=True,
                  routed_scaling_factor=r, n_shared_experts=ns, **kw)


run_case("mixtral", mixtral(24, 8, 2, 40), 37)
run_case("qwen2", qwen2(19, 6, 3, 13, 21), 29)
run_case("deepseek", deepseek(27, 7, 2, 11, 2), 23)
run_case("mixtral dense gelu bias", mixtral(16, 5, 2, 9, mlp_type="dense", hidden_act="gelu",
                                            mlp_bias=True), 21)
run_case("qwen2 dense relu", qwen2(13, 4, 2, 7, 10, mlp_type="dense", hidden_act="relu"), 17)
run_case("deepseek gelu_tanh bias", deepseek(15, 5, 3, 6, 1, r=1.7, hidden_act="gelu_pytorch_tanh",
                                             mlp_bias=True), 19)
run_case("E=1", mixtral(11, 1, 1, 7), 9)
run_case("k=E", qwen2(12, 4, 4, 5, 6), 10)
run_case("N<E", deepseek(14, 9, 2, 6, 1), 4)
run_case("N=1", mixtral(33, 6, 2, 17), 1)
run_case("N=1 qwen2", qwen2(10, 5, 2, 8, 9), 1)
run_case("bf16 input", mixtral(20, 4, 2, 12), 13, in_dtype="BF16")
run_case("1 thread", deepseek(18, 6, 2, 10, 2), 15, threads=1)

# Hugging Face config names: num_local_experts, model_type mixtral (always
# renormalises), intermediate_size as the expert width, auto expert type.
cfg = mixtral(16, 4, 2, 12)
file_cfg = {"hidden_size": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
            "intermediate_size": 12, "model_type": "mixtral", "hidden_act": "silu",
            "router_aux_loss_coef": 0.3, "router_z_loss_coef": 0.05}
run_case("hf mixtral names", cfg, 11, file_cfg=file_cfg)

# An expert that gets no tokens: x > 0 and a negative router row for expert 2.
cfg = mixtral(12, 5, 2, 8)
W = make_weights(cfg)
W["gate.weight"][2] = -np.abs(W["gate.weight"][2]) - 1.0
x = np.abs(RNG.standard_normal((14, 12))).astype(np.float32)
got, ref, _ = run_case("expert without tokens", cfg, 14, W=W, x=x)
check.true("expert without tokens: expert 2 got none", int(got["tokens_per_expert"][2]) == 0)
check.true("expert without tokens: its gradients are zero",
           all(np.all(got["grad.experts.2.%s.weight" % p] == 0) for p in ["gate_proj", "up_proj", "down_proj"]))

# Exact ties: experts 1, 3 and 4 share one router row (equal scores for every
# token) and token 0 is zero (all scores tie): the lower index wins.
for style, cfg in [("softmax", mixtral(10, 6, 3, 7)), ("sigmoid", deepseek(10, 6, 3, 7, 1))]:
    W = make_weights(cfg)
    W["gate.weight"][3] = W["gate.weight"][1]
    W["gate.weight"][4] = W["gate.weight"][1]
    x = RNG.standard_normal((12, 10)).astype(np.float32)
    x[0] = 0
    got, ref, _ = run_case("ties " + style, cfg, 12, W=W, x=x)
    check.true("ties %s: all-equal token picks 0 1 2" % style, got["topk_ids"][0].tolist() == [0, 1, 2],
               str(got["topk_ids"][0].tolist()))
    lg = got["router_logits"]
    check.true("ties %s: shared router rows give bit-equal logits" % style,
               np.array_equal(lg[:, 1], lg[:, 3]) and np.array_equal(lg[:, 1], lg[:, 4]))
    check.true("ties %s: among 1, 3, 4 the lower ones are taken first" % style,
               all(not (3 in row and 1 not in row) and not (4 in row and (1 not in row or 3 not in row))
                   for row in got["topk_ids"].tolist()))

# Capacity: which slots drop.  A skewed router sends most tokens to expert 0.
for c, style in [(0.5, "mixtral"), (1.0, "deepseek"), (1.25, "qwen2")]:
    cfg = {"mixtral": mixtral(12, 4, 2, 8), "deepseek": deepseek(12, 4, 2, 8, 1),
           "qwen2": qwen2(12, 4, 2, 8, 6)}[style]
    cfg["capacity_factor"] = c
    W = make_weights(cfg)
    W["gate.weight"][0] = np.abs(W["gate.weight"][0]) + 0.5
    x = np.abs(RNG.standard_normal((40, 12))).astype(np.float32)
    got, ref, _ = run_case("capacity %g %s" % (c, style), cfg, 40, W=W, x=x)
    kept, cap = ref["kept"], ref["capacity"]
    n_drop = int((~kept).sum())
    check.true("capacity %g %s: some slots drop (C = %d, %d dropped)" % (c, style, cap, n_drop), n_drop > 0)
    # The dropped slots, seen in y: rerun the reference with every kept slot
    # also dropped one at a time would be slow; instead, zero the dropped
    # slots' weights by hand and check that y is unchanged (they contribute
    # nothing), and that keeping them would change y.
    first_drop = np.argwhere(~kept)[0]
    e0 = int(ref["topk_ids"][first_drop[0], first_drop[1]])
    tokens_e0 = [n for n in range(40) for j in range(2) if ref["topk_ids"][n, j] == e0]
    check.true("capacity %g %s: expert %d keeps exactly its first %d tokens in token order" % (c, style, e0, cap),
               all(kept[n, list(ref["topk_ids"][n]).index(e0)] == (i < cap) for i, n in enumerate(tokens_e0)))

cfg = mixtral(12, 4, 2, 8)
cfg["capacity_factor"] = 0.5
W = make_weights(cfg)
x = RNG.standard_normal((16, 12)).astype(np.float32)
_, ref_cap, _ = run_case("capacity check of y", cfg, 16, W=W, x=x)
cfg_nocap = dict(cfg, capacity_factor=0)
ref_nocap, _ = moe_ref(cfg_nocap, W, x, np.zeros_like(x))
changed = np.any(np.abs(ref_cap["y"] - ref_nocap["y"]) > 1e-9, axis=1)
dropped_tokens = np.any(~ref_cap["kept"], axis=1)
check.true("capacity: exactly the tokens with a dropped slot differ from dropless",
           np.array_equal(changed, dropped_tokens), "%s vs %s" % (changed.astype(int), dropped_tokens.astype(int)))

# N = 0: empty outputs of the right shapes.
cfg = qwen2(9, 3, 2, 5, 4)
W = make_weights(cfg)
base = os.path.join(TMP, "n0")
T.write_config(base + ".json", **cfg)
T.write_safetensors(base + ".w.safetensors", W)
T.write_safetensors(base + ".in.safetensors", {"x": np.zeros((0, 9), np.float32), "dy": np.zeros((0, 9), np.float32)})
T.run_ffn(["layer", "--config", base + ".json", "--weights", base + ".w.safetensors", "--input",
           base + ".in.safetensors", "--output", base + ".out.safetensors", "--backward"])
got = T.read_safetensors(base + ".out.safetensors")
check.true("N=0: y is [0, 9], losses 0, counts 0",
           got["y"].shape == (0, 9) and got["aux_loss"][0] == 0 and got["z_loss"][0] == 0 and
           not got["tokens_per_expert"].any() and not got["grad.gate.weight"].any())

# Repeated runs are bitwise equal (forward and backward, 2 threads).
cfg = deepseek(64, 8, 2, 48, 2)
_, _, base = run_case("determinism", cfg, 96)
outs = []
for i in range(2):
    out = base + ".again%d.safetensors" % i
    T.run_ffn(["layer", "--config", base + ".json", "--weights", base + ".w.safetensors",
               "--input", base + ".in.safetensors", "--output", out, "--backward", "--threads", 2])
    with open(out, "rb") as f:
        outs.append(f.read())
with open(base + ".out.safetensors", "rb") as f:
    first = f.read()
check.equal_bytes("determinism: run 2 output file bitwise equal to run 1", outs[0], first)
check.equal_bytes("determinism: run 3 output file bitwise equal to run 1", outs[1], first)

# aux and Hugging Face's load_balancing_loss_func: one layer gives k · aux;
# two layers pool their tokens.  (HF's formula, restated here.)
def hf_load_balancing(gate_logits, E, k):
    logits = torch.cat(list(gate_logits), dim=0)
    rw = torch.softmax(logits, dim=-1)
    _, sel = torch.topk(rw, k, dim=-1)
    mask = torch.nn.functional.one_hot(sel, E).to(rw.dtype)   # (T, k, E)
    tokens_per_expert = mask.mean(0)                           # (k, E)
    prob_per_expert = rw.mean(0)                               # (E)
    return (tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() * E

cfg = mixtral(16, 6, 2, 8)
W = make_weights(cfg)
x = RNG.standard_normal((25, 16)).astype(np.float32)
got, ref, _ = run_case("aux vs hf", cfg, 25, W=W, x=x)
hf = hf_load_balancing((torch.tensor(got["router_logits"], dtype=torch.float64),), 6, 2).item()
check.close("aux vs hf: hf load_balancing_loss_func = k · aux", np.array([hf]), 2 * got["aux_loss"].astype(np.float64), 2e-5)
x2 = RNG.standard_normal((25, 16)).astype(np.float32)
got2, _, _ = run_case("aux vs hf layer 2", cfg, 25, W=W, x=x2)
hf2 = hf_load_balancing((torch.tensor(got["router_logits"], dtype=torch.float64),
                         torch.tensor(got2["router_logits"], dtype=torch.float64)), 6, 2).item()
pooled = torch.tensor(np.concatenate([got["router_logits"], got2["router_logits"]]), dtype=torch.float64)
p = torch.softmax(pooled, -1)
ids = routing(cfg, p)
f = torch.bincount(ids.reshape(-1), minlength=6).double() / (50 * 2)
aux_pooled = 6 * torch.sum(f * p.mean(0)).item()
check.close("aux vs hf: two layers pool their tokens (= k · aux over 2N tokens)", np.array([hf2]),
            np.array([2 * aux_pooled]), 2e-5)
mean_layers = (got["aux_loss"][0] + got2["aux_loss"][0])  # k · mean(aux_l) = sum when k = 2
print("    hf two-layer %.6f, pooled k·aux %.6f, k·mean of per-layer aux %.6f" % (hf2, 2 * aux_pooled, mean_layers))

check.exit()
