"""test_quant_formats -- ffn's ggml tensor types as tensors, beyond the block
checks of test_quant.py (whose numpy decoders and ggml reference quantizers
this test imports rather than repeats):

  1. f16 and bf16 encoding of random tensors with ties, subnormals, values
     past the range and signed zeros: ffn's bytes equal numpy's round to
     nearest even (np.float16; bf16 by the bit formula) byte for byte, and
     decoding them is exact.
  2. Quantize -> dequantize of random (rows, cols) tensors, odd block counts,
     for q8_0, q4_0, q4_K, q6_K: ffn's q8_0/q4_0 bytes equal ggml's reference
     quantizer (numpy port in test_quant.py) byte for byte; ffn's decoded
     values equal the numpy decoder of the same bytes bit for bit; and the
     round-trip error stays within the format's bound per element:
       q8_0  |x - x'| <= d (0.5 + 127 * 2^-11 + 2^-15), d = amax/127
       q4_0  |x - x'| <= |d| (1 + 8 * 2^-11 + 2^-15),   d = max/-8
     (2^-11: d stored as fp16; 1 for q4_0: the clamp of q at 15; 2^-15 covers
     the float32 roundings of x * (1/d))
     (q4_K / q6_K: RMS bounds in test_quant.py; here only exactness).
  3. y = x W^T through ffn_ggml_matmul (the kernels the model uses) for every
     type ffn computes with, odd shapes, 1 and 2 threads, against PyTorch
     float64 on the numpy-decoded weight.  Tolerance per output, S = sum |w x|:
       int8 formats  A + (m + 8) 2^-24 (S + A), A = sum_i |w_i| d_b(i)/2 with
                     d_b = amax/127 of x's block (32 values; 256 for K-quants):
                     x is rounded to int8 blocks, |x - d q| <= d/2;
       bf16          A = S 2^-8 (x rounded to bf16 where AVX512_BF16 is used);
       f16, f32      A = 0;
     m = 256 + cols/256 covers the longest float summation chain of any level.
C side: tests/parity/qgemm_driver.c (and test_quant.py's quant_driver.c).
Exit code non-zero on any mismatch.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_quant as tq  # noqa: E402  (decoders, reference quantizers, the driver)

ROOT = tq.ROOT
F32 = np.float32
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def build(tmp):
    exe = os.path.join(tmp, "qgemm_driver")
    cmd = ["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-fopenmp", "-I" + os.path.join(ROOT, "include"),
           os.path.join(HERE, "qgemm_driver.c"), os.path.join(ROOT, "build/libffn.a"),
           "-ldnnl", "-fopenmp", "-lm", "-lpthread", "-lpcre2-8", "-o", exe]
    subprocess.run(cmd, check=True)
    return tq.build_driver(tmp), exe


# ---- 1. f16 / bf16 -----------------------------------------------------------

def bf16_rne(x):
    b = x.astype(F32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(x)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((b[nan] >> 16) | 0x40).astype(np.uint16)  # quiet NaN, sign kept
    return r


def special_values(rng, n):
    x = (rng.standard_normal(n) * np.exp(rng.uniform(-30, 30, n))).astype(F32)
    x[:8] = [0.0, -0.0, 65504.0, 65520.0, -70000.0, 6e-8, -3e-5, 1e-40]
    # exact ties of f16 (11 bits kept) and bf16 (8 bits kept)
    x[8:16] = (1.0 + (2 * np.arange(8) + 1) * 2.0 ** -11).astype(F32)
    x[16:24] = (1.0 + (2 * np.arange(8) + 1) * 2.0 ** -8).astype(F32)
    return x


def test_half(qexe, tmp, rng):
    x = special_values(rng, 997)
    raw = tq.ffn_quantize(qexe, tmp, "f16", x)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    check(raw == want.tobytes(), "f16: ffn's bytes equal numpy's round-to-nearest-even (%d values)" % x.size)
    back = tq.ffn_dequantize(qexe, tmp, "f16", raw, x.size)
    check(np.array_equal(back.view(np.uint32), want.astype(F32).view(np.uint32)), "f16: decoding is exact")
    raw = tq.ffn_quantize(qexe, tmp, "bf16", x)
    want = bf16_rne(x)
    check(raw == want.tobytes(), "bf16: ffn's bytes equal the round-to-nearest-even formula (%d values)" % x.size)
    back = tq.ffn_dequantize(qexe, tmp, "bf16", raw, x.size)
    exact = (want.astype(np.uint32) << 16).view(F32)
    check(np.array_equal(back.view(np.uint32), exact.view(np.uint32)), "bf16: decoding is exact")


# ---- 2. quantize -> dequantize of tensors -------------------------------------

def test_roundtrip(qexe, tmp, rng):
    for typ, rows, nb in (("q8_0", 7, 9), ("q4_0", 5, 13), ("q4_K", 3, 5), ("q6_K", 4, 3)):
        bs, bb = tq.BLOCK[typ]
        cols = bs * nb
        x = (rng.standard_normal((rows, cols)) * np.exp(rng.uniform(-4, 4, (rows, 1)))).astype(F32)
        raw = tq.ffn_quantize(qexe, tmp, typ, x.reshape(-1))
        check(len(raw) == rows * nb * bb, "%s (%d, %d): %d bytes" % (typ, rows, cols, len(raw)))
        if typ in ("q8_0", "q4_0"):
            ref = (tq.q8_0_ref if typ == "q8_0" else tq.q4_0_ref)(x)
            check(raw == ref, "%s (%d, %d): bytes equal ggml's reference quantizer" % (typ, rows, cols))
        back = tq.ffn_dequantize(qexe, tmp, typ, raw, x.size)
        want = tq.DQ[typ](raw)
        check(np.array_equal(back.view(np.uint32), want.view(np.uint32)),
              "%s (%d, %d): ffn's decoding equals the numpy decoder bit for bit" % (typ, rows, cols))
        err = np.abs(back.astype(np.float64) - x.reshape(-1))
        blocks = x.reshape(-1, 32).astype(np.float64) if bs == 32 else None
        if typ == "q8_0":
            d = np.abs(blocks).max(axis=1) / 127
            bound = np.repeat(d * (0.5 + 127 * 2.0 ** -11 + 2.0 ** -15), 32) + 1e-30
        elif typ == "q4_0":
            idx = np.argmax(np.abs(blocks), axis=1)
            d = np.abs(blocks[np.arange(blocks.shape[0]), idx]) / 8
            bound = np.repeat(d * (1 + 8 * 2.0 ** -11 + 2.0 ** -15), 32) + 1e-30
        else:
            continue
        worst = float(np.max(err / bound))
        check(worst <= 1.0, "%s (%d, %d): round-trip error within the bound (worst %.3f of it)" % (typ, rows, cols, worst))


# ---- 3. the product ---------------------------------------------------------------

def tolerance(typ, wf, x):
    S = np.abs(wf)[None, :, :] * np.abs(x)[:, None, :]      # (n, rows, cols)
    Ssum = S.sum(axis=2)
    cols = wf.shape[1]
    A = np.zeros_like(Ssum)
    if typ in ("q8_0", "q4_0", "q4_K", "q6_K"):
        ab = 32 if typ in ("q8_0", "q4_0") else 256
        xb = np.abs(x).reshape(x.shape[0], -1, ab)
        d = xb.max(axis=2) / 127 / 2 * (1 + 1e-6)           # (n, blocks)
        wb = np.abs(wf).reshape(wf.shape[0], -1, ab).sum(axis=2)  # (rows, blocks)
        A = d @ wb.T
    elif typ == "bf16":
        A = Ssum * 2.0 ** -8
    m = 256 + cols / 256
    return A + (m + 8) * 2.0 ** -24 * (Ssum + A)


def test_matmul(qexe, gexe, tmp, rng):
    cases = [("q8_0", 37, 96, 5), ("q8_0", 9, 288, 70), ("q4_0", 19, 160, 3), ("q4_0", 33, 1024, 17),
             ("q4_K", 23, 768, 4), ("q6_K", 11, 512, 9), ("bf16", 13, 77, 6), ("f16", 29, 130, 2),
             ("f32", 7, 33, 1)]
    for typ, rows, cols, n in cases:
        w = rng.standard_normal((rows, cols)).astype(F32)
        raw = tq.ffn_quantize(qexe, tmp, typ, w.reshape(-1))
        if typ in tq.DQ:
            wf = tq.DQ[typ](raw).reshape(rows, cols)
        elif typ == "f16":
            wf = np.frombuffer(raw, np.float16).astype(F32).reshape(rows, cols)
        elif typ == "bf16":
            wf = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(F32).reshape(rows, cols)
        else:
            wf = np.frombuffer(raw, F32).reshape(rows, cols)
        x = (rng.standard_normal((n, cols)) * np.exp(rng.uniform(-3, 3, (n, 1)))).astype(F32)
        ref = (torch.from_numpy(x.astype(np.float64)) @ torch.from_numpy(wf.astype(np.float64)).T).numpy()
        tol = tolerance(typ, wf.astype(np.float64), x.astype(np.float64))
        pw, px, py = (os.path.join(tmp, s) for s in ("w.bin", "x.f32", "y.f32"))
        open(pw, "wb").write(raw)
        x.astype("<f4").tofile(px)
        for threads in (1, 2):
            r = subprocess.run([gexe, typ, str(rows), str(cols), str(n), str(threads), pw, px, py],
                               capture_output=True, text=True)
            if r.returncode:
                check(False, "qgemm_driver %s: %s" % (typ, r.stderr.strip()))
                continue
            y = np.fromfile(py, "<f4").reshape(n, rows).astype(np.float64)
            q = np.abs(y - ref) / tol
            check(bool(np.all(q <= 1.0)), "ffn_ggml_matmul %s W (%d, %d), n = %d, %d thread(s) vs torch float64: "
                  "worst error %.3f of the tolerance" % (typ, rows, cols, n, threads, float(q.max())))


def main():
    rng = np.random.default_rng(20261201)
    with tempfile.TemporaryDirectory() as tmp:
        qexe, gexe = build(tmp)
        test_half(qexe, tmp, rng)
        test_roundtrip(qexe, tmp, rng)
        test_matmul(qexe, gexe, tmp, rng)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
