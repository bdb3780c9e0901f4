#!/usr/bin/env bash
# test_tokenize.sh -- `ffn tokenize` / `ffn detokenize` on the small
# tokenizer.json fixtures of tests/tokenizers/fixtures (no network): --help,
# usage errors, merges in both file forms, added tokens, the template,
# decode(encode(x)) == x on every text (also bytes that are not UTF-8),
# SentencePiece byte fallback, the same tokenizer as a GGUF, a model
# directory, a llama2.c tokenizer.bin, and each bad file refused with a
# message naming the file and the field, nothing on stdout.
# (Exact ids against the reference implementation: test_tokenize_ref.sh.)
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
root="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
fx="$root/tests/tokenizers/fixtures"
texts="$root/tests/tokenizers/texts"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# --help explains, exit 0; both commands listed by ffn --help
"$FFN" tokenize --help >"$tmp/help"
for w in --tokenizer --text --file --ids-only --json --no-specials tokenizer.json .gguf \
         tokenizer.bin add_special_tokens "not UTF-8" U+FFFD "Exit status" "may repeat" "one line per"; do
    grep -q -- "$w" "$tmp/help" || fail "tokenize --help does not mention '$w'"
done
"$FFN" detokenize --help >"$tmp/help"
for w in --tokenizer --ids --file --skip-specials --json --null "may repeat" U+2581; do
    grep -q -- "$w" "$tmp/help" || fail "detokenize --help does not mention '$w'"
done
"$FFN" --help | grep -q "tokenize" || fail "ffn --help does not list tokenize"
"$FFN" --help | grep -q "detokenize" || fail "ffn --help does not list detokenize"

# bad usage: exit 2 with a message
set +e
"$FFN" tokenize --text hi 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--tokenizer" "$tmp/err" || fail "no --tokenizer: rc $rc $(cat "$tmp/err")"
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--text" "$tmp/err" || fail "no input: rc $rc"
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --text a --file "$texts/prose.txt" 2>/dev/null; rc=$?
[[ $rc -eq 2 ]] || fail "--text and --file together: rc $rc"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --ids "1 x" 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--ids" "$tmp/err" || fail "bad --ids: rc $rc"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --ids "99999" 2>"$tmp/err"; rc=$?
[[ $rc -ne 0 ]] || fail "an id outside the vocabulary was accepted"
set -e

tok() { "$FFN" tokenize --tokenizer "$@" --ids-only; }
# every .txt text as repeated --file (one line of ids each, in order); and
# same_lines A B WHAT: the two such outputs equal, else the first text
# whose line differs is named
txt=("$texts"/*.txt)
targs=(); for f in "${txt[@]}"; do targs+=(--file "$f"); done
same_lines() {
    cmp -s "$1" "$2" && return 0
    local n
    n=$(cmp "$1" "$2" 2>&1 | sed -n 's/.* line \([0-9]*\).*/\1/p' || true)
    fail "$3 on ${txt[$((${n:-1} - 1))]:-?}"
}

# GPT-2-style byte-level BPE, merges by rank.  By hand from the fixture's
# merges (ranks: " t" 0, "he" 1, " the" 2, "in" 3, "ing" 4, " a" 5):
# "the" -> t he (" the" needs the space); " thing" -> " t" h ing.
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --text "the thing" >"$tmp/lines"
[[ "$(cut -f2 "$tmp/lines" | tr '\n' ' ')" == "t he Ġt h ing " ]] || fail "the thing -> $(cut -f2 "$tmp/lines" | tr '\n' ' ')"
[[ $(tok "$fx/gpt2_small.json" --text " the" | wc -w) -eq 1 ]] || fail "' the' is not one token after its two merges"
# the ["a", "b"] form of merges gives the same ids as the "a b" form
tok "$fx/gpt2_small.json" "${targs[@]}" >"$tmp/ids_str"
tok "$fx/gpt2_small_pairs.json" "${targs[@]}" >"$tmp/ids_pairs"
same_lines "$tmp/ids_str" "$tmp/ids_pairs" "merges as pairs differ from merges as strings"
# added tokens are matched in the text as themselves
ids=$(tok "$fx/gpt2_small.json" --text "a<|endoftext|>b")
[[ "$ids" == "97 262 98" ]] || fail "added token: $ids"

