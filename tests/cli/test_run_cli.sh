#!/usr/bin/env bash
# test_run_cli.sh -- `ffn run` and `ffn export` from the command line:
#   --help; bad files, each with its own message and a non-zero exit
#   (truncated .bin, absurd / negative header values, missing config.json,
#   missing shard, bad index json, bad tokenizer.bin, and more);
#   the llama2.c tokenizer: encoding a prompt matches an independent Python
#   implementation of llama2.c's BPE, and --emit text equals the decoded ids;
#   memory: loading a llama2.c checkpoint costs about its weights once (max
#   RSS from /usr/bin/time -v, against the same run on a tiny model).
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
SHARED="${FFN_SHARED:-../shared}"
PY=/usr/bin/python3
MODEL="$SHARED/models/stories260K.bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# expect_fail CODE PATTERN CMD...: the command exits with CODE and its stderr matches PATTERN
expect_fail() {
    local code="$1" pat="$2"; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -eq $code ]] && grep -Eq -- "$pat" "$tmp/err"; then
        ok "exit $rc, '$(head -c 160 "$tmp/err" | tr '\n' ' ')'"
    else
        bad "expected exit $code and /$pat/ from: $*; got exit $rc: $(cat "$tmp/err")"
    fi
}

# ---- help ----
"$FFN" run --help >"$tmp/h" && grep -q "rotate_half" "$tmp/h" && grep -q -- "--dump-logits" "$tmp/h" &&
    grep -q "consecutive pairs" "$tmp/h" && ok "run --help" || bad "run --help"
"$FFN" export --help >"$tmp/h" && grep -q -- "--format hf" "$tmp/h" && grep -q "llama2c" "$tmp/h" &&
    ok "export --help" || bad "export --help"
expect_fail 2 "MODEL missing" "$FFN" run --ids 1
expect_fail 2 "exactly one of --ids and --prompt" "$FFN" run "$MODEL"
expect_fail 2 "outside the vocabulary" "$FFN" run "$MODEL" --ids "1 512"
expect_fail 2 "--format: expected hf, llama2c or gguf" "$FFN" export "$MODEL" --out "$tmp/x" --format onnx

# ---- sampling: the same seed gives the same tokens ----
a=$("$FFN" run "$MODEL" --ids 1 --steps 40 --temperature 1 --top-p 0.9 --seed 7)
b=$("$FFN" run "$MODEL" --ids 1 --steps 40 --temperature 1 --top-p 0.9 --seed 7)
c=$("$FFN" run "$MODEL" --ids 1 --steps 40 --temperature 1 --top-p 0.9 --seed 8)
g=$("$FFN" run "$MODEL" --ids 1 --steps 40 --temperature 0)
[[ "$a" == "$b" && "$a" != "$c" && "$a" != "$g" && $(wc -w <<<"$a") -eq 40 ]] &&
    ok "sampling: seed 7 twice gives the same 40 ids, seed 8 and greedy differ" || bad "sampling seeds: '$a' '$b' '$c'"
expect_fail 2 "--top-p: expected" "$FFN" run "$MODEL" --ids 1 --top-p 0
# the context: 512 positions; a longer request is cut with a note
"$FFN" run "$MODEL" --ids 1 --steps 600 --temperature 0 >"$tmp/long" 2>"$tmp/long.err"
[[ $(wc -w <"$tmp/long") -eq 512 ]] && grep -q "generating 512 tokens, not 600: the context holds 512" "$tmp/long.err" &&
    ok "generation stops at the context (512 tokens) with a note" || bad "context cap: $(wc -w <"$tmp/long") ids, $(cat "$tmp/long.err")"

# ---- bad llama2.c files ----
head -c 100000 "$MODEL" >"$tmp/truncated.bin"
expect_fail 1 "truncated.bin: the file has 100000 bytes but its llama2.c header .* promises 1056540 bytes.*truncated" \
    "$FFN" run "$tmp/truncated.bin" --ids 1
