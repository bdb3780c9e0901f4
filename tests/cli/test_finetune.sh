#!/usr/bin/env bash
# test_finetune.sh -- `ffn train --init MODEL --train-only ffn|attention|all`:
#   1. stories260K.bin (llama2.c) fine-tuned with --train-only ffn: the loss
#      goes down, every attention tensor (and the embedding, final norm) is
#      bitwise unchanged, every FFN tensor changed; the run directory holds
#      the tokenizer.bin, and `ffn generate OUT` / `ffn run OUT` load it;
#      --train-only attention the reverse.  shared/ has no tokenizer for
#      stories260K, so the test writes a llama2.c tokenizer.bin of its 512
#      pieces (specials, the 256 byte pieces, characters and merges of the
#      text); the model's weights do not know these pieces, the loss still
#      has to fall.
#   2. resume: S steps + --resume to 2·S equals 2·S steps bitwise, keeping
#      --train-only and the vocabulary.
#   3. an ffn run directory (its tokenizer.txt) and a Hugging Face directory
#      written by `ffn export` as --init.
#   4. bad input: --init with --hidden-size, --train-only bogus, a missing
#      --init, --tokenizer with --init, a model without a vocabulary.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
FFN_SHARED="${FFN_SHARED:-../shared}"
TESTLIB="$(cd "$(dirname "$0")/../parity" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
stories="$FFN_SHARED/models/stories260K.bin"
[[ -f "$stories" ]] || fail "$stories missing"
head -c 40000 "$FFN_SHARED/data/tinyshakespeare.txt" > "$tmp/data.txt"

# A llama2.c tokenizer.bin of exactly V = 512 pieces for the text.
python3 - "$tmp/data.txt" "$tmp/tok512.bin" <<'EOF'
import collections, struct, sys
text = open(sys.argv[1], encoding="utf-8").read()
pieces = [b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % i for i in range(256)]
chars = sorted(set(text) - {"\n"})
pieces += [c.encode() for c in chars]
pairs = collections.Counter(text[i:i + 2] for i in range(len(text) - 1))
for p, _ in pairs.most_common():
    if len(pieces) == 512: break
    if "\n" not in p and p.encode() not in pieces: pieces.append(p.encode())
assert len(pieces) == 512
with open(sys.argv[2], "wb") as f:
    f.write(struct.pack("<i", max(len(p) for p in pieces)))
    for i, p in enumerate(pieces):
        score = 0.0 if i < 259 or len(p) == 1 else -float(i)
        f.write(struct.pack("<fi", score, len(p)) + p)
EOF

# Compare two model.safetensors: which tensors are bitwise equal.
compare() { # before after expect(ffn|attention) label
    PYTHONPATH="$TESTLIB" /usr/bin/python3 - "$@" <<'EOF'
import re, sys
import numpy as np
from ffn_testlib import read_safetensors
a, b, which, label = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2]), sys.argv[3], sys.argv[4]
assert sorted(a) == sorted(b), "%s: tensor names differ" % label
def trained(name):
    m = re.match(r"model\.layers\.\d+\.(.*)", name)
    if not m: return False
    part = m.group(1)
    if which == "ffn": return part.startswith("mlp.") or part == "post_attention_layernorm.weight"
    return part.startswith("self_attn.") or part == "input_layernorm.weight"
bad = []
n_changed = n_same = 0
for k in sorted(a):
    same = a[k].tobytes() == b[k].tobytes()
    if trained(k):
        n_changed += not same
        if same: bad.append("%s unchanged but trained" % k)
    else:
        n_same += same
        if not same: bad.append("%s changed but frozen (max diff %g)" % (k, np.abs(a[k] - b[k]).max()))
if bad:
    print("FAIL: %s: %s" % (label, "; ".join(bad[:6])))
    sys.exit(1)
