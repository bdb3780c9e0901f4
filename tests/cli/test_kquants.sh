#!/usr/bin/env bash
# test_kquants.sh -- the super-block formats q2_K, q3_K, q5_K and iq4_xs
# against llama.cpp (node-llama-cpp 3.21.1's prebuilt libraries, installed
# into $FFN_NPM_DIR by tests/cli/lib_llamacpp.sh):
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
LIBFFN="${FFN_LIBFFN:-$(dirname "$FFN")/libffn.so}"
[[ -e "$LIBFFN" ]] || LIBFFN="$ROOT/build/libffn.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$ROOT/tests/cli/lib_llamacpp.sh"
LIB="$NPM_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
[[ -e "$LIB/libggml-base.so" && -e "$LIB/libllama.v0.4.0.so" ]] ||
    { echo "FAIL no prebuilt libggml-base.so / libllama.v0.4.0.so in $LIB"; exit 1; }

"$PY" "$ROOT/tests/llamacpp/kquants.py" "$LIBFFN" "$LIB/libggml-base.so"
FFN_BIN="$FFN" "$PY" "$ROOT/tests/llamacpp/kquants_e2e.py" "$tmp" "$NPM_DIR" "$LIB"
