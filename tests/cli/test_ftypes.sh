#!/usr/bin/env bash
# test_ftypes.sh -- llama.cpp's file types, written by llama.cpp itself:
# (1) ffn's reference decoders and encoders of the 32-element formats equal
# ggml's, byte for byte and bit for bit (tests/llamacpp/quant_ref.py, on
# libggml-base); (2) a random llama and stories260K, written by ffn as f32
# GGUF, quantized by llama_model_quantize into each of its 16 ftypes that
# need no importance matrix, run by ffn and by llama.cpp and compared with
# an exact float64 forward (tests/llamacpp/ftypes.py states the bounds and
# PENDING, the ftypes refused until the K formats of another branch merge);
# first, `ffn quantize --dtype t` of each single type against llama.cpp's
# pure quantization of that type (the same type for every tensor).
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=tests/cli/lib_llamacpp.sh
source "$ROOT/tests/cli/lib_llamacpp.sh"
BINS="$NPM_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
LIB="$ROOT/build/libffn.so" # the plain build: an ASan library does not load into python
"$PY" "$ROOT/tests/llamacpp/quant_ref.py" "$LIB" "$BINS/libggml-base.so"
FFN_BIN="$FFN" "$PY" "$ROOT/tests/llamacpp/ftypes.py" "$tmp" "$NPM_DIR"
