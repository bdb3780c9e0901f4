#!/usr/bin/env bash
# bench/bench_bf16.sh -- the FFN layer with bf16 products (--precision bf16:
# bf16 weights and activations into each product, fp32 accumulation and
# results) beside PyTorch with torch.autocast("cpu", dtype=torch.bfloat16)
# (oneDNN's bf16 kernels) and beside the same run's bf16 dot-product peak
# (`ffn bench peak`: vdpbf16ps, bf16_gflops), at the thread counts asked.
#
# Shapes: SwiGLU (1024, 2816) and (4096, 11008), GELU dense (1024, 4096), at
# N = 64 and 512, forward and forward+backward (FLOPs: the matrix products,
# forward 2·N·(P+F)·D, forward+backward 3x).  Printed per row: ffn bf16 ms,
# GFLOP/s, % of the bf16 peak, PyTorch-autocast ms, ffn/PyTorch speed ratio
# (PyTorch time / ffn time), and at the largest thread count ffn fp32 ms and
# the bf16 speedup over it (fp32 time / bf16 time).  Also the time of the
# bf16 weight refresh (set_weights after an optimizer step) per shape.
#
# Environment:
#   BF16_THREADS  thread counts, space-separated (default "1 2")
#   BF16_SHAPES   subset, e.g. "swiglu:1024:2816 gelu:1024:4096" (default all three)
#   BF16_REPEATS  timed repeats per measurement (default 3)
#   BF16_OUT      JSON lines (default build/bench/bf16.jsonl)
# Whole run: 2 to 4 minutes on 2 idle Zen 4 cores (the 4096 x 11008 shape
# is most of it; BF16_SHAPES without it: under a minute).  The numbers mean
# nothing on a loaded machine; the ratios are within one run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
THREADS=${BF16_THREADS:-1 2}
SHAPES=${BF16_SHAPES:-swiglu:1024:2816 gelu:1024:4096 swiglu:4096:11008}
R=${BF16_REPEATS:-3}
OUT=${BF16_OUT:-build/bench/bf16.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
src_bin=${FFN_BIN:-build/ffn}
[[ -x "$src_bin" ]] || { echo "bench_bf16.sh: $src_bin not built (run make)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src_bin" "$tmp/ffn"
FFN=$tmp/ffn
# Without AVX512_BF16 ffn refuses bf16: the run goes on with ffn fp32 and
# PyTorch, and every ffn bf16 figure (and the ratios that need one) is n/a.
have_bf16=1
if ! $FFN bench layer --hidden 16 --intermediate 16 --tokens 8 --repeats 1 --precision bf16 \
        >/dev/null 2>"$tmp/err"; then
    have_bf16=0
    echo "bench_bf16.sh: no bf16 products here (ffn bf16 figures n/a): $(cat "$tmp/err")" >&2
fi
have_torch=1
$PY -c 'import torch' 2>/dev/null || { have_torch=0; echo "bench_bf16.sh: PyTorch not found; ffn only" >&2; }
echo "bench_bf16: ffn $($FFN version | head -1 | cut -d' ' -f2), threads [$THREADS], $(date -u +%FT%TZ)"
uptime | sed 's/^/load: /'
last_t=${THREADS##* }
for T in $THREADS; do
    $FFN bench peak --threads "$T" --json >>"$OUT"
    for shape in $SHAPES; do
        IFS=: read -r type D F <<<"$shape"
        for N in 64 512; do
            echo "== $type D=$D F=$F N=$N threads=$T" >&2
            if ((have_bf16)); then
                $FFN bench layer --type "$type" --hidden "$D" --intermediate "$F" --tokens "$N" \
                    --threads "$T" --repeats "$R" --precision bf16 --json |
                    sed 's/^{/{"peer": "ffn", /' >>"$OUT"
            fi
            if [[ $T == "$last_t" ]] || ((!have_bf16)); then
                $FFN bench layer --type "$type" --hidden "$D" --intermediate "$F" --tokens "$N" \
                    --threads "$T" --repeats "$R" --precision fp32 --json |
                    sed 's/^{/{"peer": "ffn", /' >>"$OUT"
            fi
            if ((have_torch)); then
                $PY bench/torch_layer.py --type "$type" --hidden "$D" --intermediate "$F" \
                    --tokens "$N" --threads "$T" --repeats "$R" --autocast bf16 --json >>"$OUT"
            fi
        done
    done
done

$PY - "$OUT" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peaks = {r["threads"]: r for r in rows if r.get("bench") == "peak"}
lay = [r for r in rows if r.get("bench") == "layer"]
def find(peer, prec, r):
    for q in lay:
        if q.get("peer") == peer and q.get("precision") == prec and q["threads"] == r["threads"] \
                and q["type"] == r["type"] and q["hidden"] == r["hidden"] \
                and q["intermediate"] == r["intermediate"] and q["tokens"] == r["tokens"]:
            return q
    return None
print()
def num(v, fmt):  # n/a: a figure this CPU cannot give (no AVX512_BF16)
    return format(v, fmt) if v is not None else "n/a"
for t, p in sorted(peaks.items()):
    bp = p["bf16_gflops"]
    print(f"threads {t}: bf16 peak {num(bp, '.1f')}{' GFLOP/s' if bp else ''}, FMA peak {p['gflops']:.1f} GFLOP/s (same run)")
have_bf16 = any(r.get("peer") == "ffn" and r.get("precision") == "bf16" for r in lay)
if not have_bf16:
    print("no ffn bf16 here (no AVX512_BF16): its columns and the ratios that need it are n/a")
print("ms = minimum over repeats; %peak = ffn bf16 GFLOP/s / bf16 peak; "
      "vs torch = PyTorch-autocast ms / ffn bf16 ms; vs fp32 = ffn fp32 ms / ffn bf16 ms")
hdr = (f"{'layer':<7}{'D':>5}{'F':>6}{'N':>5}{'thr':>4}  {'pass':<9}{'bf16 ms':>9}{'GFLOP/s':>9}"
       f"{'%peak':>7}{'torch ms':>10}{'vs torch':>9}{'fp32 ms':>9}{'vs fp32':>8}")
print(hdr)
print("-" * len(hdr))
for key in lay:  # a row per ffn bf16 run, or per ffn fp32 run where bf16 is n/a
    if key.get("peer") != "ffn" or key.get("precision") != ("bf16" if have_bf16 else "fp32"):
        continue
    r = key if have_bf16 else None
    peak = peaks[key["threads"]]["bf16_gflops"]
    tq, fq = find("pytorch", "bf16", key), find("ffn", "fp32", key)
    for k, name in (("forward", "fwd"), ("forward_backward", "fwd+bwd")):
        ms = r[k]["min_ms"] if r else None
        gf = r[k]["gflops"] if r else None
        tms = tq[k]["min_ms"] if tq else None
        fms = fq[k]["min_ms"] if fq else None
        pct = f"{num(100 * gf / peak, '.0f')}%" if gf and peak else "n/a"
        vs_t = f"{tms / ms:.2f}x" if ms and tms else "n/a"
        vs_f = f"{fms / ms:.2f}x" if ms and fms else "n/a"
        print(f"{key['type']:<7}{key['hidden']:>5}{key['intermediate']:>6}{key['tokens']:>5}{key['threads']:>4}  "
              f"{name:<9}{num(ms, '.2f'):>9}{num(gf, '.1f'):>9}{pct:>7}{num(tms, '.2f'):>10}{vs_t:>9}"
              f"{num(fms, '.2f'):>9}{vs_f:>8}")
print()
for r in lay:
    if r.get("peer") == "ffn" and r.get("precision") == "bf16" and r["tokens"] == 64:
        print(f"bf16 weight refresh {r['type']} {r['hidden']}x{r['intermediate']} "
              f"{r['threads']} threads: {r['refresh_ms']:.2f} ms")
PYEOF
