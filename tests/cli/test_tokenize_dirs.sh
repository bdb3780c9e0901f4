#!/usr/bin/env bash
# test_tokenize_dirs.sh -- the commands that load a model pick up the
# tokenizer.json of its directory: `ffn run` (a Hugging Face directory
# exported from stories260K with a tokenizer.json put beside it: the prompt
# ids are those of `ffn tokenize`), `ffn inspect` (the prompt's pieces),
# `ffn generate` (an ffn run directory holding a tokenizer.json); without a
# tokenizer.json the old lookup and its message stay.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
root="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
stories="${FFN_SHARED:-$root/../shared}/models/stories260K.bin"
[[ -f "$stories" ]] || { echo "FAIL: $stories missing (FFN_SHARED)"; exit 1; }
fx="$root/tests/tokenizers/fixtures"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$FFN" export "$stories" --out "$tmp/hf" >/dev/null 2>&1 || fail "export"
# without a tokenizer: --prompt is refused with the old message (use --ids)
set +e
"$FFN" run "$tmp/hf" --prompt "the thing" --steps 1 --threads 1 >/dev/null 2>"$tmp/err"; rc=$?
set -e
[[ $rc -ne 0 ]] && grep -q "no vocabulary found beside the model" "$tmp/err" || fail "no tokenizer: $(cat "$tmp/err")"

cp "$fx/gpt2_small.json" "$tmp/hf/tokenizer.json"
want=$("$FFN" tokenize --tokenizer "$fx/gpt2_small.json" --text "the thing" --ids-only)
"$FFN" run "$tmp/hf" --prompt "the thing" --steps 2 --threads 1 --temperature 0 --info >/dev/null 2>"$tmp/err" ||
    fail "run with tokenizer.json: $(cat "$tmp/err")"
grep -q "prompt ids (5): $want" "$tmp/err" || fail "run: prompt ids not the tokenizer's ($want): $(cat "$tmp/err")"
"$FFN" inspect "$tmp/hf" --prompt "the thing" --threads 1 >"$tmp/out" 2>"$tmp/err" || fail "inspect: $(cat "$tmp/err")"
grep -q "token 1 'he' (id 257)" "$tmp/out" || fail "inspect does not show the tokenizer.json pieces"

# an ffn run directory: tokenizer.json is read before tokenizer.txt
"$FFN" train --corpus en --tokenizer byte --hidden-size 16 --intermediate-size 32 --num-hidden-layers 1 \
    --num-attention-heads 2 --num-key-value-heads 2 --seq-len 16 --batch-size 2 --steps 2 --out "$tmp/run" --threads 1 >/dev/null 2>&1 ||
    fail "train"
"$FFN" generate --model "$tmp/run" --prompt "the" --steps 2 --threads 1 >/dev/null 2>&1 || fail "generate (tokenizer.txt)"
python3 - "$fx/gpt2_small.json" "$tmp/run/tokenizer.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
d["added_tokens"] = []   # the 256 byte tokens alone: within the byte model's 257 ids
d["model"]["vocab"] = {k: v for k, v in d["model"]["vocab"].items() if v < 256}
d["model"]["merges"] = []
json.dump(d, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
PY
"$FFN" generate --model "$tmp/run" --prompt "the" --steps 2 --threads 1 >"$tmp/out" 2>"$tmp/err" ||
    fail "generate with tokenizer.json: $(cat "$tmp/err")"
# it is the tokenizer.json that is read: a broken one is named
echo '{"model": {"type": "Unigram"}}' >"$tmp/run/tokenizer.json"
set +e
"$FFN" generate --model "$tmp/run" --prompt "the" --steps 2 --threads 1 >/dev/null 2>"$tmp/err"; rc=$?
set -e
[[ $rc -ne 0 ]] && grep -q "tokenizer.json" "$tmp/err" && grep -q "Unigram" "$tmp/err" ||
    fail "generate did not read the run directory's tokenizer.json: $(cat "$tmp/err")"
echo "test_tokenize_dirs: OK"