print("ok %s: %d trained tensors all changed, %d frozen tensors bitwise equal" % (label, n_changed, n_same))
EOF
}
# first and last training loss of a metrics log: "first last"
loss_ends() { python3 -c '
import json, sys
l = [json.loads(x)["loss"] for x in open(sys.argv[1])]
print(l[0], l[-1])' "$1"; }
# mean of the first and of the last k losses falls by at least a margin
loss_falls() { # log label
    python3 -c '
import json, sys
l = [json.loads(x)["loss"] for x in open(sys.argv[1])]
k = max(1, len(l) // 4)
a, b = sum(l[:k]) / k, sum(l[-k:]) / k
print("%s: loss %.4f -> %.4f (mean of the first and last %d steps)" % (sys.argv[2], a, b, k))
sys.exit(0 if b < a - 0.05 else 1)' "$1" "$2" || fail "$2: the loss did not go down"; }

# The pretrained weights as safetensors, to compare with (export of the .bin).
"$FFN_BIN" export "$stories" --format hf --out "$tmp/stories-hf" >/dev/null 2>&1 ||
    fail "export of stories260K failed"

tune=(--data "$tmp/data.txt" --seq-len 64 --batch-size 4 --eval-every 10 --eval-batches 2
      --lr 3e-3 --warmup 2 --threads 1 --quiet)

# ---- 1. llama2.c model, --train-only ffn and attention ----------------------
"$FFN_BIN" train --init "$stories" --init-tokenizer "$tmp/tok512.bin" "${tune[@]}" --steps 30 \
    --train-only ffn --out "$tmp/ffn" >/dev/null || fail "fine-tune --train-only ffn failed"
loss_falls "$tmp/ffn/metrics.jsonl" "train-only ffn"
[[ -f "$tmp/ffn/tokenizer.bin" ]] || fail "the run directory has no tokenizer.bin"
cmp "$tmp/tok512.bin" "$tmp/ffn/tokenizer.bin" || fail "tokenizer.bin not copied as it is"
grep -q '"ffn_tokenizer": "llama2c"' "$tmp/ffn/config.json" || fail "config.json does not name the llama2c vocabulary"
# The export permutes q/k rows into rotate_half order; the run directory keeps
# the llama2.c order, so compare the run with an export of itself.
"$FFN_BIN" export "$tmp/ffn" --format hf --out "$tmp/ffn-hf" >/dev/null 2>&1 || fail "export of the run failed"
compare "$tmp/stories-hf/model.safetensors" "$tmp/ffn-hf/model.safetensors" ffn "train-only ffn"

# both load it and continue a prompt alike (greedy; generate adds no BOS)
"$FFN_BIN" generate "$tmp/ffn" --prompt 'ROMEO:' --no-prompt --steps 20 --temperature 0 > "$tmp/gen.txt" ||
    fail "ffn generate on the fine-tuned run failed"
"$FFN_BIN" run "$tmp/ffn" --prompt 'ROMEO:' --no-bos --steps 20 --temperature 0 > "$tmp/run.txt" ||
    fail "ffn run on the fine-tuned run failed"
[[ $(wc -c < "$tmp/gen.txt") -gt 6 ]] || fail "ffn generate printed nothing"
[[ "$(cat "$tmp/gen.txt")" == "$(cat "$tmp/run.txt")" ]] ||
    fail "generate and run continue differently: '$(cat "$tmp/gen.txt")' vs '$(cat "$tmp/run.txt")'"
echo "ok generate and run load the fine-tuned run, same greedy text: $(head -c 60 "$tmp/gen.txt" | tr '\n' ' ')"

"$FFN_BIN" train --init "$stories" --init-tokenizer "$tmp/tok512.bin" "${tune[@]}" --steps 30 \
    --train-only attention --out "$tmp/attn" >/dev/null || fail "fine-tune --train-only attention failed"
loss_falls "$tmp/attn/metrics.jsonl" "train-only attention"
"$FFN_BIN" export "$tmp/attn" --format hf --out "$tmp/attn-hf" >/dev/null 2>&1 || fail "export of the run failed"
compare "$tmp/stories-hf/model.safetensors" "$tmp/attn-hf/model.safetensors" attention "train-only attention"

# the tokenizer.bin beside the model is found without --init-tokenizer
mkdir "$tmp/beside"
cp "$stories" "$tmp/beside/stories260K.bin"
cp "$tmp/tok512.bin" "$tmp/beside/tokenizer.bin"
"$FFN_BIN" train --init "$tmp/beside/stories260K.bin" "${tune[@]}" --steps 2 --out "$tmp/beside-run" \
    >/dev/null || fail "the tokenizer.bin beside the model was not found"
echo "ok a tokenizer.bin beside the .bin is found"

# ---- 2. resume equals the uninterrupted run ---------------------------------
"$FFN_BIN" train --init "$stories" --init-tokenizer "$tmp/tok512.bin" "${tune[@]}" --steps 12 \
    --train-only ffn --out "$tmp/r-a" >/dev/null
"$FFN_BIN" train --init "$stories" --init-tokenizer "$tmp/tok512.bin" "${tune[@]}" --steps 12 \
    --stop-at 6 --train-only ffn --out "$tmp/r-b" >/dev/null
"$FFN_BIN" train --resume "$tmp/r-b" --quiet --threads 1 >/dev/null || fail "resume of a fine-tuned run failed"
cmp "$tmp/r-a/model.safetensors" "$tmp/r-b/model.safetensors" || fail "resume: model.safetensors differ"
diff <(python3 -c 'import json,sys; [print(json.loads(l)["step"], repr(json.loads(l)["loss"])) for l in open(sys.argv[1])]' "$tmp/r-a/metrics.jsonl") \
     <(python3 -c 'import json,sys; [print(json.loads(l)["step"], repr(json.loads(l)["loss"])) for l in open(sys.argv[1])]' "$tmp/r-b/metrics.jsonl") ||
    fail "resume: losses differ"
cmp "$tmp/tok512.bin" "$tmp/r-b/tokenizer.bin" || fail "resume: tokenizer.bin changed"
echo "ok resume: 6 + 6 steps equal 12 bitwise (weights and losses), train-only and vocabulary kept"
# a resume asking for another --train-only is refused, naming the flag
if "$FFN_BIN" train --resume "$tmp/r-a" --train-only all --steps 20 --quiet >/dev/null 2>"$tmp/err"; then
    fail "a resume with another --train-only was accepted"
fi
grep -q -- "--train-only" "$tmp/err" || fail "resume --train-only mismatch not named: $(cat "$tmp/err")"
echo "ok resume with another --train-only refused: $(head -c 150 "$tmp/err")"

# ---- 3. an ffn run directory and a Hugging Face directory as --init ---------
small=(--data "$tmp/data.txt" --hidden-size 32 --intermediate-size 48 --num-hidden-layers 2
       --num-attention-heads 4 --num-key-value-heads 2 --seq-len 32 --batch-size 4 --threads 1 --quiet)
"$FFN_BIN" train "${small[@]}" --steps 30 --out "$tmp/base" >/dev/null
tail -c 20000 "$FFN_SHARED/data/tinyshakespeare.txt" > "$tmp/data2.txt"
"$FFN_BIN" train --init "$tmp/base" --data "$tmp/data2.txt" --seq-len 32 --batch-size 4 --threads 1 \
    --quiet --steps 20 --train-only ffn --out "$tmp/base-ffn" >/dev/null || fail "--init of a run directory failed"
cmp "$tmp/base/tokenizer.txt" "$tmp/base-ffn/tokenizer.txt" || fail "the run directory's tokenizer.txt was not kept"
compare "$tmp/base/model.safetensors" "$tmp/base-ffn/model.safetensors" ffn "run directory, train-only ffn"
"$FFN_BIN" generate "$tmp/base-ffn" --prompt 'KING' --steps 10 --temperature 0 >/dev/null || fail "generate on it failed"

"$FFN_BIN" export "$tmp/base" --format hf --out "$tmp/base-hf" >/dev/null 2>&1 || fail "export --format hf failed"
"$FFN_BIN" train --init "$tmp/base-hf" --data "$tmp/data2.txt" --seq-len 32 --batch-size 4 --threads 1 \
    --quiet --steps 20 --train-only attention --out "$tmp/hf-attn" >/dev/null || fail "--init of an HF directory failed"
"$FFN_BIN" export "$tmp/hf-attn" --format hf --out "$tmp/hf-attn-hf" >/dev/null 2>&1
compare "$tmp/base-hf/model.safetensors" "$tmp/hf-attn-hf/model.safetensors" attention "HF directory, train-only attention"
"$FFN_BIN" train --init "$tmp/base-hf" --data "$tmp/data2.txt" --seq-len 32 --batch-size 4 --threads 1 \
    --quiet --steps 20 --out "$tmp/hf-all" >/dev/null || fail "--train-only all failed"
loss_falls "$tmp/hf-all/metrics.jsonl" "HF directory, train-only all"

# ---- 4. bad input --------------------------------------------------------------
expect_fail() { # rc pattern label -- args
    local want=$1 pat=$2 label=$3; shift 4
    local rc=0
    "$FFN_BIN" "$@" >/dev/null 2>"$tmp/err" || rc=$?
    [[ $rc -eq $want ]] || fail "$label: exit $rc, expected $want ($(cat "$tmp/err"))"
    grep -q -- "$pat" "$tmp/err" || fail "$label: message lacks '$pat': $(cat "$tmp/err")"
    echo "ok $label: $(head -c 160 "$tmp/err" | tr '\n' ' ')"
}
expect_fail 2 "--hidden-size" "--init with --hidden-size" -- \
    train --init "$tmp/base" --hidden-size 64 --data "$tmp/data.txt" --out "$tmp/x1"
expect_fail 2 "--train-only" "--train-only bogus" -- \
    train --init "$tmp/base" --train-only bogus --data "$tmp/data.txt" --out "$tmp/x2"
expect_fail 1 "$tmp/missing" "--init of a missing file" -- \
    train --init "$tmp/missing" --data "$tmp/data.txt" --out "$tmp/x3"
expect_fail 2 "--tokenizer" "--tokenizer with --init" -- \
    train --init "$tmp/base" --tokenizer word --data "$tmp/data.txt" --out "$tmp/x4"
expect_fail 1 "init-tokenizer" "a model without a vocabulary" -- \
    train --init "$stories" --data "$tmp/data.txt" --seq-len 64 --out "$tmp/x5"
expect_fail 1 "max_position_embeddings" "--seq-len beyond the model's context" -- \
    train --init "$tmp/base" --seq-len 64 --data "$tmp/data.txt" --out "$tmp/x6"
expect_fail 2 "exclude" "--init with --resume" -- \
    train --init "$tmp/base" --resume "$tmp/r-a" --out "$tmp/x7"
[[ ! -e "$tmp/x1" && ! -e "$tmp/x3" && ! -e "$tmp/x5" ]] || fail "a refused run left an output directory"
echo "all finetune checks passed"
