"""quant_ref.py -- ffn's reference decoders and encoders of the 32-element
block formats against ggml's own, through ctypes (a test-only peer: the
libggml-base.so that node-llama-cpp ships; ffn never links it).

For each of q4_0, q8_0, q4_1, q5_0, q5_1, iq4_nl:
  encode: ffn_ggml_quantize_row's bytes == quantize_row_<t>_ref's, on rows of
          1, 3, 5, 7 and 64 blocks: normal values at scales 1e-20 .. 1e20,
          zeros, constants (positive, negative), one spike in zeros, ties
          of magnitude (+a and -a), values at fp16's edge (6e4) and a block
          of uniform values; iq4_nl's all-(near)-zero blocks (|x| < 1e-15)
          compare d only (ggml leaves their indices as the previous block's:
          undefined), everything else byte for byte;
  decode: ffn_ggml_dequantize_row's floats == dequantize_row_<t>'s, bit for
          bit (NaN equal to NaN), on ggml's encodings of the rows above and
          on random bytes (every fp16 pattern of d and m, inf and NaN too).

  python3 quant_ref.py LIBFFN LIBGGML_BASE
"""
import ctypes as C
import sys

import numpy as np

TYPES = {  # name: (ggml type number, block bytes)
    "q4_0": (2, 18), "q4_1": (3, 20), "q5_0": (6, 22), "q5_1": (7, 24), "q8_0": (8, 34),
    "iq4_nl": (20, 18),
}


def rows(rng):
    out = []
    for nb in (1, 3, 5, 7, 64):
        n = 32 * nb
        for scale in (1e-20, 1e-5, 1.0, 3.0, 1e5, 1e20):
            out.append(rng.standard_normal(n) * scale)
        out.append(rng.uniform(-1, 1, n))
        out.append(np.zeros(n))
        out.append(np.full(n, 0.7))
        out.append(np.full(n, -2.5))
        z = np.zeros(n)
        z[rng.integers(n)] = -3.0
        out.append(z)
        t = rng.standard_normal(n) * 0.1
        t[::32] = 1.5
        t[1::32] = -1.5
        out.append(t)
        out.append(rng.uniform(-6e4, 6e4, n))
        m = rng.standard_normal(n)
        m[32:64] = 0.0 if nb > 1 else m[32:64]
        out.append(m)
        out.append(np.abs(rng.standard_normal(n)) + 10.0)
    return [r.astype(np.float32) for r in out]


def main():
    ffn = C.CDLL(sys.argv[1])
    gg = C.CDLL(sys.argv[2])
    ffn.ffn_ggml_quantize_row.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64]
    ffn.ffn_ggml_dequantize_row.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64]
    ffn.ffn_last_error.restype = C.c_char_p
    rng = np.random.default_rng(21)
    data = rows(rng)
    fails, checks = [], 0
    for name, (tnum, bsz) in TYPES.items():
        q_ref = getattr(gg, "quantize_row_%s_ref" % name)
        dq_ref = getattr(gg, "dequantize_row_%s" % name)
        q_ref.argtypes = dq_ref.argtypes = [C.c_void_p, C.c_void_p, C.c_int64]
        n_enc = n_dec = 0
        for i, x in enumerate(data):
            n = x.size
            nb = n // 32
            a = np.zeros(nb * bsz, np.uint8)
            b = np.zeros(nb * bsz, np.uint8)
            st = ffn.ffn_ggml_quantize_row(tnum, x.ctypes.data, a.ctypes.data, n)
            if st != 0:
                fails.append("%s row %d: ffn_ggml_quantize_row: %s" % (name, i, ffn.ffn_last_error().decode()))
                continue
            q_ref(x.ctypes.data, b.ctypes.data, n)
            A, B = a.reshape(nb, bsz), b.reshape(nb, bsz)
            if name == "iq4_nl":  # blocks ggml skips: only d is defined
                skip = np.abs(x.reshape(nb, 32)).max(axis=1) < 1e-15
                A, B = A.copy(), B.copy()
                A[skip, 2:] = 0
                B[skip, 2:] = 0
            bad = np.nonzero((A != B).any(axis=1))[0]
            if bad.size:
                k = int(bad[0])
                fails.append("%s row %d (%d blocks): block %d bytes differ: ffn %s ggml %s (x %s...)"
                             % (name, i, nb, k, A[k].tobytes().hex(), B[k].tobytes().hex(),
                                x[32 * k:32 * k + 4]))
            n_enc += 1
            # decode ggml's bytes, and random bytes
            for src in (b, rng.integers(0, 256, nb * bsz, dtype=np.uint8)):
                y1 = np.zeros(n, np.float32)
                y2 = np.zeros(n, np.float32)
                st = ffn.ffn_ggml_dequantize_row(tnum, src.ctypes.data, y1.ctypes.data, n)
                dq_ref(src.ctypes.data, y2.ctypes.data, n)
                same = (y1.view(np.uint32) == y2.view(np.uint32)) | (np.isnan(y1) & np.isnan(y2))
                if st != 0 or not same.all():
                    k = int(np.nonzero(~same)[0][0]) if st == 0 else -1
                    fails.append("%s row %d: decode differs at element %d: ffn %r ggml %r"
                                 % (name, i, k, y1[k], y2[k]))
                n_dec += 1
        checks += n_enc + n_dec
        print("ok   %-6s %d rows encoded, %d decoded against ggml" % (name, n_enc, n_dec)
              if not any(f.startswith(name + " ") for f in fails) else "FAIL %s" % name)
    for f in fails[:20]:
        print("FAIL " + f)
    print("quant_ref: %d checks, %d failed" % (checks, len(fails)))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
