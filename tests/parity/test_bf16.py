#!/usr/bin/python3
"""test_bf16.py -- `ffn layer --precision bf16` (dense, GLU family and MoE
experts; forward and backward) against PyTorch float64 computing the same
mixed precision: each matrix product's two inputs rounded to bf16 (nearest,
ties to even), multiplied and accumulated in float64; biases, activations
and their derivatives, the routing and everything between the products in
float64 from the unrounded values.  That is what torch.autocast("cpu",
dtype=torch.bfloat16) does to a Linear (bf16 operands, fp32 accumulation)
with the outputs kept fp32.

    forward:   gu = r(x)·r(W_in)ᵀ + b,  h = act(g)⊙u | act(u),  y = r(h)·r(W_down)ᵀ + b
    backward:  dW_down = r(dy)ᵀ·r(h),  dh = r(dy)·r(W_down),  dgu = act'(...),
               dx = r(dgu)·r(W_in),  dW_in = r(dgu)ᵀ·r(x)

Tolerance: max|ffn - ref| <= 2e-3 · max|ref| per tensor.  Why: ffn forms h
and dgu in fp32 before rounding them to bf16, the reference in float64, so
an element close to a bf16 rounding boundary may round to the neighbouring
bf16 value (one bf16 ulp, 2^-8 relative) on one side only; such flips are
rare and enter a sum of F (or N) products with random signs, which keeps
their effect well under 1e-3 of the tensor's scale; fp32 accumulation adds
K·u ≈ 1e-5.  (Measured: at most about 3e-4.)  The test also checks that it
can tell bf16 from fp32: the same outputs compared with the unrounded
float64 reference must be off by more (at least 3x the bf16 error; bf16
rounding of the inputs alone gives about 2^-9 relative per operand;
root-mean-square errors over each tensor).

Also: bf16 on a machine level without AVX512_BF16 (FFN_SIMD=avx2) is
refused with a message naming it; --precision fp16 is a usage error (exit 2).
On a CPU without AVX512_BF16 (its /proc/cpuinfo flags, capped by FFN_SIMD)
the test checks the refusals instead (dense forward and backward, MoE: exit
1, a message naming AVX512_BF16 and bf16, no output) and says so on its
"note:" line.
Exit code = result.
"""
import atexit
import math
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ffn_testlib as T  # noqa: E402

TOL = 2e-3
SEPARATION = 3.0
chk = T.Checker("parity/test_bf16")
tmp = tempfile.mkdtemp(prefix="ffn_test_bf16_")
atexit.register(shutil.rmtree, tmp, ignore_errors=True)
RNG = np.random.default_rng(20261201)

ACTS = {
    "relu": Fn.relu,
    "gelu": lambda t: Fn.gelu(t, approximate="none"),
    "gelu_pytorch_tanh": lambda t: Fn.gelu(t, approximate="tanh"),
    "silu": Fn.silu,
    "sigmoid": torch.sigmoid,
    "linear": lambda t: t,
}


def r(a, on=True):
    """float64 tensor -> the float64 value of its bf16 rounding (via fp32,
    as ffn rounds fp32 values)."""
    if not on:
        return a
    f = a.detach().numpy().astype(np.float32)
    return torch.tensor(T.bf16_bits_to_f32(T.f32_to_bf16_bits(f)).astype(np.float64))


