#!/usr/bin/env python3
"""kquants.py LIBFFN LIBGGML_BASE -- ffn's reference decoders and encoders
of q2_K, q3_K, q5_K and iq4_xs against ggml's own (dequantize_row_<t>,
quantize_row_<t>_ref and ggml_quantize_chunk, the function llama.cpp's
quantizer calls), through ctypes: encoded bytes equal, decoded floats equal
bit for bit, on random rows and edge cases (zeros, constants, one spike,
huge and tiny magnitudes, sub-blocks of mixed scale, several super-blocks)
and on random blocks (random bytes with finite fp16 scales).  Prints one
line per type; exits 1 on the first mismatch, naming the case and byte."""
import ctypes
import struct
import sys

import numpy as np

TYPES = {  # name: (ggml type id, bytes per 256, offsets of the fp16 scales)
    "q2_K": (10, 84, (80, 82)),
    "q3_K": (11, 110, (108,)),
    "q5_K": (13, 176, (0, 2)),
    "iq4_xs": (23, 136, (0,)),
}
FFN_ID = {"q2_K": 10, "q3_K": 11, "q5_K": 13, "iq4_xs": 23}  # ffn_ggml_type = ggml's numbers


def cases(rng):
    n = 256
    out = [
        ("zeros", np.zeros(n)),
        ("constant", np.full(n, 0.375)),
        ("negative constant", np.full(n, -2.5)),
        ("spike", np.eye(1, n, 77).ravel() * 3.0),
        ("negative spike", np.eye(1, n, 200).ravel() * -7.0),
        ("normal", rng.standard_normal(n)),
        ("uniform", rng.uniform(-1, 1, n)),
        ("positive", rng.uniform(0.5, 2, n)),
        ("negative", rng.uniform(-2, -0.5, n)),
        ("huge", rng.standard_normal(n) * 3e4),
        ("tiny", rng.standard_normal(n) * 1e-6),
        ("subnormal scales", rng.standard_normal(n) * 1e-9),
        ("mixed sub-blocks", rng.standard_normal(n) * np.repeat(10.0 ** rng.uniform(-4, 2, 16), 16)),
        ("half zero", np.where(np.arange(n) < 128, rng.standard_normal(n), 0.0)),
        ("few values", rng.integers(-3, 4, n) * 0.25),
        ("heavy tail", rng.standard_t(2, n)),
        ("several blocks", rng.standard_normal(7 * n) * np.repeat(10.0 ** rng.uniform(-2, 1, 7), n)),
    ]
    for i in range(40):
        out.append((f"random {i}", rng.standard_normal(n * (1 + i % 3)) * 10.0 ** rng.uniform(-3, 3)))
    return [(name, np.ascontiguousarray(x, dtype=np.float32)) for name, x in out]


def main():
    ffn = ctypes.CDLL(sys.argv[1])
    gg = ctypes.CDLL(sys.argv[2])
    ffn.ffn_ggml_quantize_row.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    ffn.ffn_ggml_dequantize_row.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    gg.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    gg.ggml_quantize_chunk.restype = ctypes.c_size_t
    gg.ggml_quantize_init.argtypes = [ctypes.c_int]
    rng = np.random.default_rng(21)
    bad = 0
    for name, (gid, bb, scales) in TYPES.items():
        qref = getattr(gg, f"quantize_row_{name}_ref")
        qref.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        deq = getattr(gg, f"dequantize_row_{name}")
        deq.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        gg.ggml_quantize_init(gid)
        n_enc = n_dec = 0

        def check_decode(label, blob, n):
            nonlocal n_dec
            y1 = np.zeros(n, np.float32)
            y2 = np.zeros(n, np.float32)
            deq(blob, y1.ctypes.data, n)
            if ffn.ffn_ggml_dequantize_row(FFN_ID[name], blob, y2.ctypes.data, n) != 0:
                print(f"FAIL {name} {label}: ffn_ggml_dequantize_row failed")
                return False
            b1, b2 = y1.view(np.uint32), y2.view(np.uint32)
            if not np.array_equal(b1, b2):
                i = int(np.nonzero(b1 != b2)[0][0])
                print(f"FAIL {name} {label}: decoded element {i} is {y2[i]!r}, ggml's {y1[i]!r}")
                return False
            n_dec += n
            return True

        for label, x in cases(rng):
            n = x.size
            nb = n // 256
            g = ctypes.create_string_buffer(nb * bb)
            c = ctypes.create_string_buffer(nb * bb)
            f = ctypes.create_string_buffer(nb * bb)
            qref(x.ctypes.data, g, n)
            gg.ggml_quantize_chunk(gid, x.ctypes.data, c, 0, 1, n, None)
            if ffn.ffn_ggml_quantize_row(FFN_ID[name], x.ctypes.data, f, n) != 0:
                print(f"FAIL {name} {label}: ffn_ggml_quantize_row failed")
                bad = 1
                break
            if g.raw != c.raw:
                print(f"note {name} {label}: ggml's quantize_row_{name}_ref and ggml_quantize_chunk differ")
            if f.raw != g.raw:
                i = next(k for k in range(len(g.raw)) if g.raw[k] != f.raw[k])
                print(f"FAIL {name} {label}: byte {i} (block {i // bb}, offset {i % bb}) is "
                      f"{f.raw[i]:#04x}, ggml's {g.raw[i]:#04x}")
                bad = 1
                break
            n_enc += n
            if not check_decode(label, g, n):
                bad = 1
                break
        if bad:
            break
        # random blocks: every bit pattern of codes and scales, finite fp16 scales
        for i in range(200):
            nb = 1 + i % 4
            raw = bytearray(rng.integers(0, 256, nb * bb, dtype=np.uint8).tobytes())
            for b in range(nb):
                for off in scales:
                    h = np.float16(rng.standard_normal() * 10.0 ** rng.uniform(-6, 2)).view(np.uint16)
                    struct.pack_into("<H", raw, b * bb + off, int(h))
            if not check_decode(f"random block {i}", bytes(raw), nb * 256):
                bad = 1
                break
        if bad:
            break
        print(f"ok   {name}: encoded {n_enc} values to ggml's bytes, decoded {n_dec} to ggml's floats")
    return bad


if __name__ == "__main__":
    sys.exit(main())
