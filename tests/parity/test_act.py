#!/usr/bin/env python3
"""tests/parity/test_act.py -- ffn's activations against PyTorch's.

Loads build/libffn.so with ctypes and evaluates, for every activation, the
scalar reference (ffn_act_forward / ffn_act_grad) and the array kernels at
every SIMD level this CPU has (ffn_act_fwd_<level> / ffn_act_bwd_<level>,
internal, called through build/tests/libffn_kernels.so as kx_act_*_<level>)
on a grid over [-12, 12] plus extremes up to |x| = 1e4 and 3e38.  The
truth is PyTorch in float64 (torch.nn.functional and autograd) on the same
float32 inputs.  Tolerance: |ffn - torch| <= 2e-5·|torch| + 1e-6 (forward
values below 1e-6 in magnitude are compared absolutely; derivatives cross
zero).  Everything must be finite.  Prints the max error per case; exits
non-zero when any is over.
"""
import ctypes
import os
import sys

import numpy as np
import torch
import torch.nn.functional as Fn

ROOT = os.environ.get("FFN_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
lib = ctypes.CDLL(os.path.join(ROOT, "build", "libffn.so"))
kernels = ctypes.CDLL(os.path.join(ROOT, "build", "tests", "libffn_kernels.so"))

ACTS = [  # enum value, name, torch function
    (0, "linear", lambda t: t),
    (1, "relu", Fn.relu),
    (2, "gelu", Fn.gelu),
    (3, "gelu_pytorch_tanh", lambda t: Fn.gelu(t, approximate="tanh")),
    (4, "silu", Fn.silu),
    (5, "sigmoid", torch.sigmoid),
]

lib.ffn_act_forward.restype = ctypes.c_float
lib.ffn_act_forward.argtypes = [ctypes.c_int, ctypes.c_float]
lib.ffn_act_grad.restype = ctypes.c_float
lib.ffn_act_grad.argtypes = [ctypes.c_int, ctypes.c_float]
lib.ffn_simd_level.restype = ctypes.c_char_p
FP = ctypes.POINTER(ctypes.c_float)

levels = ["scalar"] + {"avx512": ["avx2", "avx512"], "avx2": ["avx2"]}.get(
    lib.ffn_simd_level().decode(), [])
# the library's level against the CPU's flags (capped by FFN_SIMD), read here
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ffn_testlib as T  # noqa: E402
want = "avx512" if T.cpu_has("avx512") else "avx2" if T.cpu_has("avx2") else "scalar"
level_ok = lib.ffn_simd_level().decode() == want
print(f"{'ok ' if level_ok else 'BAD'} simd level {lib.ffn_simd_level().decode()}, "
      f"/proc/cpuinfo and FFN_SIMD say {want}")
if want != "avx512":
    T.note("levels tested: %s (no AVX-512 by /proc/cpuinfo, FFN_SIMD=%s)"
           % (", ".join(levels), os.environ.get("FFN_SIMD", "unset")))

grid = np.arange(-2400, 2401, dtype=np.float64) * 0.005 + 0.00123
extremes = [0.0, 1e-30, -1e-30, 1e-7, -1e-7, 30, -30, 88, -88, 100, -100, 1e3, -1e3,
            1e4, -1e4, 1e6, -1e6, 3e38, -3e38]
x32 = np.concatenate([grid, extremes]).astype(np.float32)
n = len(x32)
rng = np.random.default_rng(0)
dy32 = rng.uniform(-1, 1, n).astype(np.float32)


def ptr(a):
    return a.ctypes.data_as(FP)


def torch_truth(fn):
    t = torch.tensor(x32.astype(np.float64), requires_grad=True)
    y = fn(t)
    (g,) = torch.autograd.grad(y.sum(), t)
    return y.detach().numpy(), g.numpy()


def err(got, want, rel=2e-5, abs_=1e-6):
    got = got.astype(np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    # relu' at exactly 0 is a convention (PyTorch: 0); the grid avoids 0 except x = 0
    return float(np.max(np.abs(got - want) / (rel * np.abs(want) + abs_)))


failures = 0
for code, name, fn in ACTS:
    y_t, g_t = torch_truth(fn)
    if name == "relu":
        g_t = np.where(x32 > 0, 1.0, 0.0)  # PyTorch's relu'(0) = 0 holds, (x > 0)
    y_ref = np.array([lib.ffn_act_forward(code, float(v)) for v in x32])
    g_ref = np.array([lib.ffn_act_grad(code, float(v)) for v in x32])
    cases = [("reference", y_ref, g_ref * dy32)]
    for lv in levels:
        y = np.empty(n, np.float32)
        dx = np.empty(n, np.float32)
        getattr(kernels, f"kx_act_fwd_{lv}")(ctypes.c_int(code), ptr(y), ptr(x32), ctypes.c_int64(n))
        getattr(kernels, f"kx_act_bwd_{lv}")(ctypes.c_int(code), ptr(dx), ptr(dy32), ptr(x32),
                                             ctypes.c_int64(n))
        cases.append((lv, y, dx))
    # torch in float32 too, for scale: how far is PyTorch's own fp32 from its fp64?
    y_t32 = fn(torch.tensor(x32)).numpy()
    e32 = err(y_t32, y_t)
    for label, y, dx in cases:
        ef = err(y, y_t)
        eg = err(dx, g_t * dy32.astype(np.float64))
        ok = ef <= 1 and eg <= 1
        failures += not ok
        print(f"{'ok ' if ok else 'BAD'} {name:18s} {label:9s} forward {ef:7.3f}  grad {eg:7.3f}"
              f"  (in units of the tolerance; torch fp32 forward: {e32:.3f})")

failures += not level_ok
print(f"tolerance: |ffn - torch64| <= 2e-5·|torch64| + 1e-6; {failures} failed")
sys.exit(1 if failures else 0)
