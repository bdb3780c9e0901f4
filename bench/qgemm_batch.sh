#!/usr/bin/env bash
# qgemm_batch.sh -- the row kernels of ffn_qgemm, its bf16 panels decoded
# inside the call and a bf16 copy of the weight with oneDNN's bf16 matmul,
# per n (bench/qgemm_batch.c): the crossover table in src/kernels/qgemm.c.
#   bash bench/qgemm_batch.sh [THREADS] [TYPE...]
# Needs build/libffn_internal.a (make all).  Defaults: 1 thread, q4_0 and q8_0,
# W 2048 × 8192, n = 1 2 4 8 16 32 64 128 512.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
threads="${1:-1}"
shift || true
types=("$@")
[[ ${#types[@]} -gt 0 ]] || types=(q4_0 q8_0)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/qgemm_batch.c" \
   "$ROOT/build/libffn_internal.a" -ldnnl -fopenmp -lm -lpthread -o "$tmp/qgemm_batch"
for t in "${types[@]}"; do
    "$tmp/qgemm_batch" "$t" 2048 8192 "$threads" ${QGEMM_NS:-1 2 4 8 16 32 64 128 512}
done
