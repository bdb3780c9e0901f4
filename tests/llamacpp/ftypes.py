"""ftypes.py -- the files people download, made here: llama.cpp's own
quantizer (llama_model_quantize, through ctypes on the libllama that
node-llama-cpp ships; a test-only peer) writes each of its file types that
need no importance matrix from an f32 GGUF that ffn wrote, and ffn runs them.

Models: a random-weight llama (tests/llamacpp/interop.py's, V 259, D 256,
F 320: rows of 320 take llama.cpp's fallback types) and stories260K
(D 64: every K type falls back to a 32-element one).  For each ftype:

  ffn on llama.cpp's file      P_ffn   (ffn run --dump-logits)
  llama.cpp on its file        P_cpp   (probs_many.mjs)
  exact                        P_ex    (a float64 forward here over the file's
                                        weights dequantized by ggml's own
                                        dequantize_row_<t>)
over the same 60 ids.  Checks, per file:
  - top-1 of P_ffn equals top-1 of P_cpp at every position where the exact
    forward's top-2 logit gap exceeds GAP (near-ties flip under the 8-bit
    activations both engines use);
  - L1 = mean over positions of sum |p - q|: L1(ffn, cpp) <= 2 L1(cpp, ex) +
    SLACK (llama.cpp's own distance from the exact forward sets the scale);
  - `ffn quantize --dtype FTYPE` of the same f32 file gives every tensor the
    type llama.cpp gave it (ffn's mixes are llama.cpp's rules), and the
    bytes of every q4_0, q4_1, q5_0, q5_1, q8_0 tensor equal llama.cpp's;
  - an ftype in PENDING whose file holds a type ffn cannot read yet (q2_K,
    q3_K, q5_K, iq4_xs arrive with another branch) must be refused by both
    `ffn run` and `ffn quantize`, naming a tensor and the type; one not in
    PENDING must run.
Also: a file holding an importance-matrix type (iq2_xxs) is refused naming
the tensor, the type, and the types ffn reads.  Prints the table for the
note: ftype, model, runs, L1(ffn,cpp), L1(cpp,ex), L1(ffn,ex), file size.

Also, before the mixes: `ffn quantize --dtype t` for each single type t
(SINGLE) against llama_model_quantize with pure set and an ftype of base
type t: every tensor the same type (llama.cpp's fallback for rows of no
whole block: q4_K on rows of 320 or 64 is q5_0, ...), the bytes of the
reference-rounded formats equal.

  python3 ftypes.py WORKDIR NODE_DIR [--single]  (FFN_BIN: the ffn binary; FFN_SHARED;
                                                  --single: only the single types)
"""
import ctypes as C
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "parity"))
import ffn_testlib as tl  # noqa: E402
import interop  # noqa: E402

FTYPES = [("Q4_0", 2), ("Q4_1", 3), ("Q5_0", 8), ("Q5_1", 9), ("Q8_0", 7), ("Q2_K", 10),
          ("Q3_K_S", 11), ("Q3_K_M", 12), ("Q3_K_L", 13), ("Q4_K_S", 14), ("Q4_K_M", 15),
          ("Q5_K_S", 16), ("Q5_K_M", 17), ("Q6_K", 18), ("IQ4_NL", 25), ("IQ4_XS", 30)]
# ftypes whose files may hold q2_K, q3_K, q5_K or iq4_xs (another branch's
# block formats): until those merge, ffn must refuse such a file clearly.
PENDING = set()  # every non-imatrix ftype runs (q2_K, q3_K, q5_K, iq4_xs arrived with the K formats)
NOT_READ = set()  # the block types of PENDING's files that ffn cannot read yet
# llama.cpp quantizes these without an importance matrix by ggml's reference
# rounding, which ffn's encoders follow: ffn quantize writes the same bytes
# (iq4_nl: llama.cpp searches 15 scales, ffn writes the reference's one;
# the K types: each its own search)
BYTE_EQUAL = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0"}
GAP = 0.5
SLACK = 0.01
IDS = interop.IDS

GGML = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_K",
        11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K", 16: "iq2_xxs", 20: "iq4_nl", 23: "iq4_xs",
        30: "bf16"}
