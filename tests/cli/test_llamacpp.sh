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
NPM_DIR="${FFN_NPM_DIR:-$ROOT/build/npm-llamacpp}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v node >/dev/null || { echo "FAIL node is not installed (scripts/setup.sh installs it)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL npm is not installed (scripts/setup.sh installs it)"; exit 1; }
mkdir -p "$NPM_DIR"
# reinstall when the pinned files change
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
echo "ok   node-llama-cpp $(cd "$NPM_DIR" && node -p 'require("node-llama-cpp/package.json").version') in $NPM_DIR"

FFN_BIN="$FFN" "$PY" "$ROOT/tests/llamacpp/interop.py" "$tmp" "$NPM_DIR"
# the other families (llama3 RoPE, ...), f32, with the HF-dir and round-trip checks
mkdir -p "$tmp/families"
FFN_BIN="$FFN" "$PY" "$ROOT/tests/llamacpp/families.py" "$tmp/families" "$NPM_DIR"
