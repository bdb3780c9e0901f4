#!/usr/bin/env bash
# test_model_open.sh -- one way to read every model: a GGUF file ffn wrote
# (its vocabulary inside) is a MODEL for run, generate, tokenize, inspect,
# eval, trace, edit and train --init alike; a file of the wrong kind is
# named by its content: a text file given as a model, a GGUF given as
# training text.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/xdg"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok   $*"; }

"$FFN" train --corpus en --corpus-sentences 2000 --tokenizer word --steps 2 --hidden-size 64 \
    --intermediate-size 96 --num-hidden-layers 2 --num-attention-heads 4 --seq-len 32 --batch-size 2 \
    --out "$tmp/run" --quiet >/dev/null 2>&1 || fail "train"
"$FFN" export "$tmp/run" --out "$tmp/m.gguf" --format gguf 2>/dev/null || fail "export gguf"
P="Mary gave John the"
for c in "run|--prompt|$P|--steps|3|--temperature|0" "generate|--prompt|$P|--steps|3|--temperature|0" \
         "inspect|--prompt|$P" "trace|--prompt|$P|--subject|Mary"; do
    IFS='|' read -r -a args <<<"$c"
    a=$("$FFN" ${args[0]} "$tmp/run" "${args[@]:1}" 2>&1) || fail "${args[0]} on the run directory: $a"
    b=$("$FFN" ${args[0]} "$tmp/m.gguf" "${args[@]:1}" 2>&1) || fail "${args[0]} on the GGUF: $b"
    [[ "${a//$tmp\/run/M}" == "${b//$tmp\/m.gguf/M}" ]] || [[ ${args[0]} == trace || ${args[0]} == inspect ]] ||
        fail "${args[0]}: the GGUF and the run directory differ:\n$a\n---\n$b"
    grep -q "unk" <<<"$b" && [[ ${args[0]} == run || ${args[0]} == generate ]] && fail "${args[0]} on the GGUF reads <unk>: $b"
    ok "${args[0]} reads the GGUF's vocabulary"
done
printf 'Mary gave John the apple. John gave Mary the book.\n%.0s' {1..20} >"$tmp/text.txt"
"$FFN" eval "$tmp/m.gguf" --data "$tmp/text.txt" >/dev/null 2>&1 || fail "eval on the GGUF"
ok "eval reads the GGUF's vocabulary"
"$FFN" edit "$tmp/m.gguf" --prompt "$P" --subject Mary --target John --layer 0 --samples 100 \
    --data "$tmp/text.txt" --out "$tmp/ed" >/dev/null 2>"$tmp/err" || fail "edit on the GGUF: $(cat "$tmp/err")"
[[ -f "$tmp/ed/tokenizer.txt" ]] || fail "the edited GGUF model lost its vocabulary"
ok "edit reads the GGUF's vocabulary and keeps it in its output"
"$FFN" train --init "$tmp/m.gguf" --data "$tmp/text.txt" --steps 1 --seq-len 16 --out "$tmp/ft" --quiet \
    >/dev/null 2>"$tmp/err" || fail "train --init GGUF: $(cat "$tmp/err")"
ok "train --init reads the GGUF's vocabulary"
# wrong kinds, named by content
for c in "run|--prompt|$P" "inspect|--prompt|$P" "trace|--prompt|$P|--subject|Mary" \
         "edit|--prompt|$P|--subject|Mary|--target|John|--out|$tmp/x" "eval|--data|$tmp/text.txt" \
         "export|--out|$tmp/x2" "quantize|--dtype|q8_0|--out|$tmp/x3"; do
    IFS='|' read -r -a args <<<"$c"
    if "$FFN" ${args[0]} "$tmp/text.txt" "${args[@]:1}" >/dev/null 2>"$tmp/err"; then
        fail "${args[0]} accepted a text file as MODEL"; fi
    grep -q "text.txt is a text file, not a model" "$tmp/err" || fail "${args[0]} on a text file: $(cat "$tmp/err")"
done
ok "a text file given as MODEL is named as one"
if "$FFN" train --data "$tmp/m.gguf" --steps 1 --out "$tmp/y" >/dev/null 2>"$tmp/err"; then fail "train --data GGUF"; fi
grep -q "is a GGUF file, not text to train on; a GGUF model .*--init" "$tmp/err" || fail "train --data GGUF: $(cat "$tmp/err")"
ok "a GGUF given as --data is named as a model"
echo "test_model_open: ok"