VT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf(path):
    """(kv: {key: scalar or str or list-length}, tensors: {name: (type, ne, abs_offset)}, bytes)"""
    b = open(path, "rb").read()
    assert b[:4] == b"GGUF", path
    _, n_t, n_kv = struct.unpack_from("<IQQ", b, 4)
    o = 24

    def string(o):
        (n,) = struct.unpack_from("<Q", b, o)
        return b[o + 8:o + 8 + n].decode("utf-8", "replace"), o + 8 + n

    def value(t, o):
        if t == 8:
            return string(o)
        if t == 9:
            (et, n) = struct.unpack_from("<IQ", b, o)
            o += 12
            for _ in range(n):
                _, o = value(et, o)
            return n, o
        (v,) = struct.unpack_from(VT[t], b, o)
        return v, o + struct.calcsize(VT[t])

    kv = {}
    for _ in range(n_kv):
        k, o = string(o)
        (t,) = struct.unpack_from("<I", b, o)
        kv[k], o = value(t, o + 4)
    kv["_tensor_info_at"] = o
    tensors = {}
    for _ in range(n_t):
        name, o = string(o)
        (nd,) = struct.unpack_from("<I", b, o)
        ne = struct.unpack_from("<%dQ" % nd, b, o + 4)
        o += 4 + 8 * nd
        ty, off = struct.unpack_from("<IQ", b, o)
        o += 12
        tensors[name] = (ty, ne, off)
    align = kv.get("general.alignment", 32)
    start = (o + align - 1) // align * align
    return kv, {n: (t, ne, start + off) for n, (t, ne, off) in tensors.items()}, b


class Ggml:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        self.lib.ggml_type_size.restype = C.c_size_t
        self.lib.ggml_blck_size.restype = C.c_int64

    def tensor(self, b, ty, ne, off):
        """float64 array of shape ne reversed (rows, cols) from the file's bytes"""
        n = int(np.prod(ne))
        nbytes = n // self.lib.ggml_blck_size(ty) * self.lib.ggml_type_size(ty)
        raw = np.frombuffer(b, np.uint8, nbytes, off)
        if ty == 0:
            out = raw.view(np.float32).copy()
        elif ty == 1:
            out = raw.view(np.float16).astype(np.float32)
        else:
            fn = getattr(self.lib, "dequantize_row_" + GGML[ty])
            fn.argtypes = [C.c_void_p, C.c_void_p, C.c_int64]
            src = np.ascontiguousarray(raw)
            out = np.zeros(n, np.float32)
            fn(src.ctypes.data, out.ctypes.data, n)
        return out.astype(np.float64).reshape(tuple(reversed(ne)))


def retype(src, dst, name, new_type, gg):
    """src with tensor `name` declared new_type (its data cut to the new size,
    every offset recomputed): a well-formed file holding that type."""
    kv, ts, b = read_gguf(src)
    align = kv.get("general.alignment", 32)
    head = bytearray(b[:kv["_tensor_info_at"]])
    data = bytearray()
    for n, (ty, ne, off) in sorted(ts.items(), key=lambda x: x[1][2]):
        t = new_type if n == name else ty
        size = int(np.prod(ne)) // gg.lib.ggml_blck_size(t) * gg.lib.ggml_type_size(t)
        nb = n.encode()
        head += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        head += struct.pack("<IQ", t, len(data))
        data += b[off:off + size] + bytes(-size % align)
    head += bytes(-len(head) % align)
    open(dst, "wb").write(bytes(head) + bytes(data))


def exact_logits(path, gg):
    """llama.cpp's llama graph in float64 over the file's dequantized weights."""
    kv, ts, b = read_gguf(path)
    W = lambda n: gg.tensor(b, *ts[n])  # noqa: E731
    D = kv["llama.embedding_length"]
    L = kv["llama.block_count"]
    H = kv["llama.attention.head_count"]
    G = kv["llama.attention.head_count_kv"]
    eps = kv["llama.attention.layer_norm_rms_epsilon"]
    base = kv.get("llama.rope.freq_base", 10000.0)
    Dh = D // H
    T = len(IDS)
    emb = W("token_embd.weight")
    out_w = W("output.weight") if "output.weight" in ts else emb
    x = emb[IDS]

    def rms(v, w):
        return v / np.sqrt((v * v).mean(axis=1, keepdims=True) + eps) * w

    pos = np.arange(T)[:, None]
    inv = base ** (-np.arange(0, Dh, 2) / Dh)
    ang = pos * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(m, nh):  # llama.cpp's NORM mode: pairs (2i, 2i+1)
        m = m.reshape(T, nh, Dh // 2, 2)
        a, c = m[..., 0], m[..., 1]
        cc, ss = cos[:, None, :], sin[:, None, :]
        return np.stack([a * cc - c * ss, a * ss + c * cc], axis=-1).reshape(T, nh, Dh)

    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(L):
        p = "blk.%d." % l
        h = rms(x, W(p + "attn_norm.weight"))
        q = rope(h @ W(p + "attn_q.weight").T, H)
        k = rope(h @ W(p + "attn_k.weight").T, G)
        v = (h @ W(p + "attn_v.weight").T).reshape(T, G, Dh)
        att = np.zeros((T, H, Dh))
        for hh in range(H):
            g = hh // (H // G)
            s = q[:, hh] @ k[:, g].T / np.sqrt(Dh) + mask
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, hh] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g]
        x = x + att.reshape(T, D) @ W(p + "attn_output.weight").T
        h = rms(x, W(p + "ffn_norm.weight"))
        gt = h @ W(p + "ffn_gate.weight").T
        up = h @ W(p + "ffn_up.weight").T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ W(p + "ffn_down.weight").T
    return rms(x, W("output_norm.weight")) @ out_w.T


