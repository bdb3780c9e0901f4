#!/usr/bin/python3
"""test_layer.py -- `ffn layer` (dense FFN and the GLU family, forward and
backward) against PyTorch.

Every activation x dense/gated x bias/no bias, on random shapes (D or F = 1,
odd sizes) and N in {0, 1, 3, 129}, every N in 2..32 (small batches,
the streaming kernels) and N in and just past the range of the
weight-gradient kernel (16..97) on odd shapes; y, dx and every weight
and bias gradient of L = sum(y * dy).  Also: F16 and BF16 inputs, the Hugging Face
and GLU-family activation aliases, --recompute (bitwise equal to the
default), |x| up to 1e4, and determinism (run to run, and across threads).

Reference: torch 1.13 in float64 on the very float32 values ffn reads (after
F16/BF16 rounding where the file stores those), with torch.nn.functional
activations and autograd.  Using float64 for the reference means the error
printed is ffn's own, not the sum of two fp32 errors.

Tolerance: max|ffn - ref| <= 1e-4 * max|ref| per tensor.  Why 1e-4: fp32 has
unit roundoff u = 6e-8; every output is a dot product over at most
K = max(D, F, N) <= 200 terms (gradients of weights sum over N <= 129 rows),
whose worst-case relative error bound is about K*u = 1.2e-5 of the scale of
the terms, and a few ulp more for exp/erf/tanh in the activations.  1e-4
leaves a margin of 8x over the worst case, while any real defect (a wrong
derivative, a dropped bias, a transposed weight) gives errors of order 1.
(Measured: the largest error over all cases is about 5e-6.)

The |x| <= 1e4 cases and the thread-count comparison explain their own
criteria where they run.
"""
import atexit
import os
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as Fn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ffn_testlib as T  # noqa: E402

TOL = 1e-4
torch.set_grad_enabled(True)
chk = T.Checker("parity/test_layer")
tmp = tempfile.mkdtemp(prefix="ffn_test_layer_")
atexit.register(shutil.rmtree, tmp, ignore_errors=True)

# hidden_act name -> the reference activation (torch.nn.functional)
ACTS = {
    "relu": Fn.relu,
    "gelu": lambda t: Fn.gelu(t, approximate="none"),
    "gelu_pytorch_tanh": lambda t: Fn.gelu(t, approximate="tanh"),
    "silu": Fn.silu,
    "sigmoid": torch.sigmoid,
    "linear": lambda t: t,
}
ALIASES = {"gelu_new": "gelu_pytorch_tanh", "swish": "silu"}
FAMILIES = {"glu": "sigmoid", "bilinear": "linear", "reglu": "relu", "geglu": "gelu",
            "swiglu": "silu"}

TENSORS = {  # name -> shape in letters
    "gate_proj.weight": "FD", "gate_proj.bias": "F", "up_proj.weight": "FD",
    "up_proj.bias": "F", "down_proj.weight": "DF", "down_proj.bias": "D",
}


def tensor_names(gated, bias):
    names = []
    for proj in (["gate_proj"] if gated else []) + ["up_proj", "down_proj"]:
        names.append(proj + ".weight")
        if bias:
            names.append(proj + ".bias")
    return names


def make_case(rng, D, F, N, gated, bias, x_scale=1.0):
    """Random float32 weights (scaled like nn.Linear's init), x and dy."""
    size = {"D": D, "F": F}
    w = {}
    for name in tensor_names(gated, bias):
        shape = tuple(size[c] for c in TENSORS[name])
        fan_in = D if name.startswith(("gate", "up")) else F
        w[name] = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
    x = (rng.standard_normal((N, D)) * x_scale).astype(np.float32)
    dy = rng.standard_normal((N, D)).astype(np.float32)
    return w, x, dy


