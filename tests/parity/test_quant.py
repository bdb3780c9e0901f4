"""test_quant -- ffn's ggml block formats and GGUF reader against numpy
implementations written here from the published formats.

  1. q8_0 and q4_0 quantization: ggml's reference rounding (quantize_row_
     q8_0_ref / _q4_0_ref: d = amax/127, q = roundf(x * (1/d)); d = max/-8,
     q = min(15, trunc(x * (1/d) + 8.5)), all in float32, d stored as fp16
     rounded to nearest even) in numpy; ffn's bytes must be equal, byte for
     byte, on random blocks of odd counts, all-zero blocks, blocks with one
     large value, ties at .5, signed zeros and tiny values.
  2. Dequantization of q8_0, q4_0, q4_K and q6_K blocks of random bytes
     (fp16 scales kept finite) against numpy decoders of ggml's formulas in
     float32, operation for operation: equal bit for bit.
  3. ffn's own q4_K / q6_K encoders decode (with numpy's decoder) to within
     the stated RMS of random normal data.
  4. A GGUF v3 file written here with struct (every metadata type, arrays of
     every fixed type, strings, an array of arrays, alignment 64, tensors of
     f32, f16, bf16, q8_0, q4_0, q4_K, q6_K and an iq2_xxs ffn cannot decode):
     ffn must read every value, every tensor's shape, type and offset, and
     the dequantized data exactly.
C side: tests/parity/quant_driver.c.  Exit code non-zero on any mismatch.
"""
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.environ.get("FFN_ROOT") or os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def build_driver(tmp):
    exe = os.path.join(tmp, "quant_driver")
    cmd = ["cc", "-std=c11", "-D_GNU_SOURCE", "-O2", "-fopenmp", "-I" + os.path.join(ROOT, "include"),
           os.path.join(ROOT, "tests/parity/quant_driver.c"), os.path.join(ROOT, "build/libffn.a"),
           "-ldnnl", "-fopenmp", "-lm", "-lpthread", "-lpcre2-8", "-o", exe]
    subprocess.run(cmd, check=True)
    return exe