def llama_quantize(lib, src, dst, ftype, pure=False):
    class P(C.Structure):  # llama_model_quantize_params (llama.h), padded
        _fields_ = [("nthread", C.c_int32), ("ftype", C.c_int), ("output_tensor_type", C.c_int),
                    ("token_embedding_type", C.c_int), ("allow_requantize", C.c_bool),
                    ("quantize_output_tensor", C.c_bool), ("only_copy", C.c_bool), ("pure", C.c_bool),
                    ("keep_split", C.c_bool), ("dry_run", C.c_bool), ("imatrix", C.c_void_p),
                    ("kv_overrides", C.c_void_p), ("tt_overrides", C.c_void_p),
                    ("prune_layers", C.c_void_p), ("max_buf_size", C.c_size_t),
                    ("_pad", C.c_uint8 * 256)]
    lib.llama_model_quantize_default_params.restype = P
    lib.llama_model_quantize.argtypes = [C.c_char_p, C.c_char_p, C.POINTER(P)]
    lib.llama_model_quantize.restype = C.c_uint32
    p = lib.llama_model_quantize_default_params()
    p.nthread = 1
    p.ftype = ftype
    p.pure = pure
    rc = lib.llama_model_quantize(src.encode(), dst.encode(), C.byref(p))
    if rc != 0:
        raise RuntimeError("llama_model_quantize %s -> %s ftype %d: %d" % (src, dst, ftype, rc))


# `ffn quantize --dtype t` (one type) against llama.cpp's pure quantization
# with an ftype whose base type is t (no per-tensor rules; its fallback for
# rows of no whole block): the ftype of each single type
SINGLE = [("q4_0", 2), ("q4_1", 3), ("q5_0", 8), ("q5_1", 9), ("q8_0", 7), ("q2_K", 10),
          ("q3_K", 12), ("q4_K", 15), ("q5_K", 17), ("q6_K", 18), ("iq4_nl", 25), ("iq4_xs", 30)]


def check_single_types(lib, gg, tag, f32, work, bad):
    """Every tensor of `ffn quantize --dtype t` has the type of llama.cpp's
    pure file, and the bytes of the reference-rounded formats are its bytes."""
    for t, num in SINGLE:
        ref = os.path.join(work, "%s-pure-%s.gguf" % (tag, t))
        mine = os.path.join(work, "%s-pure-%s.ffn.gguf" % (tag, t))
        llama_quantize(lib, f32, ref, num, pure=True)
        rc, err = run(["quantize", f32, "--dtype", t, "--out", mine, "--force"])
        if rc != 0:
            bad("%s --dtype %s: ffn quantize failed: %s" % (tag, t, err.strip()[-300:]))
            continue
        _, ts, b1 = read_gguf(ref)
        _, ts2, b2 = read_gguf(mine)
        diff = [(n, GGML.get(ts[n][0]), GGML.get(ts2[n][0])) for n in ts if n in ts2 and ts[n][0] != ts2[n][0]]
        if diff or set(ts) != set(ts2):
            bad("%s --dtype %s: ffn's types differ from llama.cpp's pure %d: %s" % (tag, t, num, diff[:4]))
            continue
        nbytes = 0
        for n, (ty, ne, off) in ts.items():
            if GGML.get(ty) in BYTE_EQUAL:
                size = int(np.prod(ne)) // gg.lib.ggml_blck_size(ty) * gg.lib.ggml_type_size(ty)
                if b1[off:off + size] != b2[ts2[n][2]:ts2[n][2] + size]:
                    bad("%s --dtype %s: tensor %s (%s): ffn's bytes differ from llama.cpp's" % (tag, t, n, GGML[ty]))
                nbytes += size
        from collections import Counter
        count = Counter(GGML.get(v[0], str(v[0])) for v in ts.values())
        print("ok   %-11s --dtype %-6s = llama.cpp pure (ftype %2d): every tensor's type (%s), %d bytes "
              "of reference-rounded blocks equal" % (tag, t, num, ", ".join("%d %s" % (c, k) for k, c in sorted(count.items())), nbytes))


