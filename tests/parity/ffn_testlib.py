"""ffn_testlib -- helpers shared by the parity tests (tests/parity/test_*.py).

What lives here:
  * safetensors reading and writing with numpy + struct + json only (the
    `safetensors` pip package is not available here, and writing the format
    by hand keeps the tests independent of the code under test);
  * running build/ffn (or $FFN_BIN) and failing loudly with its stderr;
  * comparing a result with a reference, printing the max abs and relative
    error against a stated tolerance, and collecting failures so that a test
    ends with a non-zero exit code when anything is over.

The format: an 8-byte little-endian header length, a JSON header mapping
each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
relative to the start of the data), an optional "__metadata__" of strings,
then the raw little-endian data.
"""
import json
import os
import struct
import subprocess
import sys

import numpy as np

ROOT = os.environ.get("FFN_ROOT") or os.path.abspath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FFN_BIN = os.environ.get("FFN_BIN") or os.path.join(ROOT, "build", "ffn")

# safetensors dtype name -> numpy dtype of the stored element.  BF16 has no
# numpy type: it is stored and read as uint16 bit patterns.
_NP = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"),
    "BOOL": np.dtype("u1"),
}


# ---- bf16 <-> f32 -----------------------------------------------------------

def f32_to_bf16_bits(a):
    """Round float32 values to bfloat16 (nearest, ties to even), as uint16."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(a)
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def bf16_bits_to_f32(b):
    b = np.ascontiguousarray(b, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def round_to(a, dtype):
    """The float32 values that `a` becomes once stored as dtype (F32/F16/BF16)."""
    a = np.asarray(a, dtype=np.float32)
    if dtype == "F32":
        return a.copy()
    if dtype == "F16":
        return a.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        return bf16_bits_to_f32(f32_to_bf16_bits(a)).reshape(a.shape)
    raise ValueError("round_to: dtype %r" % dtype)


# ---- writing ----------------------------------------------------------------

def _as_stored(value, dtype):
    """(dtype name, shape, raw bytes) for a numpy array or torch tensor."""
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().float().numpy() if dtype else value.detach().cpu().numpy()
    a = np.asarray(value)
    if dtype is None:
        inv = {np.dtype("float64"): "F64", np.dtype("float32"): "F32",
               np.dtype("float16"): "F16", np.dtype("int64"): "I64",
               np.dtype("int32"): "I32", np.dtype("uint8"): "U8", np.dtype("int8"): "I8"}
        if a.dtype not in inv:
            raise ValueError("no safetensors dtype for %s" % a.dtype)
        dtype = inv[a.dtype]
    if dtype == "BF16":
        raw = f32_to_bf16_bits(a.astype(np.float32)).reshape(a.shape).tobytes()
    else:
        raw = np.ascontiguousarray(a.astype(_NP[dtype])).tobytes()
    return dtype, [int(s) for s in a.shape], raw


def write_safetensors(path, tensors, dtype=None, metadata=None):
    """Write {name: array} to `path`.  dtype (None = from the array) converts
    floating arrays to "F32", "F16" or "BF16"; it may also be a dict
    name -> dtype for mixed files."""
    header, blobs, offset = {}, [], 0
    for name in tensors:  # insertion order is file order
        want = dtype.get(name) if isinstance(dtype, dict) else dtype
        dt, shape, raw = _as_stored(tensors[name], want)
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    write_raw_safetensors(path, json.dumps(header).encode(), b"".join(blobs))


def write_raw_safetensors(path, header_bytes, data, header_len=None, pad=True):
    """Low-level writer for building bad files: the header is written as
    given (padded with spaces to a multiple of 8 when pad), and header_len
    overrides the stored length."""
    if pad:
        header_bytes = header_bytes + b" " * ((8 - len(header_bytes) % 8) % 8)
    n = len(header_bytes) if header_len is None else header_len
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", n))
        f.write(header_bytes)
        f.write(data)


# ---- reading ----------------------------------------------------------------

def read_safetensors(path, as_f32=True):
    """Read every tensor of `path`: {name: numpy array}.  Float tensors come
    back as float32 when as_f32 (BF16 always does).  Validates the header
    length, offsets and spans the way a strict reader should."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("%s: %d bytes, shorter than the 8-byte header length" % (path, len(blob)))
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise ValueError("%s: header length %d exceeds the file (%d bytes)" % (path, n, len(blob)))
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info["dtype"]
        shape = tuple(info["shape"])
        b, e = info["data_offsets"]
        npdt = _NP[dt]
        count = int(np.prod(shape)) if shape else 1
        if not (0 <= b <= e <= len(data)) or e - b != count * npdt.itemsize:
            raise ValueError("%s: tensor %s: span [%d, %d) does not hold %s %s"
                             % (path, name, b, e, dt, list(shape)))
        a = np.frombuffer(data, dtype=npdt, count=count, offset=b).reshape(shape)
        if dt == "BF16":
            a = bf16_bits_to_f32(a.reshape(-1)).reshape(shape)
        elif as_f32 and dt in ("F16", "F64"):
            a = a.astype(np.float32)
        out[name] = a.copy()
    return out