def layer_ref(W, prefix, x, dy, act, gated, bias, rnd=True):
    """One FFN layer forward and backward, products with bf16-rounded
    inputs (rnd) or exact (rnd False).  Returns y, dx, {tensor: grad}."""
    def w(name):
        return torch.tensor(W[prefix + name].astype(np.float64))
    f = ACTS[act]
    Wu, Wd = w("up_proj.weight"), w("down_proj.weight")
    Wg = w("gate_proj.weight") if gated else None
    bu = w("up_proj.bias") if bias else 0
    bg = w("gate_proj.bias") if bias and gated else 0
    bd = w("down_proj.bias") if bias else 0
    xr = r(x, rnd)
    u = xr @ r(Wu, rnd).T + bu
    g = xr @ r(Wg, rnd).T + bg if gated else None
    gv = g.clone().requires_grad_(True) if gated else None
    uv = u.clone().requires_grad_(True)
    h = f(gv) * uv if gated else f(uv)
    y = r(h, rnd) @ r(Wd, rnd).T + bd
    dyr = r(dy, rnd)
    grads = {"down_proj.weight": dyr.T @ r(h, rnd)}
    if bias:
        grads["down_proj.bias"] = dy.sum(0)
    dh = dyr @ r(Wd, rnd)
    h.backward(dh)
    du = uv.grad
    dx = r(du, rnd) @ r(Wu, rnd)
    grads["up_proj.weight"] = r(du, rnd).T @ xr
    if bias:
        grads["up_proj.bias"] = du.sum(0)
    if gated:
        dg = gv.grad
        dx = dx + r(dg, rnd) @ r(Wg, rnd)
        grads["gate_proj.weight"] = r(dg, rnd).T @ xr
        if bias:
            grads["gate_proj.bias"] = dg.sum(0)
    return y.detach(), dx.detach(), {prefix + k: v.detach() for k, v in grads.items()}


def rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def layer_weights(W, prefix, D, F, gated, bias):
    if gated:
        W[prefix + "gate_proj.weight"] = rand(F, D, scale=1 / math.sqrt(D))
    W[prefix + "up_proj.weight"] = rand(F, D, scale=1 / math.sqrt(D))
    W[prefix + "down_proj.weight"] = rand(D, F, scale=1 / math.sqrt(F))
    if bias:
        if gated:
            W[prefix + "gate_proj.bias"] = rand(F, scale=0.1)
        W[prefix + "up_proj.bias"] = rand(F, scale=0.1)
        W[prefix + "down_proj.bias"] = rand(D, scale=0.1)


def write_case(base, cfg, W, x, dy):
    T.write_config(base + ".json", **cfg)
    T.write_safetensors(base + ".w.safetensors", W)
    T.write_safetensors(base + ".in.safetensors", {"x": x, "dy": dy})


def run_layer(base, cfg, W, x, dy, threads=2, extra=()):
    write_case(base, cfg, W, x, dy)
    T.run_ffn(["layer", "--config", base + ".json", "--weights", base + ".w.safetensors",
               "--input", base + ".in.safetensors", "--output", base + ".out.safetensors",
               "--backward", "--threads", threads, "--precision", "bf16"] + list(extra))
    return T.read_safetensors(base + ".out.safetensors")


def compare(label, got, ref_bf16, ref_exact):
    """got within TOL of the bf16 reference, and measurably farther from the
    exact one (the test sees the rounding)."""
    ok = chk.close(label, got, ref_bf16.numpy(), TOL)
    g = np.asarray(got, dtype=np.float64)

    def rms(d):
        return float(np.sqrt(np.mean(d * d))) if d.size else 0.0
    ex = ref_exact.numpy()
    if g.size:  # the error of bf16 against fp32-exact products, for the record
        scale = float(np.max(np.abs(ex))) or 1.0
        print("       %-44s vs exact products: max rel %.2e, rms rel %.2e"
              % ("", float(np.max(np.abs(g - ex))) / scale, rms(g - ex) / scale))
    return ok, rms(g - ref_bf16.numpy()), rms(g - ex)


def dense_case(name, D, F, N, act, gated, bias, extra=()):
    print("%s: D=%d F=%d N=%d %s %s%s" % (name, D, F, N, act, "gated" if gated else "dense",
                                          " bias" if bias else ""))
    W = {}
    layer_weights(W, "", D, F, gated, bias)
    x, dy = rand(N, D), rand(N, D)
    cfg = {"hidden_size": D, "intermediate_size": F, "hidden_act": act,
           "mlp_type": "gated" if gated else "dense", "mlp_bias": bias}
    got = run_layer(os.path.join(tmp, name), cfg, W, x, dy, extra=extra)
    xt, dyt = torch.tensor(x.astype(np.float64)), torch.tensor(dy.astype(np.float64))
    yb, dxb, gb = layer_ref(W, "", xt, dyt, act, gated, bias, True)
    ye, dxe, ge = layer_ref(W, "", xt, dyt, act, gated, bias, False)
    sep = []
    for label, key, rb, re_ in [("y", "y", yb, ye), ("dx", "dx", dxb, dxe)] + \
            [("grad." + k, "grad." + k, gb[k], ge[k]) for k in sorted(gb)]:
        ok, e_bf, e_ex = compare("%s %s" % (name, label), got[key], rb, re_)
        if "bias" not in key:  # bias gradients are fp32 sums: no rounding to see
            sep.append((label, e_bf, e_ex))
    return sep


