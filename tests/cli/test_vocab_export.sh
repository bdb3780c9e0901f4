#!/usr/bin/env bash
# test_vocab_export.sh -- every export and quantize carries the model's
# vocabulary: the same text encodes to the same ids in the source model, in
# ffn reading the export, and in the export's peer:
#   - GGUF (export --format gguf, quantize) of ffn's byte, char and word
#     vocabularies: ffn reads them back exactly (ffn.tokenizer); llama.cpp
#     (node-llama-cpp, tests/llamacpp) gives the same ids for byte and for
#     char texts whose characters are in the vocabulary; word is warned;
#   - GGUF of a GGUF (quantize / export of a GGUF input): its vocabulary
#     copied, not replaced by placeholders;
#   - llama2.c (export --format llama2c): ffn's vocabulary as tokenizer.txt
#     beside the .bin (llama2.c's run.c has no char/word encoding; ffn reads
#     it), a llama2.c tokenizer.bin copied as tokenizer.bin;
#   - Hugging Face directories (export --format hf): tokenizer.json read by
#     the JavaScript port of Hugging Face tokenizers (@lenml/tokenizers,
#     tests/tokenizers) to the same ids, English and Chinese, char and word;
# The npm packages are installed outside the tree (build/npm-llamacpp,
# build/npm-tokenizers, as test_llamacpp.sh and test_tokenize_ref.sh do);
# a failed install is a failure.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
root="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
lc_dir="${FFN_NPM_DIR:-$root/build/npm-llamacpp}"
tk_dir="${FFN_NPM_TOKENIZERS:-$root/build/npm-tokenizers}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok   $*"; }

command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm are needed (scripts/setup.sh test)"
mkdir -p "$lc_dir"
if ! cmp -s "$root/tests/llamacpp/package-lock.json" "$lc_dir/package-lock.json" ||
   [[ ! -d "$lc_dir/node_modules/node-llama-cpp" ]]; then
    cp "$root/tests/llamacpp/package.json" "$root/tests/llamacpp/package-lock.json" "$lc_dir/"
    (cd "$lc_dir" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --ignore-scripts --no-audit --no-fund \
        >"$tmp/npm.log" 2>&1) || { tail -n 20 "$tmp/npm.log"; fail "npm ci in $lc_dir"; }
fi
cp "$root/tests/llamacpp/tokenize.mjs" "$lc_dir/tokenize.mjs"
if ! cmp -s "$root/tests/tokenizers/package-lock.json" "$tk_dir/package-lock.json" ||
   [[ ! -d "$tk_dir/node_modules/@lenml/tokenizers" ]]; then
    rm -rf "$tk_dir"; mkdir -p "$tk_dir"
    cp "$root/tests/tokenizers/package.json" "$root/tests/tokenizers/package-lock.json" "$tk_dir/"
    (cd "$tk_dir" && npm ci --no-audit --no-fund --loglevel=error) || fail "npm ci in $tk_dir failed"
fi

ids() { "$FFN" tokenize --tokenizer "$1" --no-specials --ids-only --file "$2" | tr '\n' ' ' | sed 's/ $//'; }
train() { # NAME CORPUS TOKENIZER
    "$FFN" train --corpus "$2" --corpus-sentences 3000 --tokenizer "$3" --steps 2 --hidden-size 64 \
        --intermediate-size 96 --num-hidden-layers 1 --num-attention-heads 4 --seq-len 32 \
        --batch-size 2 --out "$tmp/$1" --quiet >/dev/null 2>&1 || fail "train $1"
}
# texts: in the vocabulary (the corpus's own words), with spaces of every
# kind, and with symbols outside it
printf 'Mary gave John the apple.  Then\nhe left.' >"$tmp/en1.txt"
printf 'Mary  gave John  the apple, then\n\n he left!\t "Yes."  \n' >"$tmp/en2.txt"
printf 'zq# ~~ Mary {x} \xc3\xa9t\xc3\xa9 \xe7\x8e\x8b' >"$tmp/en3.txt"
printf '小明把苹果递给了王。\n他很高兴，因为她来了。' >"$tmp/zh1.txt"
printf '小明 把 苹果 abc 😀 递给了' >"$tmp/zh2.txt"
en=("$tmp/en1.txt" "$tmp/en2.txt" "$tmp/en3.txt")
zh=("$tmp/zh1.txt" "$tmp/zh2.txt")

train char en char; train word en word; train byte en byte; train zhc zh char; train zhw zh word