def run(exe, *args):
    r = subprocess.run([exe] + [str(a) for a in args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("quant_driver %s failed: %s" % (" ".join(map(str, args)), r.stderr))
    return r.stdout


F32 = np.float32

# ---- ggml's reference quantizers, from the formulas ---------------------------


def roundf(v):
    """C roundf: half away from zero (float32 in, exact in float64)."""
    a = np.abs(v.astype(np.float64))
    return (np.sign(v) * np.floor(a + 0.5)).astype(np.float64)


def q8_0_ref(x):
    x = x.reshape(-1, 32).astype(F32)
    amax = np.max(np.abs(x), axis=1)
    d = (amax / F32(127)).astype(F32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)
    q = roundf((x * inv[:, None]).astype(F32)).astype(np.int8)
    out = np.zeros((x.shape[0], 34), np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out.tobytes()


def q4_0_ref(x):
    x = x.reshape(-1, 32).astype(F32)
    idx = np.argmax(np.abs(x), axis=1)  # the first of equal magnitudes, as ggml's strict '<'
    mx = x[np.arange(x.shape[0]), idx]
    d = (mx / F32(-8)).astype(F32)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, F32(1) / np.where(d != 0, d, F32(1)), F32(0)).astype(F32)
    t = ((x * inv[:, None]).astype(F32) + F32(8.5)).astype(F32)
    q = np.minimum(15, np.trunc(t).astype(np.int64)).astype(np.uint8)
    out = np.zeros((x.shape[0], 18), np.uint8)
    out[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out.tobytes()


# ---- ggml's decoders, from the formulas (float32, operation for operation) -----

def f16(b):
    return np.frombuffer(bytes(b), np.float16).astype(F32)


def dq_q8_0(raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 34)
    d = b[:, 0:2].copy().view(np.float16).astype(F32)
    q = b[:, 2:].view(np.int8).astype(F32)
    return (q * d).astype(F32).reshape(-1)


def dq_q4_0(raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 18)
    d = b[:, 0:2].copy().view(np.float16).astype(F32)
    qs = b[:, 2:]
    q = np.concatenate([(qs & 0xF).astype(np.int32) - 8, (qs >> 4).astype(np.int32) - 8], axis=1).astype(F32)
    return (q * d).astype(F32).reshape(-1)


def scale_min_k4(j, q):
    if j < 4:
        return q[j] & 63, q[j + 4] & 63
    return (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4)


def dq_q4_K(raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 144)
    out = []
    for blk in b:
        d, dmin = f16(blk[0:2])[0], f16(blk[2:4])[0]
        sc = blk[4:16]
        qs = blk[16:]
        y = np.zeros(256, F32)
        for c in range(4):
            q = qs[32 * c:32 * c + 32]
            for half, vals in ((0, q & 0xF), (1, q >> 4)):
                s, m = scale_min_k4(2 * c + half, sc)
                d1 = F32(d * F32(s))
                m1 = F32(dmin * F32(m))
                y[64 * c + 32 * half:64 * c + 32 * half + 32] = ((d1 * vals.astype(F32)).astype(F32) - m1).astype(F32)
        out.append(y)
    return np.concatenate(out)


def dq_q6_K(raw):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 210)
    out = []
    for blk in b:
        d = f16(blk[208:210])[0]
        sc = blk[192:208].view(np.int8)
        y = np.zeros(256, F32)
        for h in range(2):
            ql = blk[64 * h:64 * h + 64].astype(np.int32)
            qh = blk[128 + 32 * h:128 + 32 * h + 32].astype(np.int32)
            l = np.arange(32)
            qv = [((ql[l] & 0xF) | (((qh >> 0) & 3) << 4)) - 32, ((ql[l + 32] & 0xF) | (((qh >> 2) & 3) << 4)) - 32,
                  ((ql[l] >> 4) | (((qh >> 4) & 3) << 4)) - 32, ((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4)) - 32]
            for k in range(4):
                s = sc[8 * h + l // 16 + 2 * k].astype(F32)
                y[128 * h + 32 * k + l] = ((d * s).astype(F32) * qv[k].astype(F32)).astype(F32)
        out.append(y)
    return np.concatenate(out)


BLOCK = {"q8_0": (32, 34), "q4_0": (32, 18), "q4_K": (256, 144), "q6_K": (256, 210)}
DQ = {"q8_0": dq_q8_0, "q4_0": dq_q4_0, "q4_K": dq_q4_K, "q6_K": dq_q6_K}


def ffn_quantize(exe, tmp, typ, x):
    pin, pout = os.path.join(tmp, "x.f32"), os.path.join(tmp, "q.bin")
    x.astype("<f4").tofile(pin)
    run(exe, "quantize", typ, x.size, pin, pout)
    return open(pout, "rb").read()


def ffn_dequantize(exe, tmp, typ, raw, n):
    pin, pout = os.path.join(tmp, "q.bin"), os.path.join(tmp, "y.f32")
    open(pin, "wb").write(raw)
    run(exe, "dequantize", typ, n, pin, pout)
    return np.fromfile(pout, "<f4")


def random_blocks(rng, nblocks, with_ties):
    x = rng.standard_normal((nblocks, 32)).astype(F32) * rng.choice([1e-3, 1.0, 30.0, 1e4], size=(nblocks, 1)).astype(F32)
    x[0] = 0                            # an all-zero block
    x[1] = 0
    x[1, 7] = -123.25                   # one large value among zeros
    x[2] = rng.standard_normal(32).astype(F32)
    x[2, 30] = 5e3                      # one large value among small ones
    x[3] = -0.0                         # signed zeros
    x[3, 5] = 1e-30                     # a tiny amax (its fp16 scale is 0)
    x[4] = np.linspace(-1, 1, 32).astype(F32)
    x[4, 9] = -1.0                      # two equal magnitudes: the first wins in q4_0
    if with_ties:
        # q8_0: amax 127 makes d = 1 and x * (1/d) = x: ties at .5 round away from zero
        x[5] = np.array([127, -127] + [k + 0.5 for k in range(-15, 15)], F32)
        # q4_0: max = -8 makes d = 1: x + 8.5 lands on integers and on halves
        x[6] = np.array([-8] + [k / 2 for k in range(-15, 16)], F32)
    return x.reshape(-1)


def test_reference_quantizers(exe, tmp, rng):
    for typ, ref in (("q8_0", q8_0_ref), ("q4_0", q4_0_ref)):
        for nblocks in (7, 33, 257):
            x = random_blocks(rng, nblocks, with_ties=True)
            got, want = ffn_quantize(exe, tmp, typ, x), ref(x)
            nbad = sum(1 for i in range(0, len(want), BLOCK[typ][1]) if got[i:i + BLOCK[typ][1]] != want[i:i + BLOCK[typ][1]])
            check(got == want, "%s: ffn's bytes equal ggml's reference rounding, %d blocks (%d differ)" % (typ, nblocks, nbad))


def finite_f16_bytes(raw, offsets, size):
    b = bytearray(raw)
    for blk in range(0, len(b), size):
        for off in offsets:
            h = struct.unpack_from("<H", b, blk + off)[0]
            if (h & 0x7C00) == 0x7C00:
                h &= ~0x4000  # keep the scale finite: inf/NaN scales make NaN payloads compiler-dependent
            struct.pack_into("<H", b, blk + off, h)
    return bytes(b)


def test_decoders(exe, tmp, rng):
    f16_at = {"q8_0": (0,), "q4_0": (0,), "q4_K": (0, 2), "q6_K": (208,)}
    for typ in ("q8_0", "q4_0", "q4_K", "q6_K"):
        blk, size = BLOCK[typ]
        for nblocks in (1, 5, 19):
            raw = finite_f16_bytes(rng.integers(0, 256, nblocks * size, dtype=np.uint8).tobytes(), f16_at[typ], size)
            got = ffn_dequantize(exe, tmp, typ, raw, nblocks * blk)
            want = DQ[typ](raw)
            same = np.array_equal(got.view(np.uint32), want.view(np.uint32))
            diff = float(np.max(np.abs(got.astype(np.float64) - want))) if not same else 0.0
            check(same, "%s: decode of %d random blocks equals ggml's formula bit for bit (max diff %.3g)" % (typ, nblocks, diff))


def test_own_encoders(exe, tmp, rng):
    for typ, tol in (("q4_K", 0.10), ("q6_K", 0.025)):
        x = rng.standard_normal(256 * 7).astype(F32)
        raw = ffn_quantize(exe, tmp, typ, x)
        y = DQ[typ](raw)
        rms = float(np.sqrt(np.mean((y.astype(np.float64) - x) ** 2)))
        check(rms < tol, "%s: ffn's encoder, decoded by numpy: rms error %.4f of unit normal data (tol %.3f)" % (typ, rms, tol))


# ---- GGUF written from the spec ------------------------------------------------

VT = {"uint8": 0, "int8": 1, "uint16": 2, "int16": 3, "uint32": 4, "int32": 5, "float32": 6, "bool": 7,
      "string": 8, "array": 9, "uint64": 10, "int64": 11, "float64": 12}
FMT = {"uint8": "<B", "int8": "<b", "uint16": "<H", "int16": "<h", "uint32": "<I", "int32": "<i", "float32": "<f",
       "bool": "<B", "uint64": "<Q", "int64": "<q", "float64": "<d"}
GT = {"f32": 0, "f16": 1, "q4_0": 2, "q8_0": 8, "q4_K": 12, "q5_K": 13, "iq2_xxs": 16, "q6_K": 14, "bf16": 30}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def enc_value(typ, v):
    """(bytes, dump text) of a value."""
    if typ == "string":
        b = v.encode() if isinstance(v, str) else v
        return gstr(b), "string:" + b.hex()
    if typ == "array":
        et, items = v
        parts = [enc_value(et, e) for e in items]
        return (struct.pack("<IQ", VT[et], len(items)) + b"".join(p[0] for p in parts),
                "array:[%s;%d;%s]" % (et, len(items), ",".join(p[1] for p in parts)))
    b = struct.pack(FMT[typ], v)
    if typ == "float32":
        return b, "float32:%08x" % struct.unpack("<I", b)[0]
    if typ == "float64":
        return b, "float64:%016x" % struct.unpack("<Q", b)[0]
    return b, "%s:%d" % (typ, v)


def test_gguf(exe, tmp, rng):
    align = 64
    kvs = [("general.architecture", "string", "llama"), ("general.alignment", "uint32", align),
           ("u8", "uint8", 255), ("i8", "int8", -128), ("u16", "uint16", 65535), ("i16", "int16", -32768),
           ("u32", "uint32", 2**32 - 1), ("i32", "int32", -2**31), ("f32", "float32", -3.25e-7),
           ("yes", "bool", 1), ("no", "bool", 0), ("u64", "uint64", 2**64 - 1), ("i64", "int64", -2**63),
           ("f64", "float64", 1.0 / 3.0), ("unicode", "string", "žluťoučký kůň \U0001F600"), ("empty", "string", ""),
           ("with.nul", "string", b"a\x00b"),
           ("tokenizer.ggml.tokens", "array", ("string", ["<s>", "</s>", " the", "", "ü"])),
           ("tokenizer.ggml.scores", "array", ("float32", [0.0, -1.5, 2.25])),
           ("types", "array", ("int32", [1, -1, 2**31 - 1])), ("flags", "array", ("bool", [1, 0, 1])),
           ("u64s", "array", ("uint64", [0, 2**63])), ("f64s", "array", ("float64", [1e-300, -2.5])),
           ("empty.arr", "array", ("uint8", [])),
           ("nested", "array", ("array", [("int16", [1, -2]), ("string", ["x", "yz"]), ("array", [("uint8", [7])])]))]
    # tensors: (name, type, ne fastest first, raw bytes, expected fp32 or None)
    tensors = []
    x = rng.standard_normal(5 * 3).astype(F32)
    tensors.append(("tok_embd.weight", "f32", [5, 3], x.astype("<f4").tobytes(), x))
    h = rng.standard_normal(7 * 2).astype(np.float16)
    tensors.append(("blk.0.attn_norm.weight", "f16", [7, 2], h.tobytes(), h.astype(F32)))
    bf = rng.integers(0, 65536, 9, dtype=np.uint16)
    bf[(bf & 0x7F80) == 0x7F80] &= 0xBFFF  # finite
    tensors.append(("bf", "bf16", [9], bf.tobytes(), (bf.astype(np.uint32) << 16).view(F32)))
    q8 = q8_0_ref(random_blocks(rng, 9, False))
    tensors.append(("blk.0.ffn_up.weight", "q8_0", [96, 3], q8, dq_q8_0(q8)))
    q4 = q4_0_ref(random_blocks(rng, 7, False))
    tensors.append(("blk.0.ffn_gate.weight", "q4_0", [32, 7], q4, dq_q4_0(q4)))
    qk = finite_f16_bytes(rng.integers(0, 256, 3 * 144, dtype=np.uint8).tobytes(), (0, 2), 144)
    tensors.append(("blk.0.ffn_down.weight", "q4_K", [256, 3, 1], qk, dq_q4_K(qk)))
    q6 = finite_f16_bytes(rng.integers(0, 256, 2 * 210, dtype=np.uint8).tobytes(), (208,), 210)
    tensors.append(("output.weight", "q6_K", [512], q6, dq_q6_K(q6)))
    tensors.append(("unsupported.iq2_xxs", "iq2_xxs", [256], bytes(range(66)), None))
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    expect = []
    for key, typ, v in kvs:
        b, text = enc_value(typ, v)
        out += gstr(key) + struct.pack("<I", VT[typ]) + b
        expect.append("kv\t%s\t%s" % (key.encode().hex(), text))
    offset, datas = 0, []
    for name, typ, ne, raw, _ in tensors:
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
        out += struct.pack("<IQ", GT[typ], offset)
        padded = raw + b"\0" * ((-len(raw)) % align)
        datas.append((offset, raw))
        offset += len(padded)
    data_start = len(out) + ((-len(out)) % align)
    out += b"\0" * (data_start - len(out))
    for off, raw in datas:
        out += raw + b"\0" * ((-len(raw)) % align)
    path = os.path.join(tmp, "spec.gguf")
    open(path, "wb").write(out)
    outdir = os.path.join(tmp, "dump")
    os.makedirs(outdir, exist_ok=True)
    lines = run(exe, "dump", path, outdir).splitlines()
    check(lines[0] == "version\t3\talignment\t%d\tdata_offset\t%d" % (align, data_start), "header: " + lines[0])
    got_kv = [l for l in lines if l.startswith("kv\t")]
    check(len(got_kv) == len(expect), "%d metadata entries read (expected %d)" % (len(got_kv), len(expect)))
    for (key, typ, _), want, got in zip(kvs, expect, got_kv):
        check(got == want, "metadata %s (%s) read exactly%s" % (key, typ, "" if got == want else ": got %s, want %s" % (got, want)))
    got_t = [l for l in lines if l.startswith("tensor\t")]
    check(len(got_t) == len(tensors), "%d tensors read" % len(got_t))
    for i, ((name, typ, ne, raw, want), got, (off, _)) in enumerate(zip(tensors, got_t, datas)):
        line = "tensor\t%s\t%s\t%d\t%s\t%d\t%d" % (name, typ, len(ne), ",".join(map(str, ne)), data_start + off, len(raw))
        check(got == line, "tensor %s: name, type, dims, offset, size%s" % (name, "" if got == line else ": " + got))
        f = os.path.join(outdir, "%d.f32" % i)
        if want is None:
            check(not os.path.exists(f), "tensor %s: a type ffn cannot decode is listed, not decoded" % name)
            continue
        y = np.fromfile(f, "<f4")
        check(np.array_equal(y.view(np.uint32), want.astype(F32).view(np.uint32)),
              "tensor %s (%s): dequantized exactly (%d values)" % (name, typ, want.size))


def main():
    rng = np.random.default_rng(20240601)
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_driver(tmp)
        test_reference_quantizers(exe, tmp, rng)
        test_decoders(exe, tmp, rng)
        test_own_encoders(exe, tmp, rng)
        test_gguf(exe, tmp, rng)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