def check_separation(name, sep):
    """Over the product outputs of a case, the exact reference is off by
    SEPARATION times more than the bf16 one (root-mean-square errors: a rare
    rounding flip, which the max error sees, does not hide the systematic
    difference)."""
    worst_bf = max(e for _, e, _ in sep)
    best_ex = min(e for _, _, e in sep)
    ok = best_ex >= SEPARATION * worst_bf and best_ex > 0
    chk.count += 1
    print("  %-4s %s: bf16 visible (rms error vs exact >= %.3e, %.0fx the bf16 ref's <= %.3e)"
          % ("ok" if ok else "FAIL", name, best_ex, SEPARATION, worst_bf))
    if not ok:
        chk.failures.append("%s: bf16 rounding not visible" % name)


# ---- refusals -----------------------------------------------------------------
def refusal(label, args, env, code, needles):
    out = args[args.index("--output") + 1]
    p = T.run_ffn(args, check=False, env=env)
    ok = p.returncode == code and all(n in p.stderr for n in needles) and not os.path.exists(out)
    chk.count += 1
    print("  %-4s %s: exit %d (expected %d), %s%s" % (
        "ok" if ok else "FAIL", label, p.returncode, code, p.stderr.strip()[:200],
        ", and wrote its output" if os.path.exists(out) else ", nothing written"))
    if not ok:
        chk.failures.append(label)


def layer_args(base, extra=()):
    return ["layer", "--config", base + ".json", "--weights", base + ".w.safetensors",
            "--input", base + ".in.safetensors", "--output", os.path.join(tmp, "refused.st")] \
        + list(extra)


HW = T.cpu_has("avx512_bf16")
if not HW:
    # No AVX512_BF16 here (or FFN_SIMD caps below AVX-512): every bf16 run is
    # refused, naming the instruction set and the type, exit 1, no output.
    print("no AVX512_BF16 (/proc/cpuinfo, FFN_SIMD=%s): the refusals" % os.environ.get("FFN_SIMD", "unset"))
    W = {}
    layer_weights(W, "", 67, 131, True, False)
    dense = os.path.join(tmp, "swiglu_odd")
    write_case(dense, {"hidden_size": 67, "intermediate_size": 131, "hidden_act": "silu",
                       "mlp_type": "gated"}, W, rand(37, 67), rand(37, 67))
    W = {"gate.weight": rand(4, 40)}
    for e in range(4):
        layer_weights(W, "experts.%d." % e, 40, 72, True, False)
    moe = os.path.join(tmp, "moe")
    write_case(moe, {"hidden_size": 40, "intermediate_size": 72, "moe_intermediate_size": 72,
                     "num_experts": 4, "num_experts_per_tok": 2, "hidden_act": "silu",
                     "mlp_type": "gated"}, W, rand(9, 40), rand(9, 40))
    for label, base, extra in [("dense bf16 forward", dense, []),
                               ("dense bf16 backward", dense, ["--backward"]),
                               ("MoE bf16 backward", moe, ["--backward"])]:
        refusal(label + " refused", layer_args(base, extra + ["--precision", "bf16"]), None, 1,
                ["AVX512_BF16", "bf16"])
    refusal("--precision fp16 is a usage error", layer_args(dense, ["--precision", "fp16"]), None,
            2, ["--precision: expected"])
    T.note("no AVX512_BF16 (/proc/cpuinfo, FFN_SIMD=%s): tested the refusal of bf16 layers "
           "(dense, MoE), not their results" % os.environ.get("FFN_SIMD", "unset"))
    chk.exit()
T.note("AVX512_BF16 present: bf16 layers against PyTorch, and the refusal under FFN_SIMD=avx2")