def read_header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n).decode("utf-8"))


# ---- running ffn ------------------------------------------------------------

def run_ffn(args, check=True, env=None):
    """Run `ffn args...`; returns the CompletedProcess.  With check, a
    non-zero exit raises with the command line and stderr."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    p = subprocess.run([FFN_BIN] + [str(a) for a in args], capture_output=True, text=True,
                       env=full_env)
    if check and p.returncode != 0:
        raise RuntimeError("ffn %s: exit %d\n%s" % (" ".join(map(str, args)), p.returncode,
                                                     p.stderr))
    return p


def write_config(path, **cfg):
    with open(path, "w") as f:
        json.dump(cfg, f)


# ---- comparing --------------------------------------------------------------

# ---- the instruction sets a test may need --------------------------------------

def cpu_has(isa, env=None):
    """Whether the CPU (its /proc/cpuinfo flags, not the code under test)
    has `isa`, capped by FFN_SIMD=scalar|avx2|avx512 (from env, else this
    process's environment) the way ffn caps itself: "avx2" (with FMA),
    "avx512" (F, BW, VL, DQ), "avx512_bf16" and "avx512_vnni" (each also
    needing "avx512")."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    cap = (env if env is not None and "FFN_SIMD" in env else os.environ).get("FFN_SIMD")
    level = {"scalar": 0, "avx2": 1}.get(cap, 2)
    avx2 = {"avx2", "fma"} <= flags and level >= 1
    avx512 = avx2 and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags and level >= 2
    if isa == "avx2":
        return avx2
    if isa == "avx512":
        return avx512
    return avx512 and isa in flags


def note(msg):
    """A line tests/run.sh prints beside the test's result: what was checked
    where the machine decides (nothing is skipped silently)."""
    print("note: " + msg)
    sys.stdout.flush()


class Checker:
    """Collects comparisons; `exit()` ends the test with their verdict."""

    def __init__(self, name):
        self.name = name
        self.count = 0
        self.failures = []

    def close(self, label, got, ref, rel_tol, abs_floor=0.0):
        """Pass when max|got - ref| <= rel_tol * max(max|ref|, abs_floor)
        (a relative error measured against the tensor's scale, which is the
        meaningful one for sums of products).  Prints one line either way."""
        self.count += 1
        got = np.asarray(got, dtype=np.float64)
        ref = np.asarray(ref, dtype=np.float64)
        if got.shape != ref.shape:
            self.fail(label, "shape %s, expected %s" % (list(got.shape), list(ref.shape)))
            return False
        if got.size == 0:
            print("  ok   %-44s empty %s" % (label, list(got.shape)))
            return True
        if not np.all(np.isfinite(got)):
            self.fail(label, "%d non-finite values" % int(np.sum(~np.isfinite(got))))
            return False
        err = float(np.max(np.abs(got - ref)))
        scale = max(float(np.max(np.abs(ref))), abs_floor)
        rel = err / scale if scale > 0 else err
        ok = err <= rel_tol * scale if scale > 0 else err == 0.0
        print("  %-4s %-44s max abs %.3e  max rel %.3e  (tol rel %.0e of max|ref| %.3e)"
              % ("ok" if ok else "FAIL", label, err, rel, rel_tol, scale))
        if not ok:
            self.failures.append("%s: max rel %.3e > %.0e" % (label, rel, rel_tol))
        return ok

    def equal_bytes(self, label, a, b):
        self.count += 1
        same = a == b
        print("  %-4s %s" % ("ok" if same else "FAIL", label))
        if not same:
            self.failures.append(label)
        return same

    def true(self, label, cond, detail=""):
        self.count += 1
        print("  %-4s %s %s" % ("ok" if cond else "FAIL", label, detail))
        if not cond:
            self.failures.append("%s %s" % (label, detail))
        return cond

    def fail(self, label, why):
        self.count += 1
        print("  FAIL %s: %s" % (label, why))
        self.failures.append("%s: %s" % (label, why))

    def exit(self):
        print("%s: %d checks, %d failed" % (self.name, self.count, len(self.failures)))
        for f in self.failures[:20]:
            print("  failed: " + f)
        sys.exit(1 if self.failures else 0)
