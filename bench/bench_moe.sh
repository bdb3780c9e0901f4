#!/usr/bin/env bash
# bench/bench_moe.sh -- Mixture of Experts (run by `make bench` through
# bench/run.sh, or alone): E = 8, k = 2, SwiGLU experts, D = 1024, F = 1408,
# N in {1, 512}, forward and forward+backward, on BENCH_THREADS (default 2).
#
# Prints, per N:
#   - ffn MoE times (min and median over repeats, a fresh input each);
#   - the ratio to a dense SwiGLU of the same active width (F·k = 2816),
#     timed in the same process, interleaved with the MoE runs (`ffn bench
#     moe`); and, when `ffn bench layer` exists, that command's dense time
#     too;
#   - the ratio to PyTorch's MoE written the usual way (bench/torch_moe.py:
#     a loop over experts with index_select and index_add_);
#   - at N = 1, the weight bytes the forward reads: the router plus the
#     experts that received a token, against the k experts that must run and
#     all E experts, and the bandwidth that implies; with `perf stat`
#     available, the measured memory traffic as well.
# Targets: MoE/dense <= 1.3; ffn faster than PyTorch; at N = 1 only the k
# chosen experts' weights are read.
set -euo pipefail
cd "$(dirname "$0")/.."
FFN=${FFN_BIN:-build/ffn}
PY=/usr/bin/python3
T=${BENCH_THREADS:-2}
OUT=${BENCH_MOE_OUT:-build/bench/moe.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
rep=()
[[ -n "${BENCH_REPEATS:-}" ]] && rep=(--repeats "$BENCH_REPEATS")
shape=(--experts 8 --top-k 2 --hidden 1024 --intermediate 1408)

have_layer=0
"$FFN" bench layer --help >/dev/null 2>&1 && have_layer=1
have_torch=1
$PY -c 'import torch' 2>/dev/null || { have_torch=0; echo "bench_moe.sh: PyTorch not found; ffn only" >&2; }
uptime | sed 's/^/load: /'

for N in 1 512; do
    echo "== moe N=$N" >&2
    "$FFN" bench moe "${shape[@]}" --tokens "$N" --threads "$T" "${rep[@]}" --json |
        tr -d '\n' | sed 's/^{/{"peer": "ffn", /; s/$/\n/' >>"$OUT"
    if ((have_layer)); then
        "$FFN" bench layer --type swiglu --hidden 1024 --intermediate 2816 --tokens "$N" \
            --threads "$T" "${rep[@]}" --json | tr -d '\n' |
            sed 's/^{/{"peer": "ffn-layer", /; s/$/\n/' >>"$OUT" || true
    fi
    if ((have_torch)); then
        $PY bench/torch_moe.py "${shape[@]}" --tokens "$N" --threads "$T" "${rep[@]}" --json >>"$OUT"
    fi
done

# Memory traffic at N = 1, if the PMU is reachable (often not in a VM).
perf_note="perf stat: not run"
if command -v perf >/dev/null 2>&1; then
    perf stat -x, -e LLC-load-misses -- true >/dev/null 2>"$OUT.perf" || true
    if grep -q "not supported\|not counted\|Permission\|Error" "$OUT.perf"; then
        perf_note="perf stat: the PMU is not reachable here ($(grep -m1 -o "not supported\|not counted\|Permission denied\|Error[^,]*" "$OUT.perf")), so memory traffic is computed, not measured"
    else
        perf_note="perf stat (LLC load misses x 64 B over a 50-repeat N=1 run incl. set-up): $(perf stat -x, -e LLC-load-misses -- "$FFN" bench moe "${shape[@]}" --tokens 1 \
            --threads "$T" --repeats 50 2>&1 >/dev/null | tr '\n' ' ')"
    fi
    rm -f "$OUT.perf"
fi

$PY - "$OUT" "$perf_note" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ffn = {r["tokens"]: r for r in rows if r.get("peer") == "ffn"}
torch = {r["tokens"]: r for r in rows if r.get("peer") == "pytorch"}
layer = {r.get("tokens"): r for r in rows if r.get("peer") == "ffn-layer"}
print("\nMoE E=8 k=2 SwiGLU D=1024 F=1408; times in ms (min / median); "
      "ratios of medians")
hdr = f"{'N':>4}  {'pass':<8}{'ffn moe':>22}{'dense F=2816':>22}{'moe/dense':>10}{'pytorch moe':>22}{'torch/ffn':>10}"
print(hdr)
print("-" * len(hdr))
for N in sorted(ffn):
    r, t = ffn[N], torch.get(N)
    for p, name in (("forward", "fwd"), ("forward_backward", "fwd+bwd")):
        m, d = r["moe"][p], r["dense"][p]
        tt = t[p] if t else None
        ts = f"{1e3*tt['min_s']:10.3f} /{1e3*tt['median_s']:10.3f}" if tt else "-"
        tr = f"{tt['median_s']/m['median_s']:10.2f}" if tt else f"{'-':>10}"
        print(f"{N:>4}  {name:<8}{1e3*m['min_s']:10.3f} /{1e3*m['median_s']:10.3f}"
              f"{1e3*d['min_s']:10.3f} /{1e3*d['median_s']:10.3f}{m['median_s']/d['median_s']:10.3f}{ts:>22}{tr}")
    if N in layer:
        l = layer[N]
        print(f"      separate process `ffn bench layer --type swiglu --intermediate 2816`: "
              f"fwd {l['forward']['min_ms']:.3f} / {l['forward']['median_ms']:.3f} ms, "
              f"fwd+bwd {l['forward_backward']['min_ms']:.3f} / {l['forward_backward']['median_ms']:.3f} ms; "
              f"moe/that (medians) fwd {1e3*r['moe']['forward']['median_s']/l['forward']['median_ms']:.3f}, "
              f"fwd+bwd {1e3*r['moe']['forward_backward']['median_s']/l['forward_backward']['median_ms']:.3f}")
if 1 in ffn:
    r = ffn[1]
    print(f"\nN=1 weight bytes: experts run per forward {r['experts_run_avg']:.2f} of {r['experts']}; "
          f"read {r['bytes_forward_weights']/1e6:.1f} MB (router {r['bytes_router']/1e6:.2f} MB + "
          f"{r['bytes_per_expert']/1e6:.2f} MB per expert run) against "
          f"{r['bytes_k_experts_bound']/1e6:.1f} MB for the k experts (+router) and "
          f"{r['bytes_all_experts']/1e6:.1f} MB for all E; "
          f"{r['forward_weight_GBps']:.1f} GB/s at the min time, "
          f"{r['bytes_forward_weights']/r['moe']['forward']['median_s']/1e9:.1f} GB/s at the median")
print(sys.argv[2])
PYEOF