def reference(act, gated, w, x, dy, dtype=torch.float64):
    """y, dx and the gradient of every weight, by torch autograd (float64
    unless dtype says otherwise)."""
    t = {k: torch.tensor(v, dtype=dtype, requires_grad=True) for k, v in w.items()}
    xt = torch.tensor(x, dtype=dtype, requires_grad=True)
    dyt = torch.tensor(dy, dtype=dtype)

    def proj(p, inp):
        out = inp @ t[p + ".weight"].T
        return out + t[p + ".bias"] if p + ".bias" in t else out

    up = proj("up_proj", xt)
    h = ACTS[act](proj("gate_proj", xt)) * up if gated else ACTS[act](up)
    y = proj("down_proj", h)
    (y * dyt).sum().backward()
    out = {"y": y.detach().numpy().astype(np.float64), "dx": xt.grad.numpy().astype(np.float64)}
    for k, v in t.items():
        out["grad." + k] = v.grad.numpy().astype(np.float64)
    return out


def run_layer(tag, cfg, w, x, dy, backward=True, wdtype=None, xdtype=None, extra=()):
    """Write the files, run `ffn layer`, return (output tensors, output path)."""
    d = os.path.join(tmp, tag)
    os.makedirs(d, exist_ok=True)
    T.write_config(os.path.join(d, "layer.json"), **cfg)
    T.write_safetensors(os.path.join(d, "w.safetensors"), w, dtype=wdtype)
    inp = {"x": x, "dy": dy} if backward else {"x": x}
    T.write_safetensors(os.path.join(d, "in.safetensors"), inp, dtype=xdtype)
    out = os.path.join(d, "out%s.safetensors" % "".join(e.strip("-") for e in extra))
    args = ["layer", "--config", os.path.join(d, "layer.json"), "--weights",
            os.path.join(d, "w.safetensors"), "--input", os.path.join(d, "in.safetensors"),
            "--output", out] + (["--backward"] if backward else []) + list(extra)
    T.run_ffn(args)
    return T.read_safetensors(out), out


def check_case(tag, act_name, act_ref, gated, bias, D, F, N, rng, wdtype=None, xdtype=None,
               x_scale=1.0, explicit_type=None, tol=TOL):
    w, x, dy = make_case(rng, D, F, N, gated, bias, x_scale)
    cfg = {"hidden_size": D, "intermediate_size": F, "hidden_act": act_name, "mlp_bias": bias}
    if explicit_type:
        cfg["mlp_type"] = explicit_type
    got, out_path = run_layer(tag, cfg, w, x, dy, wdtype=wdtype, xdtype=xdtype)
    header = T.read_header(out_path)
    # The reference sees exactly the values ffn read from the files.
    wr = {k: T.round_to(v, wdtype or "F32") for k, v in w.items()}
    ref = reference(act_ref, gated, wr, T.round_to(x, xdtype or "F32"),
                    T.round_to(dy, xdtype or "F32"))
    print("%s: %s %s bias=%d D=%d F=%d N=%d%s" % (tag, "gated" if gated else "dense", act_name,
                                                   bias, D, F, N,
                                                   " w=%s x=%s" % (wdtype, xdtype)
                                                   if wdtype or xdtype else ""))
    expected = ["y", "dx"] + ["grad." + k for k in w]
    for name in expected:
        if name not in got:
            chk.fail("%s %s" % (tag, name), "missing from the output file")
            continue
        if header[name]["dtype"] != "F32":
            chk.fail("%s %s" % (tag, name), "dtype %s, expected F32" % header[name]["dtype"])
        chk.close("%s %s" % (tag, name), got[name], ref[name], tol)
    return w, x, dy, cfg


