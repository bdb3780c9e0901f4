#!/usr/bin/env bash
# scripts/demo.sh -- the main job from a fresh Debian 12 machine (as root):
# installs the build dependencies, builds, and runs `ffn demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
make -j"$(nproc)" all >&2
exec build/ffn demo "$@"
