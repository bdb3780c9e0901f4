#!/usr/bin/env bash
# bench/bench_smallbatch.sh -- the layer forward at small batches against
# the roofline and PyTorch, one table, one run (run by `make bench` through
# bench/run.sh, or alone; ~3 minutes on 2 cores).
#
# Shapes: SwiGLU (D, F) = (1024, 2816) and (4096, 11008), GELU dense
# (1024, 4096); N = 1 2 4 8 16 24 32 48 64; forward; at each thread count
# of BENCH_THREADS (default "1 2").
#
# Per thread count, in the same run: the FMA peak and the read bandwidth
# (`ffn bench peak --json`, `ffn bench bandwidth --json`); then per shape
# one process of bench/smallbatch.c (the library's split "table", every n
# on the matrix engine "engine", and the split before the small-batch
# kernels "old", interleaved) and one of bench/torch_smallbatch.py.
# Printed per row: ffn's time (the table), % of the memory roofline (the
# weights read once ÷ the bandwidth, over the time), % of the FMA peak,
# "roofline" = the larger of the two, ffn / PyTorch, and table / engine and
# table / old (below 1 is faster).  The table / engine column is what the
# split in src/kernels/gemv.c is derived from: it should stay <= ~1.0 up
# to the table's n and the engine should win above.
#
# Environment:
#   BENCH_THREADS   thread counts (default "1 2")
#   BENCH_SB_NS     token counts (default "1 2 4 8 16 24 32 48 64")
#   BENCH_QUICK=1   skip the (4096, 11008) shape
#   BENCH_PREV_FFN  an `ffn` binary of an earlier commit: also prints
#                   `ffn bench layer` at N = 1 and 512 for it and for this
#                   build, interleaved (the no-regression check)
#   BENCH_SB_OUT    the JSON lines (default build/bench/smallbatch.jsonl)
#   SMALLBATCH_CPU_TIME=1  ffn's times in process CPU time (with
#                   BENCH_THREADS=1 on a loaded machine: time spent
#                   descheduled does not count; the table/engine and
#                   table/old ratios stay meaningful, the roofline % not)
# Needs build/libffn_internal.a and build/ffn (make all).  Numbers from a loaded
# machine mean little: run it on an idle one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=/usr/bin/python3
FFN=${FFN_BIN:-build/ffn}
OUT=${BENCH_SB_OUT:-build/bench/smallbatch.jsonl}
NS=${BENCH_SB_NS:-1 2 4 8 16 24 32 48 64}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
[[ -x "$FFN" && -f build/libffn_internal.a ]] || { echo "bench_smallbatch.sh: build first (make all)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/smallbatch.c" \
    "$ROOT/build/libffn_internal.a" -ldnnl -fopenmp -lm -lpthread -lpcre2-8 -o "$tmp/smallbatch"
have_torch=1
$PY -c 'import torch' 2>/dev/null || { have_torch=0; echo "bench_smallbatch.sh: PyTorch not found; ffn only" >&2; }
uptime | sed 's/^/load: /'

shapes=("swiglu 1024 2816" "gelu 1024 4096")
[[ "${BENCH_QUICK:-0}" == 1 ]] || shapes+=("swiglu 4096 11008")
for T in ${BENCH_THREADS:-1 2}; do
    "$FFN" bench peak --threads "$T" --json | sed 's/^{/{"for_threads": '"$T"', /' >>"$OUT"
    "$FFN" bench bandwidth --threads "$T" --json | sed 's/^{/{"for_threads": '"$T"', /' >>"$OUT"
    for shape in "${shapes[@]}"; do
        read -r type D F <<<"$shape"
        echo "== $type D=$D F=$F, $T threads" >&2
        # shellcheck disable=SC2086
        "$tmp/smallbatch" "$type" "$D" "$F" "$T" $NS >>"$OUT"
        # shellcheck disable=SC2086
        ((have_torch)) && $PY bench/torch_smallbatch.py "$type" "$D" "$F" "$T" $NS >>"$OUT"
    done
done

if [[ -n "${BENCH_PREV_FFN:-}" ]]; then
    for T in ${BENCH_THREADS:-1 2}; do
        for N in 1 512; do
            for round in 1 2; do
                for peer in prev this; do
                    bin=$FFN
                    [[ $peer == prev ]] && bin=$BENCH_PREV_FFN
                    "$bin" bench layer --type swiglu --hidden 1024 --intermediate 2816 --tokens "$N" \
                        --threads "$T" --json |
                        sed 's/^{/{"peer": "'$peer'", "round": '$round', /' >>"$OUT"
                done
            done
        done
    done
fi

$PY - "$OUT" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peak = {r["for_threads"]: r["gflops"] for r in rows if r.get("bench") == "peak"}
bw = {r["for_threads"]: r["gbps"] for r in rows if r.get("bench") == "bandwidth"}
key = lambda r: (r["type"], r["hidden"], r["intermediate"], r["threads"], r["tokens"])
torch = {key(r): r for r in rows if r.get("bench") == "smallbatch" and r["peer"] == "pytorch"}
ffn = [r for r in rows if r.get("bench") == "smallbatch" and r["peer"] == "ffn"]
for T in sorted(peak):
    print(f"\n{T} thread(s): FMA peak {peak[T]:.1f} GFLOP/s, read bandwidth {bw[T]:.1f} GB/s "
          "(same run); forward, times in ms (minimum over interleaved rounds)")
    hdr = (f"{'layer':<8}{'D':>6}{'F':>7}{'N':>4}{'ffn ms':>9}{'mem%':>7}{'peak%':>7}"
           f"{'roofline':>9}{'torch ms':>10}{'ffn/torch':>10}{'tbl/engine':>11}{'tbl/old':>8}  split")
    print(hdr)
    print("-" * len(hdr))
    for r in ffn:
        if r["threads"] != T:
            continue
        ms = r["table_ms"]
        mem = 100 * (r["weight_bytes"] / (bw[T] * 1e9) * 1e3) / ms
        fl = 100 * (r["flops"] / (peak[T] * 1e9) * 1e3) / ms
        t = torch.get(key(r))
        tm = t["ms"] if t else float("nan")
        side = "stream" if r["tokens"] <= r["stream_max_n"] else "engine"
        print(f"{r['type']:<8}{r['hidden']:>6}{r['intermediate']:>7}{r['tokens']:>4}{ms:>9.3f}"
              f"{mem:>6.1f}%{fl:>6.1f}%{max(mem, fl):>8.1f}%{tm:>10.3f}{ms / tm:>10.2f}"
              f"{ms / r['engine_ms']:>11.2f}{ms / r['old_ms']:>8.2f}  {side}")
prev = [r for r in rows if r.get("bench") == "layer"]
if prev:
    print("\nagainst BENCH_PREV_FFN (swiglu 1024x2816, `ffn bench layer`, min over 2 rounds)")
    print(f"{'threads':>7}{'N':>5}  {'pass':<8}{'prev ms':>9}{'this ms':>9}{'this/prev':>10}")
    for T in sorted({r["threads"] for r in prev}):
        for N in (1, 512):
            sel = [r for r in prev if r["threads"] == T and r["tokens"] == N]
            for p in ("forward", "forward_backward"):
                a = min((r[p]["min_ms"] for r in sel if r["peer"] == "prev"), default=float("nan"))
                b = min((r[p]["min_ms"] for r in sel if r["peer"] == "this"), default=float("nan"))
                print(f"{T:>7}{N:>5}  {'fwd' if p == 'forward' else 'fwd+bwd':<8}{a:>9.3f}{b:>9.3f}"
                      f"{b / a:>10.2f}")
PYEOF