# decode(encode(x)) == x, byte for byte, for every text (also invalid
# UTF-8): below, with several inputs
tok "$fx/gpt2_small.json" --file "$texts/prose.txt" >"$tmp/ids"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --file "$tmp/ids" >"$tmp/back"
cmp -s "$texts/prose.txt" "$tmp/back" || fail "byte-level round trip of prose.txt"

# --json: one object, ids agree with --ids-only, bytes are the decoded pieces
# (ASCII text: no piece splits a character)
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --file "$texts/en_corpus.txt" --json >"$tmp/j"
/usr/bin/python3 - "$tmp/j" "$(tok "$fx/gpt2_small.json" --file "$texts/en_corpus.txt")" "$texts/en_corpus.txt" <<'PY' || fail "--json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "bpe-byte-level", d["kind"]
assert d["ids"] == [int(x) for x in sys.argv[2].split()]
assert d["n_tokens"] == len(d["ids"]) == len(d["tokens"]) == len(d["bytes"])
assert "".join(d["bytes"]) == open(sys.argv[3], encoding="utf-8").read()
PY

# several inputs in one process: one line per input, in order, each the
# single-input output (--ids-only, --json: checked on three of the texts,
# one of them not UTF-8); detokenize --json / --null
all=("$texts"/*)
args=(); for f in "${all[@]}"; do args+=(--file "$f"); done
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" "${args[@]}" --ids-only >"$tmp/many"
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" "${args[@]}" --json >"$tmp/many.json"
[[ $(wc -l <"$tmp/many") -eq ${#all[@]} && $(wc -l <"$tmp/many.json") -eq ${#all[@]} ]] ||
    fail "several --file: $(wc -l <"$tmp/many") lines for ${#all[@]} inputs"
dargs=()
for i in "${!all[@]}"; do
    f=${all[$i]}
    sed -n "$((i + 1))p" "$tmp/many" >"$tmp/ids_$i"
    dargs+=(--file "$tmp/ids_$i")
    [[ $i -eq 0 || $i -eq $((${#all[@]} - 1)) || $f == *.bin ]] || continue
    [[ "$(cat "$tmp/ids_$i")" == "$(tok "$fx/gpt2_small.json" --file "$f")" ]] ||
        fail "several --file: line $((i + 1)) is not the ids of $(basename "$f") alone"
    [[ "$(sed -n "$((i + 1))p" "$tmp/many.json")" == "$("$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --file "$f" --json)" ]] ||
        fail "several --file --json: line $((i + 1)) is not the object of $(basename "$f") alone"
done
[[ "$(tok "$fx/gpt2_small.json" --text "the thing" --text "" --text "a<|endoftext|>b")" == \
   "$(printf '116 257 256 104 260\n\n97 262 98')" ]] || fail "several --text (one empty)"
# decode(encode(x)) == x for every text, in one detokenize: a NUL after each
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" "${dargs[@]}" --null >"$tmp/back0"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" "${dargs[@]}" --json >"$tmp/back.json"
/usr/bin/python3 - "$tmp/back0" "$tmp/back.json" "${all[@]}" <<'PY' || fail "several detokenize inputs"
import json, sys
parts = open(sys.argv[1], "rb").read().split(b"\0")
files = sys.argv[3:]
assert len(parts) == len(files) + 1 and parts[-1] == b"", (len(parts), len(files))
lines = open(sys.argv[2], "rb").read().split(b"\n")
assert len(lines) == len(files) + 1 and lines[-1] == b""
for f, p, l in zip(files, parts, lines):
    b = open(f, "rb").read()
    assert p == b, "--null: %s does not come back byte for byte" % f
    try:
        assert json.loads(l)["text"] == b.decode("utf-8"), "--json: " + f
    except UnicodeDecodeError:
        pass  # U+FFFD per bad byte, as the single form (checked below)
PY
for i in "${!all[@]}"; do
    [[ ${all[$i]} == *.bin ]] || continue
    [[ "$(sed -n "$((i + 1))p" "$tmp/back.json")" == "$("$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --file "$tmp/ids_$i" --json)" ]] ||
        fail "several detokenize --json: $(basename "${all[$i]}") is not its object alone"
done
[[ "$("$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --ids "116 257" --ids "" --ids "97" --json)" == \
   "$(printf '{"text": "the"}\n{"text": ""}\n{"text": "a"}')" ]] || fail "several --ids"
# --stats names each input
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --text a --text bc --ids-only --stats 2>"$tmp/err" >/dev/null
grep -q -- "--text #1: 1 bytes" "$tmp/err" && grep -q -- "--text #2: 2 bytes" "$tmp/err" || fail "--stats: $(cat "$tmp/err")"
# errors: the bad input named, nothing on stdout
set +e
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --file "$texts/prose.txt" --file "$tmp/nope" --ids-only >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc -eq 1 && ! -s "$tmp/out" ]] && grep -q "$tmp/nope" "$tmp/err" || fail "unreadable second --file: rc $rc $(cat "$tmp/err")"
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --text a --text b >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 && ! -s "$tmp/out" ]] && grep -q -- "--ids-only or --json" "$tmp/err" || fail "several inputs, one token a line: rc $rc $(cat "$tmp/err")"
"$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --text a --file "$texts/prose.txt" --ids-only >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 ]] && grep -q "not both" "$tmp/err" || fail "--text and --file mixed: rc $rc $(cat "$tmp/err")"
echo "1 2" >"$tmp/good"; echo "3 99999" >"$tmp/badid"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --file "$tmp/good" --file "$tmp/badid" --json >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 && ! -s "$tmp/out" ]] && grep -q -- "--file $tmp/badid: token 99999 is outside" "$tmp/err" ||
    fail "bad id in the second --file: rc $rc $(cat "$tmp/err")"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --ids 1 --ids "2 x" --null >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 && ! -s "$tmp/out" ]] && grep -q -- "--ids #2: expected" "$tmp/err" || fail "bad second --ids: rc $rc $(cat "$tmp/err")"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --ids 1 --ids 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 && ! -s "$tmp/out" ]] && grep -q -- "--json" "$tmp/err" && grep -q -- "--null" "$tmp/err" ||
    fail "several --ids, raw output: rc $rc $(cat "$tmp/err")"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --ids 1 --json --null >/dev/null 2>&1; rc=$?
[[ $rc -eq 2 ]] || fail "--json --null: rc $rc"
"$FFN" detokenize --tokenizer "$fx/gpt2_small.json" --ids 1 --file "$tmp/good" --json >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc -eq 2 ]] && grep -q "not both" "$tmp/err" || fail "--ids and --file mixed: rc $rc"
set -e

# SentencePiece-style: template adds <s> (id 1) unless --no-specials; spaces
# are U+2581 pieces; a code point that is no token becomes its <0xNN> bytes
ids=$(tok "$fx/sp_small.json" --text "ab abc")
[[ "$ids" == "1 $(tok "$fx/sp_small.json" --text "ab abc" --no-specials)" ]] || fail "sp template: $ids"
"$FFN" tokenize --tokenizer "$fx/sp_small.json" --text "ab z" --no-specials >"$tmp/lines"
[[ "$(cut -f2 "$tmp/lines" | tr '\n' ' ')" == "▁ab ▁ <0x7A> " ]] || fail "sp pieces: $(cut -f2 "$tmp/lines" | tr '\n' ' ')"
sp=(prose code numbers japanese emoji)
sargs=(); for f in "${sp[@]}"; do sargs+=(--file "$texts/$f.txt"); done
tok "$fx/sp_small.json" "${sargs[@]}" >"$tmp/sp_ids"
sdargs=()
for i in "${!sp[@]}"; do
    sed -n "$((i + 1))p" "$tmp/sp_ids" >"$tmp/sp_ids_$i"
    sdargs+=(--file "$tmp/sp_ids_$i")
done
"$FFN" detokenize --tokenizer "$fx/sp_small.json" "${sdargs[@]}" --skip-specials --null >"$tmp/sp_back"
/usr/bin/python3 - "$tmp/sp_back" "${sp[@]}" <<PY || fail "sentencepiece round trip"
import sys
parts = open(sys.argv[1], "rb").read().split(b"\0")
assert len(parts) == len(sys.argv) - 1 and parts[-1] == b"", len(parts)
for name, p in zip(sys.argv[2:], parts):
    assert p == open("$texts/" + name + ".txt", "rb").read(), "sentencepiece round trip of " + name
PY
"$FFN" detokenize --tokenizer "$fx/sp_small.json" --ids "1 263 261" >"$tmp/back"
[[ "$(cat "$tmp/back")" == "<s> ab" ]] || fail "sp decode with <s>: '$(cat "$tmp/back")'"
# Metaspace (prepend_scheme first) = Prepend + Replace on one stretch of text
[[ "$(tok "$fx/sp_metaspace.json" --file "$texts/prose.txt")" == "$(tok "$fx/sp_small.json" --file "$texts/prose.txt")" ]] ||
    fail "Metaspace and Prepend+Replace differ"

# the same tokenizers as GGUF files: the same ids
python3 "$root/tests/tokenizers/json_to_gguf.py" "$fx/gpt2_small.json" "$tmp/g.gguf" gpt2 gpt-2
tok "$tmp/g.gguf" "${targs[@]}" >"$tmp/ids_gguf"
same_lines "$tmp/ids_str" "$tmp/ids_gguf" "GGUF gpt2 differs from its tokenizer.json"

# a model directory: its tokenizer.json is found
mkdir -p "$tmp/model"
cp "$fx/gpt2_small.json" "$tmp/model/tokenizer.json"
[[ "$(tok "$tmp/model" --text "the thing")" == "$(tok "$fx/gpt2_small.json" --text "the thing")" ]] ||
    fail "a directory's tokenizer.json"
mkdir -p "$tmp/empty"
set +e
"$FFN" tokenize --tokenizer "$tmp/empty" --text x >"$tmp/out" 2>"$tmp/err"; rc=$?
set -e
[[ $rc -eq 1 && ! -s "$tmp/out" ]] && grep -q "no tokenizer.json" "$tmp/err" || fail "empty dir: $(cat "$tmp/err")"

# a llama2.c tokenizer.bin through the same command (BOS 1 first)
python3 - "$tmp/tok.bin" <<'PY'
import struct, sys
pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + [" ", "a", "b", " a", "ab", " ab"]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<i", 8))
    for i, p in enumerate(pieces):
        b = p.encode()
        f.write(struct.pack("<fi", -float(i), len(b)) + b)
PY
[[ "$(tok "$tmp/tok.bin" --text "ab")" == "1 264" ]] || fail "tokenizer.bin: $(tok "$tmp/tok.bin" --text "ab")"

# bad files: exit 1, nothing on stdout, a message naming the file and the field
bad() { # file, words the message must hold...
    local f="$1"; shift
    set +e
    "$FFN" tokenize --tokenizer "$fx/$f" --text "x" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    set -e
    [[ $rc -eq 1 ]] || fail "$f: rc $rc"
    [[ ! -s "$tmp/out" ]] || fail "$f: wrote to stdout"
    grep -q "$f" "$tmp/err" || fail "$f: the message does not name the file: $(cat "$tmp/err")"
    for w in "$@"; do grep -q -- "$w" "$tmp/err" || fail "$f: no '$w' in: $(cat "$tmp/err")"; done
}
bad bad_unigram.json "unsupported model type Unigram in"
bad bad_wordpiece.json "unsupported model type WordPiece in"
bad bad_merge_unknown.json "model.merges" "merge 6" "not in the vocabulary"
bad bad_regex.json "pre_tokenizer Split pattern" "PCRE2" "offset 14"
bad bad_vocab_utf8.json "UTF-8" "byte"
printf 'GGUF\3\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0' >"$tmp/empty.gguf"
set +e
"$FFN" tokenize --tokenizer "$tmp/empty.gguf" --text x >"$tmp/out" 2>"$tmp/err"; rc=$?
set -e
[[ $rc -eq 1 ]] && grep -q "tokenizer.ggml.model" "$tmp/err" || fail "GGUF without a tokenizer: $(cat "$tmp/err")"
# a GGUF pre-tokenizer ffn does not know: the file, the key, the value and
# the known values (from the table); "bert" (WordPiece) by model name
python3 "$root/tests/tokenizers/json_to_gguf.py" "$fx/gpt2_small.json" "$tmp/pre.gguf" gpt2 no-such-pre
python3 "$root/tests/tokenizers/json_to_gguf.py" "$fx/gpt2_small.json" "$tmp/bert.gguf" bert
for g in pre bert; do
    src="$tmp/$g.gguf"
    set +e
    "$FFN" tokenize --tokenizer "$src" --text x >"$tmp/out" 2>"$tmp/err_$g"; rc=$?
    set -e
    [[ $rc -eq 1 && ! -s "$tmp/out" ]] && grep -qF "$src" "$tmp/err_$g" || fail "$src: rc $rc $(cat "$tmp/err_$g")"
done
for w in 'tokenizer.ggml.pre "no-such-pre"' '"deepseek-llm"' '"deepseek-coder"' '"falcon"' '"mpt"' \
         '"starcoder"' '"refact"' '"gpt-4o"' '"tekken"' '"olmo"' '"command-r"' '"smollm"'; do
    grep -qF -- "$w" "$tmp/err_pre" || fail "unknown pre: no $w in $(cat "$tmp/err_pre")"
done
grep -qF 'tokenizer.ggml.model "bert" (WordPiece' "$tmp/err_bert" || fail "bert: $(cat "$tmp/err_bert")"
# tokenizer.json splits: a Split behavior ffn does not read, more splits than it holds
python3 - "$fx/gpt2_small.json" "$tmp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
split = {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Isolated"}
merged = dict(split, behavior="MergedWithPrevious")
for name, pres in (("merged", [merged]), ("nine", [split] * 9)):
    d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": pres + [{"type": "ByteLevel", "use_regex": False}]}
    json.dump(d, open("%s/split_%s.json" % (sys.argv[2], name), "w"))
PY
for g in split_merged split_nine; do
    set +e
    "$FFN" tokenize --tokenizer "$tmp/$g.json" --text x >"$tmp/out" 2>"$tmp/err_$g"; rc=$?
    set -e
    [[ $rc -eq 1 && ! -s "$tmp/out" ]] && grep -qF "$tmp/$g.json" "$tmp/err_$g" || fail "$g: rc $rc $(cat "$tmp/err_$g")"
done
grep -q 'Split behavior "MergedWithPrevious" is unsupported' "$tmp/err_split_merged" ||
    fail "Split MergedWithPrevious: $(cat "$tmp/err_split_merged")"
grep -q "more than 8 regex splits" "$tmp/err_split_nine" || fail "nine Splits: $(cat "$tmp/err_split_nine")"
# many merges (ffn adds them 256 at a time): all of them read, and of two
# bad merges in one batch the first in rank order is named, whatever the kind
/usr/bin/python3 - "$fx/gpt2_small.json" "$tmp" <<'PY'
import json, string, sys
d = json.load(open(sys.argv[1]))
vocab, merges = d["model"]["vocab"], d["model"]["merges"]
next_id = max(list(vocab.values()) + [a["id"] for a in d["added_tokens"]]) + 1
for x in string.ascii_lowercase:
    for y in string.ascii_lowercase:
        if x + y not in vocab:
            vocab[x + y] = next_id
            next_id += 1
            merges.append(x + " " + y)
print(len(merges), vocab["qz"], file=open(sys.argv[2] + "/many.info", "w"))
json.dump(d, open(sys.argv[2] + "/many.json", "w"))
def bad(name, faults):
    e = json.loads(json.dumps(d))
    for k, v in faults.items():
        e["model"]["merges"][k] = v
    json.dump(e, open(sys.argv[2] + "/" + name + ".json", "w"))
bad("many_bad1", {300: "q ZZZ", 301: "qz"})   # a missing token, then no space
bad("many_bad2", {290: "qz", 300: "q ZZZ"})   # no space, then a missing token
bad("many_bad3", {600: "qz qz"})            # the merged token is missing
PY
read -r n_merges qz_id <"$tmp/many.info"
[[ $n_merges -gt 600 ]] || fail "many merges: only $n_merges"
[[ "$(tok "$tmp/many.json" --text "qz")" == "$qz_id" ]] || fail "many merges: qz is not one token ($qz_id)"
set +e
"$FFN" tokenize --tokenizer "$tmp/many_bad1.json" --text x >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc -eq 1 ]] && grep -q 'merge 300 names "ZZZ"' "$tmp/err" || fail "many_bad1: rc $rc $(cat "$tmp/err")"
"$FFN" tokenize --tokenizer "$tmp/many_bad2.json" --text x >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc -eq 1 ]] && grep -q 'merges\[290\] "qz" is not two tokens' "$tmp/err" || fail "many_bad2: rc $rc $(cat "$tmp/err")"
"$FFN" tokenize --tokenizer "$tmp/many_bad3.json" --text x >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc -eq 1 ]] && grep -q 'merge 600 ("qz" "qz") makes a token that is not in the vocabulary' "$tmp/err" ||
    fail "many_bad3: rc $rc $(cat "$tmp/err")"
set -e

echo "test_tokenize: OK"
