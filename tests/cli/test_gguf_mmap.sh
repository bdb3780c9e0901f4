#!/usr/bin/env bash
# test_gguf_mmap.sh -- a q4_0 GGUF of a few hundred MB runs from its mapped
# file: the peak resident memory of `ffn run` (VmHWM, printed by --json as
# peak_rss_bytes) is at most 1.15 × the file size, so no fp32 (or second)
# copy of its matrices is ever made.  The file is random weights written by
# bench/gguf_random.c (built here against build/libffn.a): Llama-shaped,
# D 2048, F 5632, 8 layers, 32/8 heads, vocab 32000, tied head (~240 MB).
# Also: --json's generated ids equal --emit ids; `ffn bench model --json`
# runs on it with the same bound and positive speeds; --help explains;
# `ffn generate` on the GGUF prints what `ffn run --prompt` does.
# (Bitwise logits of the mapped and the copied path: tests/unit/test_gguf_mmap.c.)
# Under ASan (asan-cli) the shadow memory of every byte read is resident
# too, so the bound is not checked there; everything else is.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

asan=0
case "$(ldd "$FFN" 2>/dev/null)" in *libasan*) asan=1 ;; esac

cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" "$ROOT/bench/gguf_random.c" \
   "$ROOT/build/libffn.a" -ldnnl -fopenmp -lm -lpthread -lpcre2-8 -o "$tmp/gguf_random"
G="$tmp/m_q4_0.gguf"
"$tmp/gguf_random" "$G" q4_0 2048 5632 8 32 8 32000 0 0 1 7
size=$(stat -c %s "$G")
ok "wrote a q4_0 GGUF of $size bytes"

# field NAME JSON: a number of a flat JSON object
field() { "$PY" -c 'import json,sys; print(json.loads(sys.argv[2])[sys.argv[1]])' "$1" "$2"; }

out=$(FFN_NUM_THREADS=2 "$FFN" run "$G" --ids "5 17 300 9" --steps 4 --temperature 0 --json)
ids=$(FFN_NUM_THREADS=2 "$FFN" run "$G" --ids "5 17 300 9" --steps 4 --temperature 0 --emit ids)
rss=$(field peak_rss_bytes "$out")
fb=$(field file_bytes "$out")
gen=$("$PY" -c 'import json,sys; print(" ".join(map(str, json.loads(sys.argv[1])["generated"])))' "$out")
[[ "$fb" == "$size" ]] && ok "file_bytes $fb" || bad "file_bytes $fb, the file has $size"
[[ "$gen" == "$ids" ]] && ok "--json generated [$gen] = --emit ids" || bad "--json generated [$gen], --emit ids [$ids]"
ratio=$("$PY" -c "print(f'{$rss / $size:.3f}')")
if [[ $asan == 1 ]]; then
    ok "peak RSS $rss bytes = $ratio × the file (bound 1.15 not checked under ASan)"
elif "$PY" -c "import sys; sys.exit(0 if $rss <= 1.15 * $size else 1)"; then
    ok "ffn run: peak RSS $rss bytes = $ratio × the file (<= 1.15)"
else
    bad "ffn run: peak RSS $rss bytes = $ratio × the file $size (expected <= 1.15)"
fi

b=$(FFN_NUM_THREADS=2 "$FFN" bench model "$G" --prompt-tokens 16 --context 8 --gen 4 --repeats 1 --json)
for k in prompt_tok_s decode_tok_s decode_gbps bytes_per_token; do
    v=$(field $k "$b")
    "$PY" -c "import sys; sys.exit(0 if $v > 0 else 1)" && ok "bench model $k $v" || bad "bench model $k $v"
done
brss=$(field peak_rss_bytes "$b")
wb=$(field weight_bytes_per_token "$b")
# a tied head: every weight byte but the norms is read once per token
"$PY" -c "import sys; sys.exit(0 if 0.95 * $size < $wb <= $size else 1)" &&
    ok "bench model: $wb weight bytes per token (file $size)" ||
    bad "bench model: $wb weight bytes per token, file $size"
if [[ $asan == 0 ]]; then
    "$PY" -c "import sys; sys.exit(0 if $brss <= 1.15 * $size else 1)" &&
        ok "bench model: peak RSS $brss <= 1.15 × file" || bad "bench model: peak RSS $brss > 1.15 × $size"
fi
"$FFN" bench model --help | grep -q "decode" && ok "bench model --help" || bad "bench model --help"
if "$FFN" bench model "$G" --prompt-tokens 4000 >/dev/null 2>"$tmp/err"; then
    bad "--prompt-tokens past the context accepted"
elif grep -q "context is 2048 tokens" "$tmp/err"; then
    ok "--prompt-tokens past the context: $(head -c 120 "$tmp/err")"
else
    bad "--prompt-tokens past the context: $(cat "$tmp/err")"
fi

# ffn generate on a GGUF: its vocabulary, the same tokens as ffn run --prompt
g1=$(FFN_NUM_THREADS=2 "$FFN" generate "$G" --prompt "ab" --steps 4 --temperature 0 --no-prompt | od -An -tx1 | tr -d " \n")
g2=$(FFN_NUM_THREADS=2 "$FFN" run "$G" --prompt "ab" --steps 4 --temperature 0 --emit text | od -An -tx1 | tr -d " \n")
n=$(FFN_NUM_THREADS=2 "$FFN" run "$G" --prompt "ab" --steps 4 --temperature 0 --emit ids | wc -w)
[[ "$g1" == "$g2" && $n == 4 ]] && ok "ffn generate GGUF = ffn run --prompt (bytes$g1)" ||
    bad "ffn generate GGUF [$g1] vs ffn run --prompt [$g2] ($n ids)"
"$FFN" generate --help | grep -q "GGUF" && ok "generate --help names GGUF" || bad "generate --help"

[[ $fail == 0 ]] && echo "all ok" || { echo "$fail failed"; exit 1; }
