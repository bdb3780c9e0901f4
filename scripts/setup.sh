#!/usr/bin/env bash
# scripts/setup.sh [build|test] -- install what ffn needs on Debian 12 (as
# root; uses sudo when not root).  `build`: the compiler, oneDNN, Open MPI
# (libffn_dist and mpirun), libmicrohttpd (the HTTP server of `ffn serve`) and
# PCRE2 (the pre-tokenizer regexes of tokenizer.json files).
# `test`: also PyTorch (the reference, and the peer in `make bench`) with
# OpenBLAS under it (without it Debian's torch runs on the reference BLAS,
# ~100x slower, and the benchmark ratios would mean nothing), clang
# (sanitizers, libFuzzer), Chromium, a Chinese font and Node.js (the browser
# tests; the font only makes the --lang zh screenshots legible), GNU time
# (max RSS), and the Unicode Character Database (unicode-data: the NFC
# conformance test and scripts/gen_unicode_tables.py).  Installs only what
# is missing.
set -euo pipefail
what="${1:-build}"
pkgs=(build-essential make pkg-config libdnnl-dev libopenmpi-dev openmpi-bin libmicrohttpd-dev libpcre2-dev)
if [[ "$what" == test ]]; then
    pkgs+=(python3 python3-torch python3-numpy libopenblas0-pthread clang libclang-rt-14-dev chromium fonts-wqy-microhei nodejs npm time unicode-data bzip2)
fi
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node may come from elsewhere than Debian's package (a newer one on PATH)
if [[ "$what" == test ]] && command -v node >/dev/null && command -v npm >/dev/null; then
    tmp=(); for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || tmp+=("$p"); done
    missing=("${tmp[@]+"${tmp[@]}"}")
fi
if ((${#missing[@]})); then
    SUDO=; [[ $(id -u) -eq 0 ]] || SUDO=sudo
    echo "setup: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
