#!/usr/bin/env bash
# bench/bench_train.sh -- training speed of the whole small Transformer (run by
# `make bench` through bench/run.sh, or alone): `ffn train` against the same
# model in PyTorch eager (bench/torch_train.py), one process per peer, the
# same threads, batch, context and data.
#
# The model: Llama style, D = 128, 4 layers, 4 heads, T = 128, SwiGLU of
# width F = 344, tied head, char vocabulary of tinyshakespeare (66 symbols
# with <unk>): 0.80 M parameters.  Then, unless BENCH_TRAIN_MOE=0, the MoE
# variant: top-2 of 4 SwiGLU experts of width 172 (the dense SwiGLU's active
# parameters).
#
# Tokens/s is the steady training rate: the steps after the first W
# (warm-up) ones, wall clock, evaluation and checkpointing excluded.  For
# ffn it comes from --log metrics.jsonl, whose tokens_per_s is cumulative
# over the training time (evaluation excluded), so the training seconds up
# to step k are k·B·T / tokens_per_s_k and the steady rate is
# (S - W)·B·T / (seconds_S - seconds_W).  Peak memory is the max RSS of
# each process from /usr/bin/time -v (Debian package `time`).
#
# Each peer runs BENCH_TRAIN_REPEATS times (default 3, quick 1), the peers
# alternating, and the best (highest) rate of each counts: on a shared
# machine the best run is the least disturbed one.  PyTorch runs in two
# thread set-ups and the faster counts (conservative for the ratio):
# torch.set_num_threads(T) with OpenBLAS's own threads at the default, and
# the same with OPENBLAS_NUM_THREADS=1 (Debian's torch 1.13 calls the system
# libblas.so.3 -- BLAS_INFO=generic -- which update-alternatives may point at
# OpenBLAS or at the slow reference BLAS; the script prints which, and the
# GFLOP/s torch gets on a 1024^3 matmul and on a (1024,128)x(128,344) one).
#
# Target: ffn/PyTorch >= 1.5.
#
# Environment:
#   BENCH_THREADS      threads for both peers (default 2)
#   BENCH_QUICK=1      fewer steps, one run per peer (the whole script
#                      ~20 s on a quiet 2-core machine; the default ~2 min)
#   BENCH_TRAIN_BATCH  sequences per step (default 8)
#   BENCH_TRAIN_MOE=0  skip the MoE variant
#   BENCH_TRAIN_REPEATS  runs per peer (default 3; quick 1)
#   BENCH_TRAIN_OUT    JSON lines here (default build/bench/train.jsonl)
#   FFN_SHARED         the shared data directory (default ../shared)
# Run it on an otherwise idle machine: the numbers mean nothing under load
# (the load average is printed before and after).
set -euo pipefail
cd "$(dirname "$0")/.."
FFN=${FFN_BIN:-build/ffn}
PY=/usr/bin/python3
T=${BENCH_THREADS:-2}
B=${BENCH_TRAIN_BATCH:-8}
SEQ=128
DATA=${FFN_SHARED:-../shared}/data/tinyshakespeare.txt
OUT=${BENCH_TRAIN_OUT:-build/bench/train.jsonl}
if [[ "${BENCH_QUICK:-0}" == 1 ]]; then
    FFN_STEPS=60 TORCH_STEPS=12 WARM=3 REPS=${BENCH_TRAIN_REPEATS:-1}
else
    FFN_STEPS=200 TORCH_STEPS=40 WARM=5 REPS=${BENCH_TRAIN_REPEATS:-3}
fi

