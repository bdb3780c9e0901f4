#!/usr/bin/env python3
"""json_to_gguf.py -- write a GGUF file holding only a tokenizer
(tokenizer.ggml.* metadata, no tensors) converted from a tokenizer.json,
the way llama.cpp's converter lays it out, for the tests of ffn's GGUF
tokenizer reader.

    json_to_gguf.py tokenizer.json out.gguf gpt2 PRE     byte-level BPE: tokens + merges,
                                                          tokenizer.ggml.pre = PRE
    json_to_gguf.py tokenizer.json out.gguf llama        SentencePiece BPE: tokens, scores
                                                          (-id: the earlier piece wins, the
                                                          order SentencePiece gives ids in),
                                                          token types

Token types: 1 normal, 2 unknown, 3 control (special added tokens), 4 user
defined (other added tokens), 6 byte (<0xNN>)."""
import json
import re
import struct
import sys

src, out, model = sys.argv[1], sys.argv[2], sys.argv[3]
pre = sys.argv[4] if len(sys.argv) > 4 else None
d = json.load(open(src, encoding="utf-8"))
vocab = d["model"]["vocab"]
added = {a["id"]: a for a in d.get("added_tokens") or []}
V = max(list(vocab.values()) + list(added.keys())) + 1
tokens = [""] * V
for t, i in vocab.items():
    tokens[i] = t
for i, a in added.items():
    tokens[i] = a["content"]
types = []
for i, t in enumerate(tokens):
    if i in added:
        types.append(3 if added[i].get("special") else 4)
    elif t == d["model"].get("unk_token"):
        types.append(2)
    elif re.fullmatch(r"<0x[0-9A-F]{2}>", t):
        types.append(6)
    else:
        types.append(1)
for i, a in added.items():
    if a["content"] == d["model"].get("unk_token"):
        types[i] = 2

kv = []


def s(x):
    b = x.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def add(key, vtype, payload):
    kv.append(s(key) + struct.pack("<I", vtype) + payload)


def add_str(key, val):
    add(key, 8, s(val))


def add_u32(key, val):
    add(key, 4, struct.pack("<I", val))


def add_bool(key, val):
    add(key, 7, struct.pack("<B", 1 if val else 0))


def add_arr(key, etype, items):
    if etype == 8:
        body = b"".join(s(x) for x in items)
    elif etype == 5:
        body = struct.pack("<%di" % len(items), *items)
    elif etype == 6:
        body = struct.pack("<%df" % len(items), *items)
    add(key, 9, struct.pack("<IQ", etype, len(items)) + body)


add_str("general.architecture", "llama")
add_str("tokenizer.ggml.model", model)
add_arr("tokenizer.ggml.tokens", 8, tokens)
add_arr("tokenizer.ggml.token_type", 5, types)
cfg = {}
try:
    cfg = json.load(open(src.rsplit("/", 1)[0] + "/tokenizer_config.json", encoding="utf-8"))
except OSError:
    pass


def tok_id(name):
    v = cfg.get(name)
    if isinstance(v, dict):
        v = v.get("content")
    return tokens.index(v) if v in tokens else None


if model == "gpt2":
    merges = [m if isinstance(m, str) else " ".join(m) for m in d["model"]["merges"]]
    add_arr("tokenizer.ggml.merges", 8, merges)
    add_str("tokenizer.ggml.pre", pre or "default")
    add_bool("tokenizer.ggml.add_bos_token", False)
else:
    add_arr("tokenizer.ggml.scores", 6, [-float(i) for i in range(V)])
    add_bool("tokenizer.ggml.add_bos_token", True)
for key, name in (("bos", "bos_token"), ("eos", "eos_token"), ("unknown", "unk_token"), ("padding", "pad_token")):
    i = tok_id(name)
    if i is not None:
        add_u32("tokenizer.ggml.%s_token_id" % key, i)
blob = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv)) + b"".join(kv)
blob += b"\0" * (-len(blob) % 32)
open(out, "wb").write(blob)
