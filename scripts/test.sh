#!/usr/bin/env bash
# scripts/test.sh -- every test, from a fresh Debian 12 machine (as root):
# installs what the tests need, builds (normal and ASan+UBSan), runs
# tests/run.sh, which ends with "N passed, N failed" and fails if any failed.
# The tests run three at a time on any machine (FFN_TEST_JOBS=N to choose;
# many tests wait on processes, pipes and timeouts more than they compute,
# so a third slot keeps 2 cores busy; 1 for one at a time); the
# output is printed in order all the same (see tests/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
if [[ -f tests/browser/package.json ]]; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
make -j"$(nproc)" all unit asan asan-cli
FFN_TEST_JOBS="${FFN_TEST_JOBS:-3}" bash tests/run.sh "$@"