def main():
    rng = np.random.default_rng(20261129)

    # ---- every activation x dense/gated x bias, N in {0, 1, 3, 129} ----
    # Shapes: D, F odd or 1 for some; kept small so ~100 runs take seconds.
    ns = [0, 1, 3, 129]
    case = 0
    for act in ACTS:
        for gated in (False, True):
            for bias in (False, True):
                for n in ns:
                    D = [1, 7, 33, 24, 5, 64][case % 6]
                    F = [13, 1, 47, 96, 2, 17][(case // 2) % 6]
                    if case % 5 == 0:
                        D, F = int(rng.integers(1, 40)), int(rng.integers(1, 70))
                    explicit = (["dense", "gated"][gated] if case % 3 == 0 else None)
                    check_case("c%03d" % case, act, act, gated, bias, D, F, n, rng,
                               explicit_type=explicit)
                    case += 1

    # ---- the weight-gradient kernel's token range (src/nn/ffn.c: ffn_wgrad
    # for N <= 96, dnnl_sgemm above): N across it and just past it, D and F
    # odd and wider than a register tile (6 rows x 64 columns), so that every
    # gradient has full tiles and row and column tails ----
    for i, (n, D, F) in enumerate([(16, 67, 131), (64, 131, 67), (70, 37, 197),
                                   (96, 199, 71), (97, 71, 143), (33, 6, 64)]):
        gated = i % 2 == 0
        act = ["silu", "gelu", "gelu_pytorch_tanh", "relu", "sigmoid", "silu"][i]
        check_case("wg%d" % i, act, act, gated, i % 3 == 0, D, F, n, rng)
    # ---- small batches: every N in 2..32 (the streaming kernels' token
    # groups and k blocks, src/kernels/gemv*.c), forward and the backward
    # after it, on odd shapes; at N = 17 and 32 also --recompute (which must
    # reproduce the streaming forward: bitwise equal to the default) ----
    for n in range(2, 33):
        if n % 2:
            w, x, dy, cfg = check_case("sb%02d" % n, "gelu", "gelu", False, False, 129, 77, n, rng)
        else:
            w, x, dy, cfg = check_case("sb%02d" % n, "silu", "silu", True, True, 67, 131, n, rng)
        if n in (17, 32):
            a, _ = run_layer("sb%02d" % n, cfg, w, x, dy)
            b, _ = run_layer("sb%02d" % n, cfg, w, x, dy, extra=("--recompute",))
            chk.true("sb%02d --recompute bitwise equal to default (%d tensors)" % (n, len(a)),
                     sorted(a) == sorted(b) and all(a[k].tobytes() == b[k].tobytes() for k in a))

    # ---- aliases: gelu_new, swish; GLU family names imply gated ----
    for alias, act in ALIASES.items():
        check_case("alias_" + alias, alias, act, False, True, 9, 21, 3, rng)
    for fam, act in FAMILIES.items():
        check_case("family_" + fam, fam, act, True, fam in ("glu", "geglu"), 11, 19, 5, rng)

    # ---- F16 and BF16 inputs (weights, x, dy), compared on the rounded values ----
    for i, (wdt, xdt) in enumerate([("F16", "F16"), ("BF16", "BF16"), ("F16", "F32"),
                                    ("F32", "BF16"), ("BF16", "F16")]):
        for gated in (False, True):
            act = ["silu", "gelu", "relu", "gelu_pytorch_tanh", "sigmoid"][i]
            check_case("dt%d%s" % (i, "g" if gated else "d"), act, act, gated, i % 2 == 0,
                       13, 29, 17, rng, wdtype=wdt, xdtype=xdt)

    # ---- |x| up to 1e4: finite, and equal to the float64 reference ----
    # The inputs are built so that every pre-activation is exact in fp32:
    # x holds integers up to 1e4 (14 bits), weights and biases multiples of
    # 1/16 with |w| <= 1/2, so each product and each partial sum of D = 8
    # terms needs at most 21 bits.  Then fp32 and float64 evaluate the
    # activations at the very same points, and the test measures the
    # activations and their derivatives far in their tails (where naive
    # formulas give inf/inf = NaN or 0 * inf), not the conditioning of a
    # sum of 1e4-sized terms (which would turn an absolute rounding error
    # of ~1e-3 in a pre-activation into a relative error ~1e-3 of
    # exp(-|g|) in every fp32 implementation, torch's included).  Rows mix
    # +-1e4, random integers up to 1e4 and small values, so that every
    # gradient has non-tail entries too.  Scale floor 1e-30: entries below
    # it are under fp32's normal range and compare absolutely.
    for act in ["silu", "gelu", "gelu_pytorch_tanh", "sigmoid", "relu"]:
        for gated in (False, True):
            D, F, N = 8, 12, 9
            w = {k: (rng.integers(-8, 9, v.shape) / 16.0).astype(np.float32)
                 for k, v in make_case(rng, D, F, 0, gated, True)[0].items()}
            x = rng.integers(-10000, 10001, (N, D)).astype(np.float32)
            x[0, :] = 1e4
            x[1, :] = -1e4
            x[2:5, :] = rng.integers(-16, 17, (3, D))
            dy = rng.standard_normal((N, D)).astype(np.float32)
            cfg = {"hidden_size": D, "intermediate_size": F, "hidden_act": act, "mlp_bias": True}
            tag = "big_%s_%s" % (act, "g" if gated else "d")
            got, _ = run_layer(tag, cfg, w, x, dy)
            ref = reference(act, gated, w, x, dy)
            ref32 = reference(act, gated, w, x, dy, torch.float32)
            finite32 = all(np.all(np.isfinite(v)) for v in ref32.values())
            print("%s: |x| up to 1e4, %s %s (torch fp32 %s)" % (
                tag, "gated" if gated else "dense", act,
                "finite" if finite32 else "NOT finite: float64 is the reference"))
            for name, r in ref.items():
                chk.true("%s %s finite" % (tag, name), bool(np.all(np.isfinite(got[name]))))
                chk.close("%s %s" % (tag, name), got[name], r, TOL, abs_floor=1e-30)

    # ---- --recompute gives the same bits as the default (saved activations) ----
    for i, (act, gated) in enumerate([("silu", True), ("gelu", False), ("relu", True),
                                      ("sigmoid", False)]):
        w, x, dy = make_case(rng, 19, 37, 129 if i % 2 else 3, gated, i < 2)
        cfg = {"hidden_size": 19, "intermediate_size": 37, "hidden_act": act,
               "mlp_bias": i < 2}
        a, _ = run_layer("rec%d" % i, cfg, w, x, dy)
        b, _ = run_layer("rec%d" % i, cfg, w, x, dy, extra=("--recompute",))
        same = sorted(a) == sorted(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)
        chk.true("rec%d --recompute bitwise equal to default (%s %s, %d tensors)"
                 % (i, "gated" if gated else "dense", act, len(a)), same)

    # ---- determinism: run to run, and --threads 1 against 2 ----
    # What src/nn/ffn.c's top comment promises, and what is enforced here:
    #   - every path is bitwise reproducible run to run at a fixed thread
    #     count: two runs must give byte-identical output files;
    #   - the decode path (forward with N <= 8, FFN_DECODE_MAX_N), the
    #     activation epilogues and the bias gradients are bitwise identical
    #     at every thread count: enforced for y at N = 3 and for grad.*.bias;
    #   - the matrix-engine path (oneDNN sgemm) is not promised bitwise
    #     across thread counts: its difference is printed and held to the
    #     parity tolerance.
    for n in (3, 129):
        w, x, dy = make_case(rng, 96, 160, n, True, True)
        cfg = {"hidden_size": 96, "intermediate_size": 160, "hidden_act": "silu",
               "mlp_bias": True}
        outs = {}
        for threads in ("1", "2"):
            files = []
            for rep in range(2):
                _, path = run_layer("det%d" % n, cfg, w, x, dy, extra=("--threads", threads))
                with open(path, "rb") as f:
                    files.append(f.read())
            chk.equal_bytes("determinism N=%d: two runs at --threads %s give byte-identical "
                            "files" % (n, threads), files[0], files[1])
            outs[threads] = T.read_safetensors(path)
        for k in sorted(outs["1"]):
            a, b = outs["1"][k], outs["2"][k]
            bitwise = a.tobytes() == b.tobytes()
            scale = max(float(np.max(np.abs(a))), 1e-30)
            rel = float(np.max(np.abs(a.astype(np.float64) - b))) / scale
            promised = (k == "y" and n <= 8) or k.endswith(".bias")
            label = "threads 1 vs 2, N=%d %s: %s, max rel diff %.3e" % (
                n, k, "bitwise equal" if bitwise else "differs", rel)
            if promised:
                chk.true(label + " (bitwise promised)", bitwise)
            else:
                chk.true(label + " (tolerance %.0e)" % TOL, rel <= TOL)

    chk.exit()


if __name__ == "__main__":
    main()