[[ -x "$FFN" ]] || { echo "bench_train.sh: $FFN not built (run make)" >&2; exit 1; }
[[ -r "$DATA" ]] || { echo "bench_train.sh: $DATA: cannot read the training text" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_train.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
have_torch=1
$PY -c 'import torch' 2>/dev/null || { have_torch=0; echo "bench_train.sh: PyTorch not found; ffn only" >&2; }

mkdir -p "$(dirname "$OUT")"
: >"$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "train: D=128 L=4 H=4 T=$SEQ B=$B, char vocab of $(basename "$DATA"), $T threads," \
     "steps ffn $FFN_STEPS / pytorch $TORCH_STEPS, first $WARM untimed, best of $REPS"
uptime | sed 's/^/load before: /'
if ((have_torch)); then
    echo "libblas.so.3 -> $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo '?')"
    $PY - "$T" <<'PYEOF'
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
def rate(m, k, n, reps):
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * m * k * n * reps / (time.perf_counter() - t) / 1e9
print(f"torch {torch.__version__} matmul on {sys.argv[1]} threads: 1024^3 {rate(1024, 1024, 1024, 5):.1f} GFLOP/s, "
      f"(1024,128)x(128,344) {rate(1024, 128, 344, 50):.1f} GFLOP/s")
PYEOF
fi

model=(--hidden-size 128 --num-hidden-layers 4 --num-attention-heads 4 --num-key-value-heads 4)
# max RSS in kB from a /usr/bin/time -v report
max_rss() { sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$1"; }

run_ffn() { # variant, then ffn train flags
    local v=$1; shift
    local dir=$tmp/ffn-$v
    rm -f "$tmp/ffn-$v.jsonl"
    /usr/bin/time -v -o "$tmp/time-ffn-$v" "$FFN" train --data "$DATA" --tokenizer char \
        "${model[@]}" "$@" --seq-len "$SEQ" --batch-size "$B" --steps "$FFN_STEPS" \
        --eval-every 0 --eval-batches 1 --threads "$T" --out "$dir" --force \
        --log "$tmp/ffn-$v.jsonl" --quiet --json >"$tmp/ffn-$v.json"
    $PY - "$tmp/ffn-$v.jsonl" "$tmp/ffn-$v.json" "$(max_rss "$tmp/time-ffn-$v")" \
        "$v" "$B" "$SEQ" "$WARM" "$T" <<'PYEOF' | tee -a "$OUT"
import json, sys
log, summ, rss, v, B, T, W, th = sys.argv[1:]
B, T, W = int(B), int(T), int(W)
rows = [json.loads(l) for l in open(log) if l.strip()]
s = json.load(open(summ))
secs = {r["step"]: r["step"] * B * T / r["tokens_per_s"] for r in rows}
last = rows[-1]["step"]
tps = (last - W) * B * T / (secs[last] - secs[W])
print(json.dumps({"peer": "ffn", "variant": v, "params": s.get("params"),
                  "batch_size": B, "seq_len": T, "threads": int(th), "steps": last,
                  "timed_steps": last - W, "seconds": round(secs[last] - secs[W], 3),
                  "tokens_per_s": round(tps, 1), "final_loss": round(rows[-1]["loss"], 4),
                  "max_rss_kb": int(rss)}))
PYEOF
}

run_torch() { # variant, openblas threads (or ""), then torch_train.py flags
    local v=$1 ob=$2; shift 2
    local env=()
    [[ -n "$ob" ]] && env=(env OPENBLAS_NUM_THREADS="$ob")
    /usr/bin/time -v -o "$tmp/time-pt-$v" "${env[@]}" $PY bench/torch_train.py --data "$DATA" \
        --hidden-size 128 --layers 4 --heads 4 --seq-len "$SEQ" --batch-size "$B" "$@" \
        --steps "$TORCH_STEPS" --warmup "$WARM" --threads "$T" --json >"$tmp/pt-$v.json"
    $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); r["max_rss_kb"]=int(sys.argv[2]); r["openblas_threads"]=sys.argv[3] or "default"; print(json.dumps(r))' \
        "$tmp/pt-$v.json" "$(max_rss "$tmp/time-pt-$v")" "$ob" | tee -a "$OUT"
}

for ((rep = 1; rep <= REPS; rep++)); do
    run_ffn swiglu --mlp-type gated --hidden-act silu --intermediate-size 344
    if ((have_torch)); then
        run_torch swiglu "" --intermediate-size 344
        run_torch swiglu 1 --intermediate-size 344
    fi
    if [[ "${BENCH_TRAIN_MOE:-1}" != 0 ]]; then
        run_ffn moe --mlp-type moe --hidden-act silu --intermediate-size 344 --num-experts 4 \
            --num-experts-per-tok 2 --moe-intermediate-size 172
        if ((have_torch)); then
            run_torch moe "" --moe 4,2,172
            run_torch moe 1 --moe 4,2,172
        fi
    fi
done
uptime | sed 's/^/load after: /'

$PY - "$OUT" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def best(peer, v):
    rs = [r for r in rows if r["peer"] == peer and r["variant"] == v]
    return max(rs, key=lambda r: r["tokens_per_s"]) if rs else None
def runs(peer, v):
    return " ".join(f"{r['tokens_per_s']:.0f}" for r in rows if r["peer"] == peer and r["variant"] == v)
print("\nsteady training tokens/s (wall clock, after the warm-up steps), best run of each peer; "
      "max RSS of that process")
print("PyTorch: Debian's torch 1.13 eager through the system libblas.so.3 (see the matmul GFLOP/s above);"
      " its best of OpenBLAS threads default / 1 counts")
hdr = f"{'variant':<8}{'params':>10}{'ffn tok/s':>11}{'torch tok/s':>13}{'ffn/torch':>11}{'ffn MB':>9}{'torch MB':>10}"
print(hdr)
print("-" * len(hdr))
for v in ("swiglu", "moe"):
    f, t = best("ffn", v), best("pytorch", v)
    if not f:
        continue
    tt = t["tokens_per_s"] if t else float("nan")
    tm = t["max_rss_kb"] / 1024 if t else float("nan")
    print(f"{v:<8}{f['params']:>10}{f['tokens_per_s']:>11.0f}{tt:>13.0f}"
          f"{f['tokens_per_s'] / tt:>10.2f}x{f['max_rss_kb'] / 1024:>9.1f}{tm:>10.1f}"
          + ("" if not t or t["params"] == f["params"] else f"  (torch params {t['params']})"))
for v in ("swiglu", "moe"):
    if best("ffn", v):
        print(f"  all runs {v}: ffn {runs('ffn', v)}; pytorch {runs('pytorch', v)}")
print("target: ffn/torch >= 1.5x")
PYEOF