head -c 20 "$MODEL" >"$tmp/short.bin"
expect_fail 1 "short.bin: 20 bytes: too short for a llama2.c checkpoint header" "$FFN" run "$tmp/short.bin" --ids 1
$PY - "$tmp" <<'EOF'
import struct, sys
d = sys.argv[1]
open(f"{d}/absurd.bin", "wb").write(struct.pack("<7i", 2**30, 2**31 - 1, 2**31 - 1, 1, 1, -(2**31 - 1), 2**31 - 1) + b"\0" * 64)
open(f"{d}/negative.bin", "wb").write(struct.pack("<7i", -64, 172, 5, 8, 4, 512, 512) + b"\0" * 64)
open(f"{d}/zero_heads.bin", "wb").write(struct.pack("<7i", 64, 172, 5, 0, 4, 512, 512) + b"\0" * 64)
open(f"{d}/odd_heads.bin", "wb").write(struct.pack("<7i", 64, 172, 5, 8, 3, 512, 512) + b"\0" * 64)
open(f"{d}/v1.bin", "wb").write(struct.pack("<IiiiiiiiiB", 0x616b3432, 1, 64, 172, 5, 8, 4, 512, 512, 1) + b"\0" * 300)
open(f"{d}/big_claim.bin", "wb").write(struct.pack("<7i", 4096, 11008, 32, 32, 32, 32000, 2048) + b"\0" * 64)
EOF
expect_fail 1 "absurd.bin: llama2.c header: the sizes overflow 64 bits" "$FFN" run "$tmp/absurd.bin" --ids 1
expect_fail 1 "negative.bin: llama2.c header: dim is -64, expected a positive value" "$FFN" run "$tmp/negative.bin" --ids 1
expect_fail 1 "zero_heads.bin: llama2.c header: n_heads is 0" "$FFN" run "$tmp/zero_heads.bin" --ids 1
expect_fail 1 "odd_heads.bin: llama2.c header: n_kv_heads 3 does not divide n_heads 8" "$FFN" run "$tmp/odd_heads.bin" --ids 1
expect_fail 1 "v1.bin: a llama2.c 'version 1' export \(magic 0x616b3432\)" "$FFN" run "$tmp/v1.bin" --ids 1
expect_fail 1 "big_claim.bin: the file has 92 bytes but .* promises [0-9]+ bytes" "$FFN" run "$tmp/big_claim.bin" --ids 1
: >"$tmp/empty.bin"
expect_fail 1 "empty.bin: the file is empty" "$FFN" run "$tmp/empty.bin" --ids 1
expect_fail 1 "nothere: no such file or directory" "$FFN" run "$tmp/nothere" --ids 1
cp "$MODEL" "$tmp/nan.bin"
printf '\x00\x00\xc0\x7f' | dd of="$tmp/nan.bin" bs=1 seek=1000 conv=notrunc status=none
expect_fail 1 "nan.bin: weight [0-9]+ of the model is nan" "$FFN" run "$tmp/nan.bin" --ids 1

# ---- bad Hugging Face directories (built from a good one) ----
"$FFN" export "$MODEL" --out "$tmp/hf" 2>/dev/null
"$FFN" run "$tmp/hf" --ids "1 2 3" --steps 3 --temperature 0 --emit ids >"$tmp/hf_ids" && ok "exported directory runs" || bad "exported directory runs"
mkdir "$tmp/noconfig" && cp "$tmp/hf/model.safetensors" "$tmp/noconfig/"
expect_fail 1 "noconfig: not a checkpoint directory: config.json is missing" "$FFN" run "$tmp/noconfig" --ids 1
mkdir "$tmp/noweights" && cp "$tmp/hf/config.json" "$tmp/noweights/"
expect_fail 1 "noweights: no weights: neither model.safetensors nor model.safetensors.index.json" \
    "$FFN" run "$tmp/noweights" --ids 1
