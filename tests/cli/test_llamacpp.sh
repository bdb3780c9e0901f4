#!/usr/bin/env bash
# test_llamacpp.sh -- GGUF files written by ffn run in llama.cpp and give
# the same next-token distributions: llama, qwen2, a Mixtral-style MoE and
# qwen2moe, each as f32, f16, bf16, q8_0, q4_0, q4_K and q6_K, 60 positions
# each (tests/llamacpp/interop.py states the bounds); then every other
# family ffn writes (tests/llamacpp/families.py: f32 against llama.cpp, the
# HF directory it came from, and the GGUF and HF round trips).
# llama.cpp is node-llama-cpp 3.21.1 (tests/llamacpp/package.json and its
# lock file), installed here into $FFN_NPM_DIR (default build/npm-llamacpp,
# outside the source tree) from the npm registry; its prebuilt CPU binary
# is used, never a download or a build of llama.cpp.  A failed install is
# a failure of this test, not a skip.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# shellcheck source=tests/cli/lib_llamacpp.sh
source "$ROOT/tests/cli/lib_llamacpp.sh"

FFN_BIN="$FFN" "$PY" "$ROOT/tests/llamacpp/interop.py" "$tmp" "$NPM_DIR"
# the other families (llama3 RoPE, ...), f32, with the HF-dir and round-trip checks
mkdir -p "$tmp/families"
FFN_BIN="$FFN" "$PY" "$ROOT/tests/llamacpp/families.py" "$tmp/families" "$NPM_DIR"
