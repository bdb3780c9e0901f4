"""gguf_edit.py -- make bad GGUF files from a good one for the loader's
tests (tests/cli/test_gguf_model.sh): a small GGUF v3 reader that finds
where each metadata value and tensor record sits, and edits in place that
keep every other byte where it was.

  python3 gguf_edit.py IN OUT arch NAME          general.architecture := NAME (same length)
  python3 gguf_edit.py IN OUT rename-key OLD NEW  a key renamed (same length)
  python3 gguf_edit.py IN OUT set-u32 KEY VALUE   a uint32 value changed
  python3 gguf_edit.py IN OUT tensor-type NAME T  a tensor's ggml type number := T
  python3 gguf_edit.py IN OUT rename-tensor OLD NEW  (same length)
  python3 gguf_edit.py IN OUT set-ne NAME DIM N   a tensor's ne[DIM] := N (its data
                                                   stays where it was)
  python3 gguf_edit.py IN OUT set-u16 NAME BYTE HEX  the 16 bits at byte BYTE of a
                                                   tensor's data := HEX (an fp16
                                                   element or a block's scale)
"""
import struct
import sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def parse(b):
    """{key: (key_offset, value_type, value_offset)}, {tensor: (name_offset, type_offset)}"""
    assert b[:4] == b"GGUF"
    version, n_t, n_kv = struct.unpack_from("<IQQ", b, 4)
    o = 24
    kv = {}

    def string(o):
        (n,) = struct.unpack_from("<Q", b, o)
        return b[o + 8:o + 8 + n].decode(), o + 8 + n

    def value(t, o):
        if t in SIZES:
            return o + SIZES[t]
        if t == 8:
            return string(o)[1]
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, o)
            o += 12
            for _ in range(n):
                o = value(et, o)
            return o
        raise ValueError("value type %d" % t)

    for _ in range(n_kv):
        k0 = o
        key, o = string(o)
        (t,) = struct.unpack_from("<I", b, o)
        kv[key] = (k0, t, o + 4)
        o = value(t, o + 4)
    tensors = {}
    ne_at = parse.ne_at = {}  # tensor name -> offset of its ne[0]
    for _ in range(n_t):
        n0 = o
        name, o = string(o)
        (nd,) = struct.unpack_from("<I", b, o)
        ne_at[name] = o + 4
        o += 4 + 8 * nd
        (off,) = struct.unpack_from("<Q", b, o + 4)
        tensors[name] = (n0, o, off)
        o += 4 + 8
    align = 32
    if "general.alignment" in kv:
        (align,) = struct.unpack_from("<I", b, kv["general.alignment"][2])
    data = (o + align - 1) // align * align
    for name, (n0, to, off) in tensors.items():
        tensors[name] = (n0, to, data + off)
    return kv, tensors


def main():
    src, dst, op = sys.argv[1:4]
    args = sys.argv[4:]
    b = bytearray(open(src, "rb").read())
    kv, tensors = parse(bytes(b))
    if op == "arch":
        _, t, vo = kv["general.architecture"]
        (n,) = struct.unpack_from("<Q", b, vo)
        assert len(args[0]) == n, "same length as the old architecture"
        b[vo + 8:vo + 8 + n] = args[0].encode()
    elif op == "rename-key":
        k0 = kv[args[0]][0]
        assert len(args[0]) == len(args[1])
        b[k0 + 8:k0 + 8 + len(args[1])] = args[1].encode()
    elif op == "set-u32":
        _, t, vo = kv[args[0]]
        assert t == 4, "a uint32 key"
        struct.pack_into("<I", b, vo, int(args[1]))
    elif op == "set-f32":
        _, t, vo = kv[args[0]]
        assert t == 6, "a float32 key"
        struct.pack_into("<f", b, vo, float(args[1]))
    elif op == "tensor-type":
        struct.pack_into("<I", b, tensors[args[0]][1], int(args[1]))
    elif op == "rename-tensor":
        n0 = tensors[args[0]][0]
        assert len(args[0]) == len(args[1])
        b[n0 + 8:n0 + 8 + len(args[1])] = args[1].encode()
    elif op == "set-ne":
        struct.pack_into("<Q", b, parse.ne_at[args[0]] + 8 * int(args[1]), int(args[2]))
    elif op == "set-u16":
        struct.pack_into("<H", b, tensors[args[0]][2] + int(args[1]), int(args[2], 16))
    else:
        sys.exit("unknown edit " + op)
    open(dst, "wb").write(bytes(b))


if __name__ == "__main__":
    main()
