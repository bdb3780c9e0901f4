#!/usr/bin/env bash
# scripts/test.sh -- every test, from a fresh Debian 12 machine (as root):
# installs what the tests need, builds (normal and ASan+UBSan), runs
# tests/run.sh, which ends with "N passed, N failed" and fails if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
if [[ -f tests/browser/package.json ]]; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
make -j"$(nproc)" all unit asan asan-cli
bash tests/run.sh "$@"
