# lib_llamacpp.sh -- sourced by the tests that use llama.cpp as a reference
# (test_llamacpp.sh, test_ftypes.sh, test_kquants.sh,
# test_tokenize_llamacpp.sh): installs node-llama-cpp 3.21.1
# (tests/llamacpp/package.json and its lock file) into $NPM_DIR (default
# build/npm-llamacpp, outside the source tree) from the npm registry when
# the pinned files changed, and copies the reference scripts beside it.
# Its prebuilt CPU binary is used, never a download or a build of
# llama.cpp.  A failed install is a failure of the test, not a skip.
# Needs ROOT and tmp set; sets NPM_DIR.
NPM_DIR="${FFN_NPM_DIR:-$ROOT/build/npm-llamacpp}"
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
cp "$ROOT/tests/llamacpp/probs.mjs" "$ROOT/tests/llamacpp/probs_many.mjs" "$NPM_DIR/"
echo "ok   node-llama-cpp $(cd "$NPM_DIR" && node -p 'require("./node_modules/node-llama-cpp/package.json").version') in $NPM_DIR"