# ---- GGUF: ffn reads back the source's ids, for every kind and text --------
for m in char word byte zhc zhw; do
    "$FFN" export "$tmp/$m" --out "$tmp/$m.gguf" --format gguf 2>"$tmp/err" || fail "export $m: $(cat "$tmp/err")"
    "$FFN" quantize "$tmp/$m" --dtype q8_0 --out "$tmp/$m-q8.gguf" 2>"$tmp/qerr" || fail "quantize $m"
    "$FFN" quantize "$tmp/$m.gguf" --dtype q8_0 --out "$tmp/$m-gq8.gguf" 2>"$tmp/gerr" || fail "quantize $m.gguf"
    grep -q "source GGUF's tokenizer, copied" "$tmp/gerr" || fail "quantize of a GGUF: $(cat "$tmp/gerr")"
    "$FFN" export "$tmp/$m.gguf" --out "$tmp/$m-gg.gguf" --format gguf 2>/dev/null || fail "export $m.gguf"
    for t in "${en[@]}" "${zh[@]}"; do
        want=$(ids "$tmp/$m" "$t")
        for g in "$m.gguf" "$m-q8.gguf" "$m-gq8.gguf" "$m-gg.gguf"; do
            got=$(ids "$tmp/$g" "$t")
            [[ "$got" == "$want" ]] || fail "$g: $(basename "$t"): ffn reads '$got', the source '$want'"
        done
    done
    ok "GGUF of the $m vocabulary (export, quantize, and both of the GGUF): ffn's ids unchanged"
done
grep -q "warning: a word vocabulary is not an encoding llama.cpp runs" <("$FFN" export "$tmp/word" \
    --out "$tmp/w2.gguf" --format gguf 2>&1) || fail "no warning for a word vocabulary in a GGUF"
ok "a word vocabulary in a GGUF is warned about (llama.cpp cannot encode it)"

