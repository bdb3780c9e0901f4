#!/usr/bin/env bash
# test_values.sh -- one rule for the values of a GGUF's tensors, whatever
# their type and whichever command loads them: a NaN or infinite element
# (f16, bf16) or block scale (q8_0, q4_0, q4_K's two, q6_K) is refused at
# load by run, eval, generate, inspect and quantize alike, with one message
# naming the file, the tensor, the type and the first bad element; and
# `--json` writes a non-finite result as null (with a reason), never as
# the `nan` JSON has no word for.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
SHARED="${FFN_SHARED:-../shared}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

# expect_fail PATTERN CMD...: exit 1 within 60 s, stderr matching the ERE PATTERN
expect_fail() {
    local pat="$1"; shift
    local rc=0
    timeout 60 "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -eq 1 ]] && grep -Eq -- "$pat" "$tmp/err"; then
        ok "exit 1: $(head -c 220 "$tmp/err" | tr '\n' ' ')"
    else
        bad "expected exit 1 and /$pat/ from: $*; got exit $rc: $(head -c 600 "$tmp/err")"
    fi
}

# ---- a small model with a vocabulary, in every type ----
head -c 20000 "$SHARED/data/tinyshakespeare.txt" >"$tmp/data.txt"
head -c 600 "$tmp/data.txt" >"$tmp/eval.txt"
"$FFN" train --data "$tmp/data.txt" --steps 1 --hidden-size 256 --intermediate-size 256 --num-hidden-layers 2 \
    --num-attention-heads 4 --seq-len 32 --batch-size 2 --tokenizer char --out "$tmp/run" --quiet >/dev/null 2>&1 ||
    bad "train"
"$FFN" export "$tmp/run" --format gguf --out "$tmp/f32.gguf" 2>/dev/null || bad "export"
for t in f16 bf16 q8_0 q4_0 q4_K q6_K; do
    "$FFN" quantize "$tmp/f32.gguf" --dtype $t --out "$tmp/$t.gguf" 2>/dev/null || bad "quantize $t"
done
"$FFN" run "$tmp/q8_0.gguf" --ids "1 2 3" --steps 2 --temperature 0 >/dev/null && ok "the clean q8_0 file runs" ||
    bad "clean q8_0 run"

# ---- poisoned: blk.1.ffn_up.weight has ne {256, 256}: rows of 256 ----
E() { "$PY" tests/cli/gguf_edit.py "$@"; }
W=blk.1.ffn_up.weight
# element 300 (row 1, column 44) of the fp16 / bf16 matrices
E "$tmp/f16.gguf" "$tmp/bad-f16.gguf" set-u16 $W 600 7e00    # NaN
E "$tmp/bf16.gguf" "$tmp/bad-bf16.gguf" set-u16 $W 600 ff80  # -Inf
# the scale of block 9 (elements 288..319, row 1); q4_K / q6_K: block 1 (elements 256..511)
E "$tmp/q8_0.gguf" "$tmp/bad-q8_0.gguf" set-u16 $W $((9 * 34)) 7c00        # +Inf
E "$tmp/q4_0.gguf" "$tmp/bad-q4_0.gguf" set-u16 $W $((9 * 18)) 7e01        # NaN
E "$tmp/q4_K.gguf" "$tmp/bad-q4_K.gguf" set-u16 $W $((144 + 2)) fc00       # dmin -Inf
E "$tmp/q6_K.gguf" "$tmp/bad-q6_K.gguf" set-u16 $W $((210 + 208)) 7c00     # d +Inf
declare -A want=(
    [f16]="tensor $W \\(f16\\): element 300 \\(row 1, column 44\\) is -?nan: expected a finite value"
    [bf16]="tensor $W \\(bf16\\): element 300 \\(row 1, column 44\\) is -inf: expected a finite value"
    [q8_0]="tensor $W \\(q8_0\\): the scale of block 9 \\(elements 288..319, row 1\\) is inf: expected a finite value"
    [q4_0]="tensor $W \\(q4_0\\): the scale of block 9 \\(elements 288..319, row 1\\) is -?nan: expected"
    [q4_K]="tensor $W \\(q4_K\\): the second scale of block 1 \\(elements 256..511, row 1\\) is -inf: expected"
    [q6_K]="tensor $W \\(q6_K\\): the scale of block 1 \\(elements 256..511, row 1\\) is inf: expected"
)
for t in f16 bf16 q8_0 q4_0 q4_K q6_K; do
    f="$tmp/bad-$t.gguf"
    pat="bad-$t.gguf: ${want[$t]}"
    expect_fail "$pat" "$FFN" run "$f" --ids "1 2 3" --steps 1 --temperature 0
done
# every command that loads a model, one rule (q8_0 and f16 for each)
for t in q8_0 f16; do
    f="$tmp/bad-$t.gguf"
    pat="bad-$t.gguf: ${want[$t]}"
    expect_fail "$pat" "$FFN" eval "$f" --data "$tmp/eval.txt" --tokenizer "$tmp/run/tokenizer.txt"
    expect_fail "$pat" "$FFN" generate "$f" --prompt "To be" --steps 2
    expect_fail "$pat" "$FFN" inspect "$f" --ids "1 2 3" --top 2
    expect_fail "$pat" "$FFN" quantize "$f" --dtype q4_0 --out "$tmp/never.gguf"
    expect_fail "$pat" "$FFN" export "$f" --format gguf --out "$tmp/never.gguf"
done
[[ -e "$tmp/never.gguf" ]] && bad "a refused model was written" || ok "no output from a refused model"

# ---- --json: a non-finite result is null, with a reason ----
# a model whose logits overflow: the embedding (tied head) scaled by 1e37
"$PY" - "$tmp/run" "$tmp/huge" <<'PY' || bad "make the overflowing model"
import os, shutil, sys
sys.path.insert(0, "tests/parity")
import ffn_testlib as tl
src, dst = sys.argv[1:3]
shutil.copytree(src, dst)
w = tl.read_safetensors(os.path.join(src, "model.safetensors"))
w["model.embed_tokens.weight"] = w["model.embed_tokens.weight"] * 1e37
if "lm_head.weight" in w: w["lm_head.weight"] = w["lm_head.weight"] * 1e37
tl.write_safetensors(os.path.join(dst, "model.safetensors"), w)
PY
rc=0
"$FFN" eval "$tmp/huge" --data "$tmp/eval.txt" --window 16 --json >"$tmp/e.json" 2>"$tmp/err" || rc=$?
"$PY" - "$tmp/e.json" <<'PY' && ok "eval --json: a non-finite ppl is null with a reason (exit $rc)" || bad "eval --json: $(cat "$tmp/e.json" "$tmp/err")"
import json, sys
text = open(sys.argv[1]).read()
d = json.loads(text, parse_constant=lambda c: sys.exit("not JSON: " + c))
assert d["ppl"] is None and "not finite" in d["ppl_reason"], d
assert (d["nll"] is None) == ("nll_reason" in d), d
PY
# a finite run still prints numbers
"$FFN" eval "$tmp/run" --data "$tmp/eval.txt" --window 16 --json >"$tmp/e2.json"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if isinstance(d["ppl"], float) and "ppl_reason" not in d else 1)' \
    "$tmp/e2.json" && ok "eval --json: a finite ppl is a number" || bad "eval --json finite: $(cat "$tmp/e2.json")"

if ((fail)); then echo "$fail failed"; exit 1; fi
echo "all passed"
