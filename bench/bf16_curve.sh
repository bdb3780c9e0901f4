#!/usr/bin/env bash
# bench/bf16_curve.sh -- what bf16 products cost on a training curve: the
# same small Transformer trained with --precision fp32 on 3 seeds and with
# --precision bf16 on the first of them, the held-out loss compared at the
# same evaluation steps.  Prints, per evaluation step, the fp32 seeds' mean,
# standard deviation and range, the bf16 value, and the precision effect
# alone (bf16 − fp32 at the same seed); at the last step it checks that the
# bf16 loss lies within the fp32 seeds' range widened by one standard
# deviation on each side, and exits 1 when it does not.
#
# Model: the built-in English corpus, char tokenizer, D 128, F 344 (SwiGLU),
# 4 layers, T 64, B 16; STEPS steps (default 400).  About 3 minutes on 2
# idle cores (4 runs).  Training is deterministic at a fixed thread count,
# so the numbers repeat run to run.
#
# Environment: CURVE_STEPS (400), CURVE_THREADS (2), CURVE_MLP (gated; or
# moe), CURVE_OUT (build/bench/bf16_curve).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
FFN=${FFN_BIN:-build/ffn}
STEPS=${CURVE_STEPS:-400}
T=${CURVE_THREADS:-2}
MLP=${CURVE_MLP:-gated}
OUT=${CURVE_OUT:-build/bench/bf16_curve}
[[ -x "$FFN" ]] || { echo "bf16_curve.sh: $FFN not built (run make)" >&2; exit 1; }
mkdir -p "$OUT"
common=(--hidden-size 128 --intermediate-size 344 --num-hidden-layers 4 --seq-len 64
        --batch-size 16 --mlp-type "$MLP" --steps "$STEPS" --eval-every $((STEPS / 8))
        --eval-batches 8 --threads "$T" --quiet --force)
echo "bf16_curve: $STEPS steps, mlp $MLP, $T threads, $(date -u +%FT%TZ)"
uptime | sed 's/^/load: /'
for seed in 1 2 3; do
    echo "== fp32 seed $seed" >&2
    "$FFN" train "${common[@]}" --seed "$seed" --precision fp32 --out "$OUT/fp32_s$seed" \
        --log "$OUT/fp32_s$seed.jsonl" >/dev/null
done
echo "== bf16 seed 1" >&2
# a CPU without AVX512_BF16 refuses bf16: the fp32 curve alone, bf16 n/a
rm -f "$OUT/bf16_s1.jsonl"
if ! "$FFN" train "${common[@]}" --seed 1 --precision bf16 --out "$OUT/bf16_s1" \
        --log "$OUT/bf16_s1.jsonl" >/dev/null 2>"$OUT/bf16_s1.err"; then
    grep -q AVX512_BF16 "$OUT/bf16_s1.err" || { cat "$OUT/bf16_s1.err" >&2; exit 1; }
    echo "bf16: n/a here ($(head -c 160 "$OUT/bf16_s1.err"))"
    rm -f "$OUT/bf16_s1.jsonl"
fi
$PY - "$OUT" <<'PYEOF'
import os
import json, statistics, sys
out = sys.argv[1]
def vals(name):
    v = {}
    for line in open(f"{out}/{name}.jsonl"):
        o = json.loads(line)
        if "val_loss" in o:
            v[o["step"]] = o["val_loss"]
    return v
def tps(name):
    rows = [json.loads(l) for l in open(f"{out}/{name}.jsonl")]
    return statistics.median(r["tokens_per_s"] for r in rows if "tokens_per_s" in r) if rows and "tokens_per_s" in rows[-1] else float("nan")
fp = [vals(f"fp32_s{s}") for s in (1, 2, 3)]
have_bf = os.path.exists(f"{out}/bf16_s1.jsonl")  # else refused here: n/a
bf = vals("bf16_s1") if have_bf else {}
steps = sorted(set(fp[0]).intersection(*fp[1:], *([bf] if have_bf else [])))
def num(v, fmt):
    return format(v, fmt) if v is not None else "n/a"
print(f"{'step':>6} {'fp32 mean':>10} {'sd':>8} {'min':>8} {'max':>8} {'bf16 s1':>9} "
      f"{'bf16-fp32(s1)':>14}")
for s in steps:
    f = [v[s] for v in fp]
    b = bf.get(s)
    print(f"{s:>6} {statistics.mean(f):>10.4f} {statistics.stdev(f):>8.4f} {min(f):>8.4f} "
          f"{max(f):>8.4f} {num(b, '.4f'):>9} {num(b - fp[0][s] if b is not None else None, '+.4f'):>14}")
last = steps[-1]
f = [v[last] for v in fp]
sd = statistics.stdev(f)
lo, hi = min(f) - sd, max(f) + sd
ok = not have_bf or lo <= bf[last] <= hi
print(f"step {last}: bf16 val loss {num(bf.get(last), '.4f')}; fp32 seeds {', '.join(f'{x:.4f}' for x in f)} "
      f"(mean {statistics.mean(f):.4f}, sd {sd:.4f}); accepted band [{lo:.4f}, {hi:.4f}]: "
      f"{('within' if ok else 'OUTSIDE') if have_bf else 'n/a (no bf16 here)'}")
print(f"tokens/s (median per step): fp32 s1 {tps('fp32_s1'):.0f}, bf16 s1 "
      f"{num(tps('bf16_s1') if have_bf else None, '.0f')}")
sys.exit(0 if ok else 1)
PYEOF
