#!/usr/bin/env bash
# bench_qgemm.sh -- the low-precision kernels (src/kernels/qgemm*.c) against
# this run's own roofline, for every weight type, W 2048 × 8192 and
# 8192 × 2048, 1 and 2 threads:
#   decode  n = 1: weight GB/s as a share of the read bandwidth measured in
#           the same process right after (ffn bench qgemm --json);
#   prompt  n = 512: GFLOP/s of each path -- the row kernels (int8
#           activations for the integer types), the bf16 panels decoded
#           inside the call (what ffn_qgemm runs from the crossover on) and
#           oneDNN's bf16 matmul on a bf16 copy made beforehand -- as a share
#           of the bf16 (vdpbf16ps) peak measured in the same run
#           (ffn bench peak --json).
#   bash bench/bench_qgemm.sh            (about 5 minutes on 2 cores)
#   QGEMM_TYPES="q4_0 bf16" QGEMM_THREADS=1 bash bench/bench_qgemm.sh
# Needs build/ffn and build/libffn_internal.a (make all).  Part of make bench.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FFN="$ROOT/build/ffn"
[[ -x "$FFN" && -f "$ROOT/build/libffn_internal.a" ]] || { echo "bench_qgemm: run make all first" >&2; exit 2; }
read -r -a types <<<"${QGEMM_TYPES:-bf16 f16 q8_0 q6_K q4_K q4_0}"
read -r -a threads <<<"${QGEMM_THREADS:-1 2}"
shapes=("2048 8192" "8192 2048")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/qgemm_batch.c" \
   "$ROOT/build/libffn_internal.a" -ldnnl -fopenmp -lm -lpthread -o "$tmp/qgemm_batch"

field() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d[sys.argv[1]])' "$1"; }

echo "== decode (n = 1): weight bytes per second / read bandwidth of the same run"
printf "%-5s %-11s %7s %9s %9s %7s\n" type "W" threads "GB/s" "bw_GB/s" "%bw"
for shape in "${shapes[@]}"; do
    read -r R C <<<"$shape"
    for th in "${threads[@]}"; do
        for t in "${types[@]}"; do
            j=$("$FFN" bench qgemm --type "$t" --rows "$R" --cols "$C" --n 1 --threads "$th" --json)
            printf "%-5s %-11s %7s %9s %9s %7s\n" "$t" "${R}x${C}" "$th" "$(field weight_gbps <<<"$j")" \
                "$(field bandwidth_gbps <<<"$j")" "$(field pct_bandwidth <<<"$j")"
        done
    done
done

echo
echo "== prompt (n = 512): GFLOP/s per path / bf16 peak of the same run"
printf "%-5s %-11s %7s %8s %8s %8s %8s %7s %7s %7s\n" type "W" threads "peak" "rows" "panel" "onednn" \
    "%rows" "%panel" "%dnn"
for th in "${threads[@]}"; do
    peak=$("$FFN" bench peak --threads "$th" --json | field bf16_gflops)
    for shape in "${shapes[@]}"; do
        read -r R C <<<"$shape"
        for t in "${types[@]}"; do
            # columns of qgemm_batch: type n threads rows_ms rows_GF panel_ms panel_GF dnn_ms dnn_GF ...
            line=$("$tmp/qgemm_batch" "$t" "$R" "$C" "$th" 512 | tail -1)
            read -r _ _ _ _ g_rows _ g_panel _ g_dnn _ _ <<<"$line"
            python3 - "$t" "${R}x${C}" "$th" "$peak" "$g_rows" "$g_panel" "$g_dnn" <<'EOF'
import sys
t, w, th = sys.argv[1:4]
# n/a: a figure this CPU cannot give (no bf16 peak, no panels without
# AVX512_BF16), and every share of it
val = lambda a: None if a in ("None", "n/a") else float(a)
peak, rows, panel, dnn = map(val, sys.argv[4:8])
f = lambda v: "%.1f" % v if v is not None else "n/a"
pct = lambda g: f(100.0 * g / peak) if peak and g is not None else "n/a"
print("%-5s %-11s %7s %8s %8s %8s %8s %7s %7s %7s"
      % (t, w, th, f(peak), f(rows), f(panel), f(dnn), pct(rows), pct(panel), pct(dnn)))
EOF
        done
    done
done