# ---- dense and GLU-family layers, odd shapes --------------------------------
cases = [
    ("swiglu_odd", 67, 131, 37, "silu", True, False),
    ("geglu_bias", 48, 100, 70, "gelu", True, True),
    ("gelu_dense", 96, 257, 65, "gelu", False, False),
    ("relu_dense_bias", 33, 77, 5, "relu", False, True),
    ("glu_n1", 40, 61, 1, "sigmoid", True, False),
    ("bilinear", 50, 90, 129, "linear", True, False),
    ("tanh_gelu", 64, 176, 64, "gelu_pytorch_tanh", False, True),
]
for c in cases:
    check_separation(c[0], dense_case(*c))
# recompute (no saved activations) runs the same products
dense_case("swiglu_recompute", 67, 131, 37, "silu", True, False, extra=["--recompute"])


# ---- MoE: the experts' products in bf16, the router fp32 --------------------
def moe_case(name, D, F, E, K, N, act, gated):
    print("%s: D=%d F=%d E=%d K=%d N=%d %s" % (name, D, F, E, K, N, act))
    W = {"gate.weight": rand(E, D, scale=3 / math.sqrt(D))}
    for e in range(E):
        layer_weights(W, "experts.%d." % e, D, F, gated, False)
    x, dy = rand(N, D), rand(N, D)
    cfg = {"hidden_size": D, "intermediate_size": F, "moe_intermediate_size": F,
           "num_experts": E, "num_experts_per_tok": K, "hidden_act": act,
           "mlp_type": "gated" if gated else "dense", "norm_topk_prob": True}
    got = run_layer(os.path.join(tmp, name), cfg, W, x, dy)
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    dyt = torch.tensor(dy.astype(np.float64))
    Wr = torch.tensor(W["gate.weight"].astype(np.float64), requires_grad=True)
    p = torch.softmax(xt @ Wr.T, dim=-1)
    ids = torch.sort(p.detach(), dim=-1, descending=True, stable=True).indices[:, :K]
    pk = p.gather(1, ids)
    wts = pk / pk.sum(-1, keepdim=True)
    y = torch.zeros(N, D, dtype=torch.float64)
    dx = torch.zeros(N, D, dtype=torch.float64)
    dwts = torch.zeros(N, K, dtype=torch.float64)
    grads = {}
    for e in range(E):
        sel = (ids == e).nonzero()
        pre = "experts.%d." % e
        if len(sel) == 0:
            for k in ("gate_proj.weight", "up_proj.weight", "down_proj.weight"):
                if pre + k in W:
                    grads[pre + k] = torch.zeros(W[pre + k].shape, dtype=torch.float64)
            continue
        tok, slot = sel[:, 0], sel[:, 1]
        we = wts[tok, slot].detach().unsqueeze(1)
        # expert output o, and its backward with dy scaled by the routing weight
        ye, dxe, ge = layer_ref(W, pre, xt.detach()[tok], we * dyt[tok], act, gated, False)
        y.index_add_(0, tok, we * ye)
        dx.index_add_(0, tok, dxe)
        dwts[tok, slot] = (dyt[tok] * ye).sum(1)
        grads.update(ge)
    (wts * dwts).sum().backward()  # the routing's share of dx and the router gradient
    dx = dx + xt.grad
    chk.close(name + " y", got["y"], y.numpy(), TOL)
    chk.close(name + " dx", got["dx"], dx.numpy(), TOL)
    # (with K = 1 and renormalised weights the router gradient is 0: an
    # absolute floor of 1e-6 keeps the relative test meaningful)
    chk.close(name + " grad.gate.weight", got["grad.gate.weight"], Wr.grad.numpy(), TOL,
              abs_floor=1e-6)
    for k in sorted(grads):
        chk.close(name + " grad." + k, got["grad." + k], grads[k].numpy(), TOL)


moe_case("moe_swiglu", 40, 72, 4, 2, 45, "silu", True)
moe_case("moe_gelu_dense", 33, 50, 3, 1, 20, "gelu", False)


base = os.path.join(tmp, "swiglu_odd")
refusal("bf16 under FFN_SIMD=avx2 is refused", layer_args(base, ["--precision", "bf16"]),
        {"FFN_SIMD": "avx2"}, 1, ["AVX512_BF16", "bf16"])
refusal("--precision fp16 is a usage error", layer_args(base, ["--precision", "fp16"]), None, 2,
        ["--precision: expected"])

chk.exit()
