#!/usr/bin/env bash
# bench_qgemm_int8.sh -- prompt-size products on an AVX2 machine, per n: the
# row kernels, the fp32 panels and the int8 products, alternated in one run
# (bench/qgemm_int8.c): the avx2_int8_min_n table in src/kernels/types.c.
#   bash bench/bench_qgemm_int8.sh [THREADS] [TYPE...]
# Needs build/libffn_internal.a and build/ffn (make all).  Defaults: 1
# thread; q8_0, q4_0, q4_K; W 2048 × 8192 (QGEMM_ROWS, QGEMM_COLS), or the
# shapes of QGEMM_SHAPES ("ROWSxCOLS ...", e.g. the 0.62 B model's
# "8192x2048 2048x8192 2048x2048 512x2048"); QGEMM_REPS 5 turns;
# n = QGEMM_NS (16 32 48 64 128 512).  First the same run's fp32 FMA peak
# (ffn bench peak); the int8 column's share of it is int8_%pk (fp32-
# equivalent flops, 2 per weight × token).
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
peak=$("$ROOT/build/ffn" bench peak --threads "$threads" --json | sed -n 's/.*"gflops": *\([0-9.]*\).*/\1/p')
echo "fp32 FMA peak, $threads thread(s): $peak GFLOP/s   ($(uptime | sed 's/.*load/load/'))"
shapes=(${QGEMM_SHAPES:-${QGEMM_ROWS:-2048}x${QGEMM_COLS:-8192}})
for t in "${types[@]}"; do
    for sh in "${shapes[@]}"; do
        QGEMM_PEAK="$peak" "$tmp/qgemm_int8" "$t" "${sh%x*}" "${sh#*x}" "$threads" "${QGEMM_REPS:-5}" \
            ${QGEMM_NS:-16 32 48 64 128 512}
    done
done
