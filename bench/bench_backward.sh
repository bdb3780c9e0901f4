#!/usr/bin/env bash
# bench/bench_backward.sh -- the layer's forward+backward against the FMA
# peak and PyTorch, and the weight-gradient kernel against oneDNN (run by
# `make bench` through bench/run.sh, or alone).
#
# Part 1, per thread count (BENCH_THREADS_LIST, default "1 2"): the FMA
# peak measured in this run at that thread count (`ffn bench peak`), then
# SwiGLU 1024×2816, GELU 1024×4096 and SwiGLU 4096×11008 at N = 64, 128,
# 512: `ffn bench layer` and bench/torch_layer.py (PyTorch fp32) side by
# side, forward and forward+backward.  Printed: min ms, GFLOP/s, % of the
# same-run peak, and ours / PyTorch (time ratio: < 1 means ffn is faster).
#
# Part 2: the weight-gradient products of those shapes -- dW_in (F, D) +=
# dGᵀ·x and dW_down (D, F) += dyᵀ·H with K = N -- on ffn_wgrad against
# oneDNN's sgemm and matmul primitive (bench/wgrad_kernel.c, same process,
# interleaved), at K = 16, 64, 96, 128, 256: the table behind WGRAD_MAX_N
# in src/nn/ffn.c.  Ratios are ffn_wgrad time / the faster oneDNN engine's
# (< 1: ffn_wgrad faster), by wall time and by process CPU time.
#
# Environment:
#   BENCH_THREADS_LIST  thread counts (default "1 2")
#   BENCH_QUICK=1       skip the (4096, 11008) shape (full run ~4 min on 2
#                       quiet cores)
#   BENCH_REPEATS       timed repeats per layer measurement (default: ~1 s
#                       worth, at least 3)
#   BENCH_BACKWARD_OUT  also write the JSON lines here (default
#                       build/bench/backward.jsonl)
# Needs build/ffn and build/libffn_internal.a (make all).  Run it on an otherwise
# idle machine: the numbers mean nothing under load.
set -euo pipefail
cd "$(dirname "$0")/.."
FFN=${FFN_BIN:-build/ffn}
PY=/usr/bin/python3
OUT=${BENCH_BACKWARD_OUT:-build/bench/backward.jsonl}
THREADS_LIST=${BENCH_THREADS_LIST:-1 2}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
rep=()
[[ -n "${BENCH_REPEATS:-}" ]] && rep=(--repeats "$BENCH_REPEATS")
[[ -x "$FFN" ]] || { echo "bench_backward.sh: $FFN not built (run make)" >&2; exit 1; }
[[ -f build/libffn_internal.a ]] || { echo "bench_backward.sh: build/libffn_internal.a not built (run make)" >&2; exit 1; }
have_torch=1
$PY -c 'import torch' 2>/dev/null || { have_torch=0; echo "bench_backward.sh: PyTorch not found; ffn only" >&2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -Iinclude -Isrc bench/wgrad_kernel.c build/libffn_internal.a \
    -ldnnl -fopenmp -lm -lpthread -lpcre2-8 -o "$tmp/wgrad_kernel"

uptime | sed 's/^/load: /'
shapes=("swiglu 1024 2816" "gelu 1024 4096")
[[ "${BENCH_QUICK:-0}" == 1 ]] || shapes+=("swiglu 4096 11008")

for T in $THREADS_LIST; do
    $FFN bench peak --threads "$T" --json >>"$OUT"
    for shape in "${shapes[@]}"; do
        read -r type D F <<<"$shape"
        for N in 64 128 512; do
            echo "== $type D=$D F=$F N=$N threads=$T" >&2
            $FFN bench layer --type "$type" --hidden "$D" --intermediate "$F" --tokens "$N" \
                --threads "$T" "${rep[@]}" --json | sed 's/^{/{"peer": "ffn", /' >>"$OUT"
            if ((have_torch)); then
                $PY bench/torch_layer.py --type "$type" --hidden "$D" --intermediate "$F" \
                    --tokens "$N" --threads "$T" "${rep[@]}" --json >>"$OUT"
            fi
        done
    done
done

# the weight-gradient products, at every thread count
for T in $THREADS_LIST; do
    for shape in "${shapes[@]}"; do
        read -r type D F <<<"$shape"
        for K in 16 64 96 128 256; do
            echo "== wgrad D=$D F=$F K=$K threads=$T" >&2
            "$tmp/wgrad_kernel" "$F" "$D" "$K" "$T" 5 >>"$OUT"  # dW_in (one half)
            "$tmp/wgrad_kernel" "$D" "$F" "$K" "$T" 5 >>"$OUT"  # dW_down
        done
    done
done

$PY - "$OUT" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peak = {r["threads"]: r["gflops"] for r in rows if r.get("bench") == "peak"}
layers = [r for r in rows if r.get("bench") == "layer"]
key = lambda r: (r["type"], r["hidden"], r["intermediate"], r["tokens"], r["threads"])
torch_by = {key(r): r for r in layers if r.get("peer") == "pytorch"}
print("\nlayer: min ms over repeats; peak% = GFLOP/s / the FMA peak measured in this run at "
      "the same thread count; ours/torch = ffn time / PyTorch time")
print("FMA peak: " + ", ".join(f"{t} threads {g:.1f} GFLOP/s" for t, g in sorted(peak.items())))
hdr = (f"{'layer':<8}{'D':>6}{'F':>7}{'N':>5}{'thr':>4}  {'pass':<8}{'ffn ms':>10}{'GFLOP/s':>9}"
       f"{'peak%':>7}{'torch ms':>10}{'ours/torch':>11}")
print(hdr)
print("-" * len(hdr))
for r in layers:
    if r.get("peer") != "ffn":
        continue
    t = torch_by.get(key(r))
    for p in ("forward", "forward_backward"):
        ms, gf = r[p]["min_ms"], r[p]["gflops"]
        tm = t[p]["min_ms"] if t else float("nan")
        print(f"{r['type']:<8}{r['hidden']:>6}{r['intermediate']:>7}{r['tokens']:>5}"
              f"{r['threads']:>4}  {'fwd' if p == 'forward' else 'fwd+bwd':<8}{ms:>10.3f}"
              f"{gf:>9.1f}{100 * gf / peak[r['threads']]:>6.1f}%{tm:>10.3f}{ms / tm:>11.2f}")
wg = [r for r in rows if r.get("bench") == "wgrad"]
print("\nweight gradient C (M, N) += Aᵀ·B, K = tokens: ffn_wgrad against oneDNN "
      "(sgemm, matmul primitive); ratio = ffn_wgrad time / the faster oneDNN engine's")
hdr = (f"{'M':>6}{'N':>6}{'K':>5}{'thr':>4}{'wgrad GF':>10}{'sgemm GF':>10}{'matmul GF':>10}"
       f"{'wall ratio':>11}{'cpu ratio':>10}")
print(hdr)
print("-" * len(hdr))
by = {}
for r in wg:
    by.setdefault((r["M"], r["N"], r["K"], r["threads"]), {})[r["engine"]] = r
for k, e in by.items():
    w = e["wgrad"]
    gf = lambda n: e[n]["gflops"] if n in e else float("nan")
    print(f"{k[0]:>6}{k[1]:>6}{k[2]:>5}{k[3]:>4}{gf('wgrad'):>10.1f}{gf('sgemm'):>10.1f}"
          f"{gf('matmul'):>10.1f}{1 / w['vs_onednn']:>11.2f}{1 / w['cpu_vs_onednn']:>10.2f}")
PYEOF
