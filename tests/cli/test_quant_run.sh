#!/usr/bin/env bash
# test_quant_run.sh -- `ffn run MODEL --quantize TYPE` (low-precision weights
# in memory, include/ffn/quant.h) on stories260K (D 64, FFN rows of 172):
#   - --help explains the flags; a type ffn does not compute with is a usage
#     error (exit 2) naming the flag;
#   - --info counts the tensors per type: under q4_0 the 5 down_proj (rows
#     of 172) stay f16, the other 31 matrices are q4_0; under q4_K (rows of
#     64, no whole 256-blocks) they fall back to q5_0 (llama.cpp's rule);
#   - one fallback rule: `ffn run F32.gguf --quantize T` gives the logits of
#     running the file `ffn quantize --dtype T` wrote, bit for bit (q4_K,
#     q5_K, q6_K, q3_K, iq4_xs); --quantize-embed sets
#     the embedding's type; the weights take fewer bytes;
#   - the logits of every type stay near fp32's, relative to the largest
#     logit (f16 1e-2, bf16 5e-2, q8_0/q6_K 0.1, q4_K 0.5: its rows of 64
#     are q5_0, 0.36 measured), and q4_0's differ
#     from fp32's (the conversion happened); the same run twice gives the
#     same bytes;
#   - the KV-cached steps give the batched forward's logits: the tokens a
#     q4_0 run fed, run again as one prompt, give its rows within 1e-4.
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

# ---- help and bad values ----
"$FFN" run --help >"$tmp/h" && grep -q -- "--quantize " "$tmp/h" && grep -q -- "--quantize-embed" "$tmp/h" &&
    grep -q "norms and biases stay fp32" "$tmp/h" && ok "run --help explains --quantize" || bad "run --help: --quantize"
rc=0
"$FFN" run "$MODEL" --ids 1 --quantize iq2_xxs >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--quantize" "$tmp/err" && grep -q "q4_K" "$tmp/err" &&
    ok "--quantize iq2_xxs: exit 2, '$(head -c 120 "$tmp/err")'" || bad "--quantize iq2_xxs: exit $rc, $(cat "$tmp/err")"

# ---- what --info reports ----
info() { "$FFN" run "$MODEL" --ids 1 --steps 1 --temperature 0 --info "$@" 2>&1 >/dev/null | grep "quantized in memory"; }
i=$(info --quantize q4_0)
[[ "$i" == *"tensors f32 11 f16 5 q4_0 31"* ]] && ok "q4_0: $i" || bad "q4_0 types: '$i'"
i=$(info --quantize q4_K)
[[ "$i" == *"tensors f32 11 f16 5 q5_0 31"* ]] && ok "q4_K falls back to q5_0 (rows of 64): $i" || bad "q4_K types: '$i'"
i=$(info --quantize q4_0 --quantize-embed q8_0)
[[ "$i" == *"q4_0 30 q8_0 1"* ]] && ok "--quantize-embed q8_0: $i" || bad "--quantize-embed: '$i'"
i=$(info --quantize q4_0)
read -r now was < <(sed -E 's/.*weights ([0-9]+) bytes \(were ([0-9]+)\).*/\1 \2/' <<<"$i")
(( now * 4 < was )) && ok "q4_0 weights $now bytes, fp32 $was" || bad "weight bytes $now vs $was"

# ---- logits against fp32 ----
ids="1 403 407 290 176 17"
for q in f32 f16 bf16 q8_0 q4_0 q4_K q6_K; do
    "$FFN" run "$MODEL" --ids "$ids" --steps 12 --temperature 0 --quantize "$q" \
        --dump-logits "$tmp/$q.safetensors" >/dev/null
done
"$FFN" run "$MODEL" --ids "$ids" --steps 12 --temperature 0 --quantize q4_0 \
    --dump-logits "$tmp/q4_0.again.safetensors" >/dev/null
cmp -s "$tmp/q4_0.safetensors" "$tmp/q4_0.again.safetensors" && ok "q4_0 twice: the same bytes" ||
    bad "q4_0 runs differ"
# the tokens the q4_0 run fed, as one prompt: the batched forward
seq=$("$PY" - "$tmp/q4_0.safetensors" <<'EOF'
import sys; sys.path.insert(0, "tests/parity")
from ffn_testlib import read_safetensors
print(" ".join(str(int(t)) for t in read_safetensors(sys.argv[1])["tokens"]))
EOF
)
"$FFN" run "$MODEL" --ids "$seq" --steps 0 --quantize q4_0 --dump-logits "$tmp/q4_0.batch.safetensors" >/dev/null
if "$PY" - "$tmp" <<'EOF'
import sys; sys.path.insert(0, "tests/parity")
import numpy as np
from ffn_testlib import read_safetensors
d = sys.argv[1]
L = lambda q: read_safetensors(f"{d}/{q}.safetensors")["logits"]
ref = L("f32")[:6]
bad = 0
for q, tol in [("f16", 1e-2), ("bf16", 5e-2), ("q8_0", 0.1), ("q4_K", 0.5), ("q6_K", 0.1)]:
    r = np.abs(L(q)[:6] - ref).max() / np.abs(ref).max()
    print(f"  {q}: prompt logits vs fp32 {r:.2e} (tol {tol:g})")
    bad += not r <= tol
r = np.abs(L("q4_0")[:6] - ref).max() / np.abs(ref).max()
print(f"  q4_0: vs fp32 {r:.2e} (expected > 1e-3)")
bad += not r > 1e-3
a, b = L("q4_0"), L("q4_0.batch")
r = np.abs(a - b).max() / np.abs(b).max()
print(f"  q4_0: KV-cached rows vs one batched forward {r:.2e} (tol 1e-4)")
bad += not (a.shape == b.shape and r <= 1e-4)
sys.exit(1 if bad else 0)
EOF
then ok "logits: every type near fp32, q4_0 differs, KV cache = batch"; else bad "logits (see above)"; fi

# ---- the in-memory fallback is the file writer's ----
"$FFN" export "$MODEL" --format gguf --out "$tmp/f32.gguf" 2>/dev/null
for q in q4_K q5_K q6_K q3_K iq4_xs; do
    "$FFN" quantize "$MODEL" --dtype "$q" --out "$tmp/$q.gguf" 2>/dev/null
    "$FFN" run "$tmp/f32.gguf" --ids "$ids" --steps 4 --temperature 0 --quantize "$q" \
        --dump-logits "$tmp/mem.$q.st" >/dev/null
    "$FFN" run "$tmp/$q.gguf" --ids "$ids" --steps 4 --temperature 0 --dump-logits "$tmp/file.$q.st" >/dev/null
    cmp -s "$tmp/mem.$q.st" "$tmp/file.$q.st" && ok "$q: --quantize in memory = ffn quantize's file, bit for bit" ||
        bad "$q: --quantize in memory differs from ffn quantize --dtype $q's file"
done

[[ $fail -eq 0 ]] && echo "test_quant_run: all passed" || { echo "test_quant_run: $fail failed"; exit 1; }
