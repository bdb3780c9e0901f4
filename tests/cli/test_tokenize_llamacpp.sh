#!/usr/bin/env bash
# test_tokenize_llamacpp.sh -- llama.cpp's own tokenizer test suite: its
# models/ggml-vocab-*.gguf with the .inp / .out beside each (inputs and the
# ids Hugging Face's tokenizers give them), as llama.cpp's
# tests/test-tokenizer-0.cpp reads them.  Every vocabulary ffn reads gives
# exactly the expected ids on every case; the ones it refuses are refused
# by a message naming the file, the key and the value
# (tests/tokenizers/llamacpp_vocab.py has the list).  One line per
# vocabulary in the log.
# llama.cpp's source comes from the git bundle node-llama-cpp ships
# (installed as test_llamacpp.sh does, into $FFN_NPM_DIR, default
# build/npm-llamacpp), cloned into build/llamacpp-src (only models/ is
# checked out), never from the network.
# Through the ASan build (FFN_BIN under build/asan) the middle case of
# each vocabulary goes through `ffn tokenize`; else all of them through
# libffn.so beside FFN_BIN.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
PY=/usr/bin/python3
SRC="$ROOT/build/llamacpp-src"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

. "$ROOT/tests/cli/lib_llamacpp.sh"
bundle="$NPM_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle"
[[ -f "$bundle" ]] || fail "no $bundle after installing node-llama-cpp"
# clone once; again when the bundle's commit changes
head=$(git bundle list-heads "$bundle" | awk 'NR == 1 {print $1}')
if [[ "$(cat "$SRC/.ffn-commit" 2>/dev/null)" != "$head" ]]; then
    rm -rf "$SRC"
    git clone -q --no-checkout "$bundle" "$SRC" || fail "git clone of $bundle"
    git -C "$SRC" -c advice.detachedHead=false checkout -q "$head" -- models || fail "checkout of models/"
    echo "$head" >"$SRC/.ffn-commit"
fi
n=$(ls "$SRC"/models/ggml-vocab-*.gguf.inp 2>/dev/null | wc -l)
[[ $n -ge 10 ]] || fail "only $n .inp files in $SRC/models"
echo "ok   llama.cpp $head: $n vocabularies with cases"

if [[ "$FFN" == */asan/* ]]; then
    "$PY" "$ROOT/tests/tokenizers/llamacpp_vocab.py" "$SRC/models" "$FFN" --sample 1
else
    "$PY" "$ROOT/tests/tokenizers/llamacpp_vocab.py" "$SRC/models" "$FFN"
fi
