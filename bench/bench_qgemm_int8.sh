#!/usr/bin/env bash
# bench_qgemm_int8.sh -- prompt-size products on an AVX2 machine, per n: the
# row kernels, the fp32 panels and the int8 products, alternated in one run
# (bench/qgemm_int8.c): the avx2_int8_min_n table in src/kernels/types.c.
#   bash bench/bench_qgemm_int8.sh [THREADS] [TYPE...]
# Needs build/libffn_internal.a (make all).  Defaults: 1 thread; q8_0, q4_0,
# q4_K; W 2048 × 8192 (QGEMM_ROWS, QGEMM_COLS); QGEMM_REPS 5 turns;
# n = QGEMM_NS (16 32 48 64 128 512).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
threads="${1:-1}"
shift || true
types=("$@")
[[ ${#types[@]} -gt 0 ]] || types=(q8_0 q4_0 q4_K)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/qgemm_int8.c" \
   "$ROOT/build/libffn_internal.a" -ldnnl -fopenmp -lm -lpthread -o "$tmp/qgemm_int8"
for t in "${types[@]}"; do
    "$tmp/qgemm_int8" "$t" "${QGEMM_ROWS:-2048}" "${QGEMM_COLS:-8192}" "$threads" "${QGEMM_REPS:-5}" \
        ${QGEMM_NS:-16 32 48 64 128 512}
done