# sharded: split the export in two with an index, then break it in several ways
$PY - "$tmp" <<'EOF'
import json, os, shutil, struct, sys
d = sys.argv[1]
raw = open(f"{d}/hf/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); hdr.pop("__metadata__", None)
names = sorted(hdr)
def write(path, keep):
    h, off, blobs = {}, 0, []
    for k in keep:
        b, e = hdr[k]["data_offsets"]
        blob = raw[8 + n + b:8 + n + e]
        h[k] = dict(hdr[k], data_offsets=[off, off + len(blob)]); off += len(blob); blobs.append(blob)
    hj = json.dumps(h).encode(); hj += b" " * (-len(hj) % 8)
    open(path, "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
def sharded(name, index, files=True):
    p = f"{d}/{name}"; os.makedirs(p)
    shutil.copy(f"{d}/hf/config.json", p)
    half = len(names) // 2
    if files:
        write(f"{p}/a.safetensors", names[:half]); write(f"{p}/b.safetensors", names[half:])
    open(f"{p}/model.safetensors.index.json", "w").write(index if isinstance(index, str) else json.dumps(index))
    return p
wm = {k: ("a.safetensors" if i < len(names) // 2 else "b.safetensors") for i, k in enumerate(names)}
sharded("sharded_ok", {"weight_map": wm})
p = sharded("missing_shard", {"weight_map": wm}); os.remove(f"{p}/b.safetensors")
sharded("index_syntax", '{"weight_map": {"a": "a.safetensors",}}')
sharded("index_no_map", {"metadata": {}})
sharded("index_bad_value", {"weight_map": dict(wm, **{names[0]: 7})})
sharded("index_traversal", {"weight_map": dict(wm, **{names[0]: "../hf/model.safetensors"})})
sharded("index_missing_tensor", {"weight_map": {k: v for k, v in wm.items() if k != "model.norm.weight"}})
sharded("index_extra_tensor", {"weight_map": dict(wm, **{"model.layers.9.mlp.up_proj.weight": "a.safetensors"})})
# config problems
def with_config(name, **change):
    p = f"{d}/{name}"; os.makedirs(p)
    shutil.copy(f"{d}/hf/model.safetensors", p)
    cfg = json.load(open(f"{d}/hf/config.json")); cfg.update(change)
    for k, v in list(cfg.items()):
        if v == "DELETE": del cfg[k]
    json.dump(cfg, open(f"{p}/config.json", "w"))
with_config("gpt2", model_type="gpt_neox")
with_config("no_type", model_type="DELETE")
with_config("rope_scaling", rope_scaling={"type": "longrope", "factor": 2.0})
with_config("head_dim", head_dim=16)
with_config("too_many_layers", num_hidden_layers=6)
with_config("fewer_layers", num_hidden_layers=4)
with_config("wrong_ffn", intermediate_size=100)
with_config("window", model_type="mistral", sliding_window=4)
with_config("eps6", rms_norm_eps=1e-6)
with_config("huge", vocab_size=2**24, hidden_size=2**14, num_attention_heads=128, num_key_value_heads=8)
p = f"{d}/bad_json"; os.makedirs(p); shutil.copy(f"{d}/hf/model.safetensors", p)
open(f"{p}/config.json", "w").write('{"model_type": "llama", "hidden_size": 64,')
# a tensor of the wrong dtype: I32 embedding
p = f"{d}/int_weights"; os.makedirs(p); shutil.copy(f"{d}/hf/config.json", p)
h2 = dict(hdr); h2["model.embed_tokens.weight"] = dict(hdr["model.embed_tokens.weight"], dtype="I32")
hj = json.dumps(h2).encode(); hj += b" " * (-len(hj) % 8)
open(f"{p}/model.safetensors", "wb").write(struct.pack("<Q", len(hj)) + hj + raw[8 + n:])
EOF
"$FFN" run "$tmp/sharded_ok" --ids "1 2 3" --steps 3 --temperature 0 --emit ids >"$tmp/sh_ids" && cmp -s "$tmp/sh_ids" "$tmp/hf_ids" &&
    ok "sharded directory runs and generates the same ids" || bad "sharded directory"
expect_fail 1 "missing_shard/b.safetensors: shard b.safetensors named in model.safetensors.index.json is missing" \
    "$FFN" run "$tmp/missing_shard" --ids 1
expect_fail 1 "index_syntax/model.safetensors.index.json.*(expected|unexpected)" "$FFN" run "$tmp/index_syntax" --ids 1
expect_fail 1 "index_no_map/model.safetensors.index.json: weight_map missing" "$FFN" run "$tmp/index_no_map" --ids 1
expect_fail 1 "index_bad_value/model.safetensors.index.json: weight_map: .*expected a file name string, found a number" \
    "$FFN" run "$tmp/index_bad_value" --ids 1
expect_fail 1 "index_traversal/model.safetensors.index.json: .*is not a plain file name" "$FFN" run "$tmp/index_traversal" --ids 1
expect_fail 1 "tensor model.norm.weight is not in the weight_map" "$FFN" run "$tmp/index_missing_tensor" --ids 1
expect_fail 1 "tensor model.layers.9.mlp.up_proj.weight is not part of the model that config.json describes" \
    "$FFN" run "$tmp/index_extra_tensor" --ids 1
expect_fail 1 "gpt2/config.json: model_type 'gpt_neox' is not supported" "$FFN" run "$tmp/gpt2" --ids 1
expect_fail 1 "no_type/config.json.*model_type" "$FFN" run "$tmp/no_type" --ids 1
expect_fail 1 "rope_scaling/config.json: rope_scaling.short_factor: expected a list of numbers" "$FFN" run "$tmp/rope_scaling" --ids 1
expect_fail 1 "head_dim/model.safetensors: model.layers.0.self_attn.k_proj.weight: expected shape" "$FFN" run "$tmp/head_dim" --ids 1
expect_fail 1 "too_many_layers/model.safetensors.*model.layers.5.*(missing|not found|absent)" "$FFN" run "$tmp/too_many_layers" --ids 1
expect_fail 1 "fewer_layers/model.safetensors: tensor model.layers.4.* is not part of the model" "$FFN" run "$tmp/fewer_layers" --ids 1
expect_fail 1 "wrong_ffn/model.safetensors: .*expected shape \[(100, 64|64, 100)\], found \[(172, 64|64, 172)\]" "$FFN" run "$tmp/wrong_ffn" --ids 1
expect_fail 1 "huge: config.json describes a model of at least [0-9]+ parameters .* but the weight files hold [0-9]+ bytes" \
    "$FFN" run "$tmp/huge" --ids 1
expect_fail 1 "bad_json/config.json" "$FFN" run "$tmp/bad_json" --ids 1
expect_fail 1 "int_weights/model.safetensors.*(I32|dtype|size)" "$FFN" run "$tmp/int_weights" --ids 1
# a sliding window of 4 caps the context: exact for up to 4 tokens
"$FFN" run "$tmp/window" --ids "1 2 3" --steps 2 --emit ids >/dev/null && ok "sliding window: 3 + 1 tokens run" || bad "sliding window run"
expect_fail 2 "the prompt has 5 tokens, more than the model's context of 4" "$FFN" run "$tmp/window" --ids "1 2 3 4 5"
# export refuses what a format cannot hold, and never half-writes
expect_fail 1 "x.bin: the llama2.c format cannot express this model: rms_norm_eps other than 1e-5" \
    "$FFN" export "$tmp/eps6" --out "$tmp/x.bin" --format llama2c
[[ ! -e "$tmp/x.bin" && ! -e "$tmp/x.bin.tmp" ]] && ok "no file left behind" || bad "a file was left behind"
mkdir -p "$tmp/userdir" && echo keep >"$tmp/userdir/notes.txt"
expect_fail 1 "userdir: exists, is not empty and is not an ffn checkpoint" "$FFN" export "$MODEL" --out "$tmp/userdir"
[[ "$(cat "$tmp/userdir/notes.txt")" == keep ]] && ok "a user's directory is left alone" || bad "userdir touched"

# ---- the llama2.c tokenizer ----
# A 512-piece vocabulary (stories260K's size): <unk>, <s>, </s>, 256 byte
# pieces, then letters, merges and fillers with scores.  The prompt's ids
# from --info must equal an independent Python version of llama2.c's encode.
$PY - "$tmp" <<'EOF'
import struct, sys
d = sys.argv[1]
pieces = [b"<unk>", b"\n<s>\n", b"\n</s>\n"] + [b"<0x%02X>" % b for b in range(256)]
words = [b" ", b"e", b"t", b"a", b"o", b"n", b"c", b"h", b"s", b"r", b"d", b"l", b"i", b"u", b"y", b"w",
         b" t", b"th", b" th", b"he", b" the", b"on", b"ce", b" o", b" on", b" a", b"an", b" an", b"nc",
         b"upon", b" up", b"up", b"p", b"m", b"ti", b"im", b"me", b" ti", b" tim", b" time", b"On", b"O",
         b"Onc", b"Once", b",", b".", b" s", b"sa", b" sa", b"aw", b" saw", "é".encode(), " é".encode()]
pieces += words
i = 0
while len(pieces) < 512:
    pieces.append(b"zz%03d" % i); i += 1
scores = [0.0] * 3 + [0.0] * 256 + [-float(k) * 0.5 + (3.0 if len(p) > 3 else 0.0) for k, p in enumerate(words)]
scores += [-1000.0] * (512 - len(scores))
with open(f"{d}/tok.bin", "wb") as f:
    f.write(struct.pack("<i", max(len(p) for p in pieces)))
    for p, s in zip(pieces, scores):
        f.write(struct.pack("<fi", s, len(p)) + p)

def encode(text, bos=True):
    lookup = {}
    for i, p in enumerate(pieces):
        lookup.setdefault(p, i)
    ids = [1] if bos else []
    data = text.encode()
    if data:
        ids.append(lookup[b" "])
    i = 0
    while i < len(data):  # one code point at a time, byte fallback
        j = i + 1
        while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        cp = data[i:j]
        if cp in lookup:
            ids.append(lookup[cp])
        else:
            ids.extend(lookup.get(b"<0x%02X>" % c, 0) for c in cp)
        i = j
    while True:
        best, at = None, None
        for k in range(1 if bos else 0, len(ids) - 1):
            m = pieces[ids[k]] + pieces[ids[k + 1]]
            if m in lookup and scores[lookup[m]] > -1e10 and (best is None or scores[lookup[m]] > scores[best]):
                best, at = lookup[m], k
        if best is None:
            break
        ids[at:at + 2] = [best]
    return ids

prompt = "Once upon a time, the cat saw é ☃ ok."
open(f"{d}/prompt.txt", "w").write(prompt)
open(f"{d}/expected_ids", "w").write(" ".join(map(str, encode(prompt))) + "\n")

def decode(ids, prev):
    out = b""
    for t in ids:
        p = pieces[t]
        if prev == 1 and p.startswith(b" "):
            p = p[1:]
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            p = bytes([int(p[3:5], 16)])
        out += p
        prev = t
    return out
import pickle
pickle.dump((pieces, scores), open(f"{d}/vocab.pkl", "wb"))
EOF
"$FFN" run "$MODEL" --tokenizer "$tmp/tok.bin" --prompt "$(cat "$tmp/prompt.txt")" --steps 0 --emit ids --info \
    2>"$tmp/info" >/dev/null
got=$(sed -n 's/^ffn run: prompt ids ([0-9]*): //p' "$tmp/info")
if [[ "$got" == "$(cat "$tmp/expected_ids")" ]]; then ok "BPE encode matches the Python reference ($got)"
else bad "BPE encode: ffn '$got', reference '$(cat "$tmp/expected_ids")'"; fi
"$FFN" run "$MODEL" --tokenizer "$tmp/tok.bin" --prompt "Once upon" --steps 30 --emit ids >"$tmp/gen_ids"
"$FFN" run "$MODEL" --tokenizer "$tmp/tok.bin" --prompt "Once upon" --steps 30 --emit text >"$tmp/gen_text"
"$FFN" run "$MODEL" --tokenizer "$tmp/tok.bin" --prompt "Once upon" --steps 0 --emit ids --info 2>"$tmp/info2" >/dev/null
last=$(sed -n 's/^ffn run: prompt ids ([0-9]*): //p' "$tmp/info2" | awk '{print $NF}')
$PY - "$tmp" "$last" <<'EOF' && ok "--emit text equals the Python decoding of --emit ids" || bad "--emit text differs from decoded ids"
import pickle, sys
d, last = sys.argv[1], int(sys.argv[2])
pieces, _ = pickle.load(open(f"{d}/vocab.pkl", "rb"))
ids = [int(t) for t in open(f"{d}/gen_ids").read().split()]
out, prev = b"", last
for t in ids:
    p = pieces[t]
    if prev == 1 and p.startswith(b" "):
        p = p[1:]
    if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
        p = bytes([int(p[3:5], 16)])
    out += p
    prev = t
text = open(f"{d}/gen_text", "rb").read()
sys.exit(0 if text == out + b"\n" else 1)
EOF
# bad tokenizer files
head -c 3000 "$tmp/tok.bin" >"$tmp/tok_trunc.bin"
expect_fail 1 "tok_trunc.bin: token [0-9]+: length [0-9]+ but only [0-9]+ bytes are left|tok_trunc.bin: token [0-9]+ at byte [0-9]+: the file ends" \
    "$FFN" run "$MODEL" --tokenizer "$tmp/tok_trunc.bin" --prompt hi
$PY -c "import struct; open('$tmp/tok_neg.bin','wb').write(struct.pack('<ifi', 8, 0.0, -5) + b'abc')"
expect_fail 1 "tok_neg.bin: token 0 at byte 4: length -5, expected 0..max_token_length 8" \
    "$FFN" run "$MODEL" --tokenizer "$tmp/tok_neg.bin" --prompt hi
$PY -c "import struct; open('$tmp/tok_maxlen.bin','wb').write(struct.pack('<i', -1))"
expect_fail 1 "tok_maxlen.bin: max_token_length is -1" "$FFN" run "$MODEL" --tokenizer "$tmp/tok_maxlen.bin" --prompt hi
$PY -c "import struct; open('$tmp/tok_small.bin','wb').write(struct.pack('<i', 4) + b''.join(struct.pack('<fi', 0.0, 1) + b'a' for _ in range(10)))"
expect_fail 1 "tok_small.bin: 10 tokens, but the model's vocabulary has 512" "$FFN" run "$MODEL" --tokenizer "$tmp/tok_small.bin" --prompt hi
$PY -c "import struct; open('$tmp/tok_nan.bin','wb').write(struct.pack('<i', 4) + struct.pack('<fi', float('nan'), 1) + b'a')"
expect_fail 1 "tok_nan.bin: token 0 at byte 4: score is not finite" "$FFN" run "$MODEL" --tokenizer "$tmp/tok_nan.bin" --prompt hi
expect_fail 1 "no vocabulary found beside the model" "$FFN" run "$MODEL" --prompt hi

# ---- memory: the weights are held once ----
if [[ -x /usr/bin/time ]]; then
    # a llama2.c file dominated by its embedding (V 32768 x D 512 = 64 MiB):
    # the model holds it once, the head reuses it, the mapping is released
    $PY - "$tmp" <<'EOF'
import numpy as np, struct, sys
d = sys.argv[1]
V, D, F, L, H, G, T = 32768, 512, 16, 1, 8, 8, 8
hs = D // H
n = V * D + L * D + 4 * L * D * D + L * D + 3 * L * F * D + D + T * hs
w = (np.random.default_rng(1).standard_normal(n, dtype=np.float32) * 0.02)
with open(f"{d}/big.bin", "wb") as f:
    f.write(struct.pack("<7i", D, F, L, H, G, V, T)); w.tofile(f)
EOF
    wbytes=$(( $(stat -c %s "$tmp/big.bin") - 28 ))
    rss() { /usr/bin/time -v "$@" 2>&1 >/dev/null | sed -n 's/.*Maximum resident set size (kbytes): //p'; }
    base=$(rss "$FFN" run "$MODEL" --ids 1 --steps 2 --threads 1)
    big=$(rss "$FFN" run "$tmp/big.bin" --ids 1 --steps 2 --threads 1)
    grow=$(( (big - base) * 1024 ))
    limit=$(( wbytes * 12 / 10 ))
    echo "max RSS: tiny model ${base} kB, big model ${big} kB; growth $grow bytes for $wbytes bytes of weights (limit 1.2x = $limit)"
    if (( grow <= limit )); then ok "llama2.c: loading grows RSS by $(( grow * 100 / wbytes ))% of the weight size (<= 120%)"
    else bad "llama2.c: loading grows RSS by $(( grow * 100 / wbytes ))% of the weight size (> 120%)"; fi
    # the same model as a Hugging Face directory in BF16: converted chunk by
    # chunk into the fp32 block (the limit is on the fp32 weights)
    "$FFN" export "$tmp/big.bin" --out "$tmp/big_hf" --dtype BF16 2>/dev/null
    big=$(rss "$FFN" run "$tmp/big_hf" --ids 1 --steps 2 --threads 1)
    grow=$(( (big - base) * 1024 ))
    echo "max RSS: HF BF16 directory ${big} kB; growth $grow bytes for $wbytes bytes of fp32 weights"
    if (( grow <= limit )); then ok "HF BF16: loading grows RSS by $(( grow * 100 / wbytes ))% of the weight size (<= 120%)"
    else bad "HF BF16: loading grows RSS by $(( grow * 100 / wbytes ))% of the weight size (> 120%)"; fi
else
    bad "/usr/bin/time is not installed (Debian package 'time', which scripts/setup.sh test installs): RSS not measured"
fi

echo "$fail failed"
exit $(( fail > 0 ))
