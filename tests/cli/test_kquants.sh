#!/usr/bin/env bash
# test_kquants.sh -- the super-block formats q2_K, q3_K, q5_K and iq4_xs
# against llama.cpp (node-llama-cpp 3.21.1's prebuilt libraries, installed
# into $FFN_NPM_DIR as tests/cli/test_llamacpp.sh does):
#  1. tests/llamacpp/kquants.py: ffn's decoders and encoders against ggml's
#     dequantize_row_<t>, quantize_row_<t>_ref and ggml_quantize_chunk
#     (libggml-base through ctypes): floats and bytes equal;
#  2. tests/llamacpp/kquants_e2e.py: files written by llama.cpp's
#     llama_model_quantize and by `ffn quantize --dtype T` run in both; the
#     next-token distributions of ffn and llama.cpp against a float64 forward
#     over the decoded weights (the bounds are stated there).
# A failed install is a failure of this test, not a skip.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
PY=/usr/bin/python3
NPM_DIR="${FFN_NPM_DIR:-$ROOT/build/npm-llamacpp}"
LIBFFN="${FFN_LIBFFN:-$(dirname "$FFN")/libffn.so}"
[[ -e "$LIBFFN" ]] || LIBFFN="$ROOT/build/libffn.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v node >/dev/null || { echo "FAIL node is not installed (scripts/setup.sh installs it)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL npm is not installed (scripts/setup.sh installs it)"; exit 1; }
mkdir -p "$NPM_DIR"
if ! cmp -s "$ROOT/tests/llamacpp/package-lock.json" "$NPM_DIR/package-lock.json" ||
   [[ ! -d "$NPM_DIR/node_modules/node-llama-cpp" ]]; then
    cp "$ROOT/tests/llamacpp/package.json" "$ROOT/tests/llamacpp/package-lock.json" "$NPM_DIR/"
    echo "installing node-llama-cpp into $NPM_DIR"
    if ! (cd "$NPM_DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --ignore-scripts --no-audit \
            --no-fund >"$tmp/npm.log" 2>&1); then
        echo "FAIL npm ci in $NPM_DIR:"; tail -n 20 "$tmp/npm.log"; exit 1
    fi
fi
cp "$ROOT/tests/llamacpp/probs.mjs" "$NPM_DIR/probs.mjs"
LIB="$NPM_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
[[ -e "$LIB/libggml-base.so" && -e "$LIB/libllama.v0.4.0.so" ]] ||
    { echo "FAIL no prebuilt libggml-base.so / libllama.v0.4.0.so in $LIB"; exit 1; }

"$PY" "$ROOT/tests/llamacpp/kquants.py" "$LIBFFN" "$LIB/libggml-base.so"
FFN_BIN="$FFN" "$PY" "$ROOT/tests/llamacpp/kquants_e2e.py" "$tmp" "$NPM_DIR" "$LIB"
