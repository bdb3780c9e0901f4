#!/usr/bin/env python3
"""llamacpp_vocab.py -- llama.cpp's tokenizer test suite against ffn.

Usage: llamacpp_vocab.py MODELS_DIR FFN_BIN [--sample K]

MODELS_DIR holds llama.cpp's models/ggml-vocab-*.gguf with .inp / .out
beside each: the inputs, separated by "\\n__ggml_vocab_test__\\n", and one
line of expected ids per input (tests/test-tokenizer-0.cpp reads them so:
encoded without the special tokens' template, add_special false).

Every vocabulary ffn reads must give exactly the expected ids on every
case; a vocabulary ffn refuses must be one of REFUSED below, and its error
must name the file, the key and the value.  Without --sample every case
is encoded through ffn's library (libffn.so beside FFN_BIN, by ctypes: one
load per vocabulary); with --sample K, K cases spread over each go through
the command itself (`FFN_BIN tokenize`, e.g. the ASan build).
Prints one line per vocabulary and "N/M cases" at the end."""
import ctypes
import os
import subprocess
import sys
import tempfile

# what ffn refuses, and the key and value its message must name
REFUSED = {
    "ggml-vocab-bert-bge.gguf": ("tokenizer.ggml.model", "bert"),
    "ggml-vocab-nomic-bert-moe.gguf": ("tokenizer.ggml.model", "t5"),
    "ggml-vocab-gemma-4.gguf": ("tokenizer.ggml.model", "gemma4"),
}
SEP = "\n__ggml_vocab_test__\n"


def read_cases(gguf):
    raw = open(gguf + ".inp", "rb").read().decode("utf-8")
    inputs, pos = [], 0
    while pos < len(raw):
        nxt = raw.find(SEP, pos)
        if nxt < 0:
            inputs.append(raw[pos:])
            break
        inputs.append(raw[pos:nxt])
        pos = nxt + len(SEP)
    outs = [[int(x) for x in line.split()]
            for line in open(gguf + ".out", encoding="utf-8").read().split("\n")[:len(inputs)]]
    if len(outs) != len(inputs):
        sys.exit("FAIL %s: %d inputs but %d lines of ids" % (gguf, len(inputs), len(outs)))
    # test-tokenizer-0 keys a map by the input: a repeated input counts once
    seen, cases = set(), []
    for i, o in zip(inputs, outs):
        if i not in seen:
            seen.add(i)
            cases.append((i, o))
    return cases


class Lib:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.ffn_vocab_load.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p)]
        self.lib.ffn_vocab_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                              ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                                              ctypes.POINTER(ctypes.c_int64)]
        self.lib.ffn_vocab_free.argtypes = [ctypes.c_void_p]
        self.lib.ffn_last_error.restype = ctypes.c_char_p
        self.libc = ctypes.CDLL(None)
        self.libc.free.argtypes = [ctypes.c_void_p]

    def load(self, path):
        v = ctypes.c_void_p()
        if self.lib.ffn_vocab_load(path.encode(), 0, ctypes.byref(v)) != 0:
            return None, self.lib.ffn_last_error().decode("utf-8", "replace")
        return v, None

    def encode(self, v, text):
        b = text.encode("utf-8")
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_int64()
        if self.lib.ffn_vocab_encode(v, b, len(b), 0, ctypes.byref(ids), ctypes.byref(n)) != 0:
            return "error: " + self.lib.ffn_last_error().decode("utf-8", "replace")
        out = [ids[i] for i in range(n.value)]
        self.libc.free(ids)
        return out

    def free(self, v):
        self.lib.ffn_vocab_free(v)


def cli_encode(ffn, gguf, text, tmp):
    with open(tmp, "wb") as f:
        f.write(text.encode("utf-8"))
    src = ["--file", tmp] if text else ["--text", ""]  # an empty --file is refused
    r = subprocess.run([ffn, "tokenize", "--tokenizer", gguf] + src + ["--ids-only", "--no-specials"],
                       capture_output=True)
    if r.returncode != 0:
        return None, r.stderr.decode("utf-8", "replace").strip()
    return [int(x) for x in r.stdout.split()], None


def main():
    args = sys.argv[1:]
    sample = 0
    if "--sample" in args:
        k = args.index("--sample")
        sample = int(args[k + 1])
        del args[k:k + 2]
    models, ffn = args
    vocabs = sorted(f for f in os.listdir(models) if f.startswith("ggml-vocab-") and f.endswith(".gguf"))
    lib = None if sample else Lib(os.path.join(os.path.dirname(os.path.abspath(ffn)), "libffn.so"))
    tmp = tempfile.NamedTemporaryFile(delete=False).name
    bad, total, passed, n_vocab = [], 0, 0, 0
    for name in vocabs:
        gguf = os.path.join(models, name)
        has_cases = os.path.exists(gguf + ".inp")
        cases = read_cases(gguf) if has_cases else []
        if sample and cases:  # spread over the file: its first cases are the short ones
            cases = [cases[(2 * k + 1) * len(cases) // (2 * sample)] for k in range(sample)]
        if lib:
            v, err = lib.load(gguf)
        else:  # the first case's run says whether the command reads the file
            v, err = True, None
            got0, e0 = cli_encode(ffn, gguf, cases[0][0] if cases else "a", tmp)
            if e0 is not None:
                v, err = None, e0
        if err is not None:
            key, value = REFUSED.get(name, (None, None))
            if key is None:
                bad.append(name)
                print("FAIL %-34s refused: %s" % (name, err))
            elif name not in err or key not in err or '"%s"' % value not in err:
                bad.append(name)
                print("FAIL %-34s refused without naming the file, %s and \"%s\": %s" % (name, key, value, err))
            else:
                print("refused %-31s %s \"%s\" (%d cases not run)" % (name, key, value, len(cases)))
            continue
        if name in REFUSED:
            bad.append(name)
            print("FAIL %-34s is read, but the test expects a refusal: update REFUSED" % name)
        if not has_cases:
            print("read %-34s (no .inp / .out in the suite)" % name)
            if lib:
                lib.free(v)
            continue
        n_vocab += 1
        ok = 0
        for text, want in cases:
            if lib:
                got = lib.encode(v, text)
            elif text == cases[0][0]:
                got = got0
            else:
                got, e = cli_encode(ffn, gguf, text, tmp)
                got = got if e is None else "error: " + e
            if got == want:
                ok += 1
            elif len(bad) < 40:
                print("  %s: %r\n    expected %s\n    ffn      %s" % (name, text[:80], want, got))
        if lib:
            lib.free(v)
        total += len(cases)
        passed += ok
        print("%s %-34s %d/%d cases" % ("ok  " if ok == len(cases) else "FAIL", name, ok, len(cases)))
        if ok != len(cases):
            bad.append(name)
    os.unlink(tmp)
    print("%d vocabularies read, %d/%d cases with exactly the expected ids" % (n_vocab, passed, total))
    if bad:
        sys.exit("FAIL: " + ", ".join(bad))


if __name__ == "__main__":
    main()