# ---- GGUF: llama.cpp's ids, byte and char ------------------------------------
lc() { node "$lc_dir/tokenize.mjs" "$@" 2>/dev/null; }
for m in byte char; do
    for g in "$m.gguf" "$m-q8.gguf"; do
        # char: the texts whose characters are all in the vocabulary (no
        # <unk>, id 0); llama.cpp aborts on any other (warned at export)
        files=()
        for t in "${en[@]}" "${zh[@]}"; do
            [[ $m == byte || " $(ids "$tmp/$m" "$t") " != *" 0 "* ]] && files+=("$t")
        done
        [[ ${#files[@]} -ge 1 ]] || fail "no text in the $m vocabulary"
        mapfile -t got < <(lc "$tmp/$g" "${files[@]}")
        [[ ${#got[@]} -eq ${#files[@]} ]] || fail "llama.cpp on $g: ${#got[@]} lines for ${#files[@]} texts"
        for i in "${!files[@]}"; do
            want=$(ids "$tmp/$m" "${files[$i]}")
            [[ "${got[$i]}" == "$want" ]] ||
                fail "llama.cpp on $g: $(basename "${files[$i]}"): '${got[$i]}', ffn '$want'"
        done
    done
    ok "llama.cpp encodes to the source's ids: $m vocabulary, f32 and q8_0 GGUF"
done

# ---- Hugging Face directories: tokenizer.json in the reference -------------
for m in char word byte zhc zhw; do
    "$FFN" export "$tmp/$m" --out "$tmp/hf-$m" 2>/dev/null || fail "export --format hf $m"
    [[ -f "$tmp/hf-$m/tokenizer.json" && -f "$tmp/hf-$m/tokenizer_config.json" ]] ||
        fail "hf-$m: no tokenizer.json beside tokenizer.txt"
    files=("${en[@]}" "${zh[@]}")
    mapfile -t out < <(node "$root/tests/tokenizers/encode_json.mjs" "$tk_dir" "$tmp/hf-$m" "${files[@]}")
    for i in "${!files[@]}"; do
        want=$(ids "$tmp/$m" "${files[$i]}")
        [[ "${out[$((2 * i))]}" == "$want" ]] ||
            fail "Hugging Face on hf-$m/tokenizer.json: $(basename "${files[$i]}"): '${out[$((2 * i))]}', ffn '$want'"
        # and ffn reads the directory (tokenizer.txt first) to the same ids
        [[ "$(ids "$tmp/hf-$m" "${files[$i]}")" == "$want" ]] || fail "ffn on hf-$m"
    done
    # and ffn's commands read the directory by its tokenizer.txt, not the tokenizer.json
    [[ "$("$FFN" generate "$tmp/hf-$m" --prompt "Mary" --steps 4 --temperature 0 2>&1)" == \
       "$("$FFN" generate "$tmp/$m" --prompt "Mary" --steps 4 --temperature 0 2>&1)" ]] || fail "generate on hf-$m"
    ok "tokenizer.json of the $m vocabulary: Hugging Face's ids equal ffn's on ${#files[@]} texts"
done

# ---- llama2.c: ffn's vocabulary beside the .bin (tokenizer.txt) -----------
for m in char word; do
    mkdir -p "$tmp/l2c-$m"
    "$FFN" export "$tmp/$m" --out "$tmp/l2c-$m/model.bin" --format llama2c 2>"$tmp/err" || fail "export llama2c $m: $(cat "$tmp/err")"
    cmp -s "$tmp/l2c-$m/tokenizer.txt" "$tmp/$m/tokenizer.txt" || fail "llama2c export of $m: no tokenizer.txt beside the .bin"
    a=$("$FFN" run "$tmp/$m" --prompt "Mary gave John the" --steps 5 --temperature 0 2>/dev/null)
    b=$("$FFN" run "$tmp/l2c-$m/model.bin" --prompt "Mary gave John the" --steps 5 --temperature 0 2>/dev/null)
    [[ "$a" == "$b" ]] || fail "llama2c export of $m: ffn run differs: '$a' vs '$b'"
done
mkdir -p "$tmp/l2c-x" && echo "someone else's" >"$tmp/l2c-x/tokenizer.txt"
if "$FFN" export "$tmp/word" --out "$tmp/l2c-x/model.bin" --format llama2c 2>"$tmp/err"; then
    fail "llama2c export replaced another tokenizer.txt without --force"; fi
grep -q "exists with another vocabulary" "$tmp/err" || fail "llama2c export over a tokenizer.txt: $(cat "$tmp/err")"
[[ ! -e "$tmp/l2c-x/model.bin" ]] || fail "llama2c export wrote the .bin before refusing the vocabulary"
ok "llama2.c export: ffn's vocabulary beside the .bin (ffn run reads it), another one kept without --force"

# a GGUF ffn wrote, exported to Hugging Face: the vocabulary comes along
"$FFN" export "$tmp/zhw.gguf" --out "$tmp/hf-gg" 2>/dev/null || fail "export --format hf of a GGUF"
mapfile -t out < <(node "$root/tests/tokenizers/encode_json.mjs" "$tk_dir" "$tmp/hf-gg" "${zh[@]}")
[[ "${out[0]}" == "$(ids "$tmp/zhw" "${zh[0]}")" && "$(ids "$tmp/hf-gg" "${zh[1]}")" == "$(ids "$tmp/zhw" "${zh[1]}")" ]] ||
    fail "hf export of zhw.gguf: '${out[0]}'"
ok "a GGUF of ffn's vocabulary exported to Hugging Face keeps it (tokenizer.txt and tokenizer.json)"
# a BPE vocabulary (a Hugging Face directory's tokenizer.json): the GGUF
# keeps it whole for ffn (ffn.tokenizer_json), with a warning for llama.cpp
cp -r "$tmp/hf-word" "$tmp/hf-bpe"
rm -f "$tmp/hf-bpe/tokenizer.txt" "$tmp/hf-bpe/tokenizer_config.json"
cp "$root/tests/tokenizers/fixtures/gpt2_small.json" "$tmp/hf-bpe/tokenizer.json"
sed -i 's/"ffn_tokenizer_file": "tokenizer.txt",\{0,1\}//' "$tmp/hf-bpe/config.json"
"$FFN" export "$tmp/hf-bpe" --out "$tmp/bpe.gguf" --format gguf 2>"$tmp/err" || fail "export of a BPE model: $(cat "$tmp/err")"
grep -q "warning: the tokenizer.json is kept whole for ffn" "$tmp/err" || fail "no warning for a BPE vocabulary: $(cat "$tmp/err")"
for t in "${en[@]}" "${zh[@]}"; do
    [[ "$(ids "$tmp/hf-bpe" "$t")" == "$(ids "$tmp/bpe.gguf" "$t")" ]] || fail "bpe.gguf: $(basename "$t"): ffn's ids differ"
done
ok "a tokenizer.json (BPE) vocabulary in a GGUF: ffn's ids unchanged, llama.cpp warned about"
# ... and that GGUF exported to a Hugging Face directory: its BPE vocabulary
# is not converted, and the export says so (never a silent loss)
"$FFN" export "$tmp/bpe.gguf" --out "$tmp/bpe-hf" --format hf 2>"$tmp/err" || fail "export of bpe.gguf to hf: $(cat "$tmp/err")"
grep -q "warning: the .* vocabulary of .* is not converted to a tokenizer.json" "$tmp/err" ||
    fail "export of a BPE GGUF to hf: no warning: $(cat "$tmp/err")"
ok "a BPE GGUF exported to Hugging Face: the vocabulary it cannot convert is warned about"
grep -q "warning: llama.cpp encodes a text whose characters are all in the char vocabulary" \
    <("$FFN" export "$tmp/char" --out "$tmp/c2.gguf" --format gguf 2>&1) || fail "no warning for char"
ok "a char vocabulary in a GGUF is warned about (llama.cpp aborts on characters outside it)"