def run(args):
    p = subprocess.run([os.environ.get("FFN_BIN", "build/ffn")] + args, capture_output=True, text=True)
    return p.returncode, p.stderr


def ffn_logits(model, work, tag):
    out = os.path.join(work, tag + ".logits.safetensors")
    rc, err = run(["run", model, "--ids", " ".join(map(str, IDS)), "--steps", "0", "--dump-logits", out])
    if rc != 0:
        return None, err
    return tl.read_safetensors(out)["logits"].astype(np.float64), ""


def l1(p, q):
    return float(np.abs(p - q).sum(axis=1).mean())


def main():
    work, node_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    bins = os.path.join(node_dir, "node_modules", "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
    gg = Ggml(os.path.join(bins, "libggml-base.so"))
    lib = C.CDLL(os.path.join(bins, "libllama.v0.4.0.so"))
    lib.llama_backend_init()
    global _quiet  # llama.cpp's per-tensor log lines, dropped (kept alive for the library)
    _quiet = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)(lambda level, text, user: None)
    lib.llama_log_set.argtypes = [C.c_void_p, C.c_void_p]
    lib.llama_log_set(C.cast(_quiet, C.c_void_p), None)
    shared = os.environ.get("FFN_SHARED", os.path.join(HERE, "..", "..", "..", "shared"))
    fails = []

    def bad(msg):
        fails.append(msg)
        print("FAIL " + msg)

    # the sources: f32 GGUF files written by ffn
    srcs = []
    d = os.path.join(work, "rand-llama")
    interop.make_model(d, "llama", 321)
    srcs.append(("rand-llama", d))
    srcs.append(("stories260K", os.path.join(shared, "models", "stories260K.bin")))
    files = []  # (model, ftype name, path)
    single_only = "--single" in sys.argv[3:]
    for tag, src in srcs:
        f32 = os.path.join(work, tag + "-f32.gguf")
        tl.run_ffn(["export", src, "--format", "gguf", "--dtype", "F32", "--out", f32])
        check_single_types(lib, gg, tag, f32, work, bad)
        if single_only:
            continue
        files.append((tag, "F32", f32, f32))
        for name, num in FTYPES:
            out = os.path.join(work, "%s-%s.gguf" % (tag, name))
            llama_quantize(lib, f32, out, num)
            files.append((tag, name, out, f32))
    if single_only:
        print("ftypes --single: %d failures" % len(fails))
        sys.exit(1 if fails else 0)
    # llama.cpp's distributions, one process for every file not in the cache
    # (interop.py's: the ASan round's files are the same bytes)
    cpp = {}
    todo = []
    for f in files:
        r = interop.cached_probs(f[2], node_dir, "probs_many.mjs")
        if r is None:
            todo.append(f[2])
        else:
            cpp[f[2]] = {"model": f[2], "probs": r}
    if todo:
        env = dict(os.environ, NODE_LLAMA_CPP_SKIP_DOWNLOAD="true", NODE_PATH=os.path.join(node_dir, "node_modules"))
        p = subprocess.run(["node", os.path.join(node_dir, "probs_many.mjs"), " ".join(map(str, IDS))] + todo,
                           capture_output=True, text=True, env=env, cwd=node_dir)
        if p.returncode != 0:
            raise RuntimeError("probs_many.mjs: exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
        for line in p.stdout.splitlines():
            r = json.loads(line)
            cpp[r["model"]] = r
            if "probs" in r:
                interop.cache_probs(r["model"], node_dir, line, "probs_many.mjs")
    print("note: llama.cpp's results for %d of the %d GGUF files reused (by content)" % (len(files) - len(todo), len(files)))
    print("%-11s %-7s %-5s %-10s %-10s %-10s %-9s %s" % ("model", "ftype", "runs", "L1 ffn-cpp",
                                                        "L1 cpp-ex", "L1 ffn-ex", "bytes", "types (llama.cpp's file)"))
    n_run = n_refused = 0
    for tag, name, path, f32 in files:
        kv, ts, _ = read_gguf(path)
        types = sorted({GGML.get(t[0], str(t[0])) for t in ts.values()})
        unreadable = [(n, GGML.get(t[0], str(t[0]))) for n, t in ts.items()
                      if GGML.get(t[0]) in NOT_READ]
        # ffn's own mix of the same source: the same type for every tensor
        if name != "F32":
            mine = os.path.join(work, "%s-%s.ffn.gguf" % (tag, name))
            rc, err = run(["quantize", f32, "--dtype", name, "--out", mine, "--force"])
            if rc == 0:
                _, ts2, b2 = read_gguf(mine)
                diff = [(n, GGML.get(ts[n][0]), GGML.get(ts2[n][0])) for n in ts if n in ts2 and ts[n][0] != ts2[n][0]]
                if diff or set(ts) != set(ts2):
                    bad("%s %s: ffn quantize's types differ from llama.cpp's: %s" % (tag, name, diff[:4]))
                # the formats with a reference quantizer that llama.cpp's uses: the same bytes
                b1 = open(path, "rb").read()
                for n, (ty, ne, off) in ts.items():
                    if GGML.get(ty) in BYTE_EQUAL and ts2.get(n, (None,))[0] == ty:
                        size = int(np.prod(ne)) // gg.lib.ggml_blck_size(ty) * gg.lib.ggml_type_size(ty)
                        if b1[off:off + size] != b2[ts2[n][2]:ts2[n][2] + size]:
                            bad("%s %s: tensor %s (%s): ffn's bytes differ from llama.cpp's" % (tag, name, n, GGML[ty]))
            elif not (name in PENDING and unreadable and re.search(r"tensor \S+: %s gives it type (q2_K|q3_K|q5_K|iq4_xs)" % name, err)):
                bad("%s %s: ffn quantize --dtype %s failed: %s" % (tag, name, name, err.strip()[-300:]))
        z, err = ffn_logits(path, work, "%s-%s" % (tag, name))
        size = os.path.getsize(path)
        if z is None:
            m = re.search(r"tensor (\S+) has type (\S+), which ffn cannot read \(it reads ([^)]*)\)", err)
            if name in PENDING and unreadable and m and m.group(2) in NOT_READ:
                n_refused += 1
                print("%-11s %-7s %-5s %-10s %-10s %-10s %-9d %s  (refused: %s %s)" %
                      (tag, name, "no", "-", "-", "-", size, ",".join(types), m.group(1), m.group(2)))
            else:
                bad("%s %s: ffn run failed: %s" % (tag, name, err.strip()[-300:]))
            continue
        if unreadable:
            bad("%s %s: ffn ran a file holding %s" % (tag, name, unreadable[0]))
        r = cpp.get(path, {})
        if "probs" not in r:
            bad("%s %s: llama.cpp: %s" % (tag, name, r.get("error", "no result")))
            continue
        pc = np.array(r["probs"], np.float64)
        pf = interop.softmax(z)
        ze = exact_logits(path, gg)
        pe = interop.softmax(ze)
        a, bnd, c = l1(pf, pc), l1(pc, pe), l1(pf, pe)
        srt = np.sort(ze, axis=1)
        decided = (srt[:, -1] - srt[:, -2]) > GAP
        top_ok = (pf.argmax(1) == pc.argmax(1)) | ~decided
        n_run += 1
        print("%-11s %-7s %-5s %-10.2e %-10.2e %-10.2e %-9d %s  top-1 %d/%d" %
              (tag, name, "yes", a, bnd, c, size, ",".join(types), int((top_ok & decided).sum()), int(decided.sum())))
        if not top_ok.all():
            bad("%s %s: top-1 of ffn and llama.cpp differ at positions %s" % (tag, name, list(np.nonzero(~top_ok)[0])))
        if name == "F32" and decided.sum() < 10:  # the ids decide something
            bad("%s %s: only %d positions with a top-2 gap > %g" % (tag, name, decided.sum(), GAP))
        if a > 2 * bnd + SLACK:
            bad("%s %s: L1(ffn, llama.cpp) %.3g > 2 L1(llama.cpp, exact) %.3g + %g" % (tag, name, a, bnd, SLACK))
    # an importance-matrix type is refused by name
    src = os.path.join(work, "rand-llama-Q8_0.gguf")  # rows of 256: an iq2_xxs row is whole
    edited = os.path.join(work, "iq2.gguf")
    retype(src, edited, "blk.0.attn_q.weight", 16, gg)
    rc, err = run(["run", edited, "--ids", "1", "--steps", "1"])
    m = re.search(r"tensor blk\.0\.attn_q\.weight has type iq2_xxs, which ffn cannot read \(it reads ([^)]*)\)", err)
    if rc == 0 or not m or "q5_0" not in m.group(1) or "iq4_nl" not in m.group(1):
        bad("iq2_xxs tensor: exit %d, %s" % (rc, err.strip()[-300:]))
    else:
        print("ok   an iq2_xxs tensor is refused: %s" % err.strip().splitlines()[-1][:160])
    print("ftypes: %d files ran, %d refused (PENDING), %d failures" % (n_run, n_refused, len(fails)))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
