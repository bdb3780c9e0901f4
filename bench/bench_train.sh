#!/usr/bin/env bash
# bench/bench_train.sh -- training speed of the whole Transformer (run by
# `make bench` through bench/run.sh, or alone): `ffn train` against the same
# model in PyTorch eager (bench/torch_train.py), fp32 and with bf16 autocast,
# one process per peer and set-up, the same threads, batch, context and data.
#
# The models (Llama style, tied head, char vocabulary of tinyshakespeare:
# 66 symbols with <unk>), by BENCH_TRAIN_SIZES (default "512 1024"):
#   D = 512:  8 layers, 8 heads,  T = 256, SwiGLU F = 1376, B = 2   (25.3 M params)
#   D = 1024: 8 layers, 16 heads, T = 256, SwiGLU F = 2752, B = 1   (101 M params)
#   D = 128:  4 layers, 4 heads,  T = 128, SwiGLU F = 344,  B = 8   (the small model
#             of earlier versions of this script; not run by default)
# B is chosen so that a step takes >= 0.2 s on 2 cores.  Each size also in
# the MoE variant (unless BENCH_TRAIN_MOE=0): top-2 of 4 SwiGLU experts of
# width F/2 (the dense SwiGLU's active parameters).
#
# Per size and variant, in one run:
#   ffn fp32        2 threads (BENCH_THREADS) with --profile (the step's
#                   parts and the matrix products' share of the FMA peak),
#                   and 1 thread: the thread scaling
#   ffn bf16        `ffn train --precision bf16`, only when `ffn train --help`
#                   lists --precision
#   PyTorch fp32    torch 1.13 eager on the system libblas.so.3 (OpenBLAS
#                   here; the script prints what it points at), 2 threads
#                   with OPENBLAS_NUM_THREADS 2 and 1 (torch's own threads
#                   and OpenBLAS's can get in each other's way: the faster
#                   counts, conservative for the ratio), and 1 thread
#   PyTorch bf16    the same under torch.autocast("cpu", dtype=torch.bfloat16)
#                   (its products on oneDNN's bf16 kernels), 2 threads, the
#                   faster of the two OpenBLAS settings
# and a check that both peers compute the same model: PyTorch loads the
# weights of ffn's fp32 run directory (exactly its tensors and shapes, so
# the same parameter count) and both report the next-token loss over the
# same windows of text (`ffn eval --window T --stride T` and
# torch_train.py --check-ffn); the two must agree to 1e-4 (relative).
#
# Tokens/s is the steady training rate: the steps after the first W (warm-up)
# ones, wall clock, evaluation and checkpointing excluded.  For ffn it comes
# from --log metrics.jsonl, whose tokens_per_s is cumulative over the
# training time, so the training seconds up to step k are
# k·B·T / tokens_per_s_k and the steady rate is (S - W)·B·T / (seconds_S -
# seconds_W).  Peak memory is the max RSS of each process (/usr/bin/time -v).
#
# Targets at D = 512 and 1024: ffn fp32 >= 1.3x PyTorch fp32 with the
# products >= 88% of the FMA peak, thread scaling 1 -> 2 >= 1.8x; ffn bf16
# >= 1.7x ffn fp32 and >= 1.3x PyTorch bf16.
#
# Environment:
#   BENCH_THREADS       threads of the main runs (default 2)
#   BENCH_QUICK=1       fewer steps (about 2.5 min on a quiet 2-core machine;
#                       the default about 4 min)
#   BENCH_TRAIN_SIZES   which models (default "512 1024"; also 128)
#   BENCH_TRAIN_MOE=0   skip the MoE variants
#   BENCH_TRAIN_BATCH   sequences per step for every size (default per size)
#   BENCH_TRAIN_OUT     JSON lines here (default build/bench/train.jsonl)
#   FFN_SHARED          the shared data directory (default ../shared)
# Run it on an otherwise idle machine: the numbers mean nothing under load
# (the load average is printed before and after).
set -euo pipefail
cd "$(dirname "$0")/.."
FFN=${FFN_BIN:-build/ffn}
PY=/usr/bin/python3
TH=${BENCH_THREADS:-2}
DATA=${FFN_SHARED:-../shared}/data/tinyshakespeare.txt
OUT=${BENCH_TRAIN_OUT:-build/bench/train.jsonl}
SIZES=${BENCH_TRAIN_SIZES:-512 1024}
if [[ "${BENCH_QUICK:-0}" == 1 ]]; then
    FFN_STEPS=4 TORCH_STEPS=3 WARM=1
else
    FFN_STEPS=6 TORCH_STEPS=5 WARM=2
fi

[[ -x "$FFN" ]] || { echo "bench_train.sh: $FFN not built (run make)" >&2; exit 1; }
[[ -r "$DATA" ]] || { echo "bench_train.sh: $DATA: cannot read the training text" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_train.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 1; }
have_torch=1
$PY -c 'import torch' 2>/dev/null || { have_torch=0; echo "bench_train.sh: PyTorch not found; ffn only" >&2; }
# bf16 only where ffn runs it here: a CPU without AVX512_BF16 refuses it (the
# ffn-bf16 figures and their ratios are then n/a, not guessed)
have_bf16=0 no_bf16="no --precision"
if "$FFN" train --help 2>/dev/null | grep -q -- '--precision'; then
    if "$FFN" bench layer --hidden 16 --intermediate 16 --tokens 8 --repeats 1 --precision bf16 \
        --json >/dev/null 2>"${TMPDIR:-/tmp}/bench_train_bf16.$$"; then
        have_bf16=1
    else
        no_bf16="refused here: $(head -c 160 "${TMPDIR:-/tmp}/bench_train_bf16.$$")"
    fi
    rm -f "${TMPDIR:-/tmp}/bench_train_bf16.$$"
fi

mkdir -p "$(dirname "$OUT")"
: >"$OUT"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "train: sizes D = $SIZES, $TH and 1 threads, char vocab of $(basename "$DATA")," \
     "steps ffn $FFN_STEPS / pytorch $TORCH_STEPS, first $WARM untimed; ffn bf16: $([[ $have_bf16 == 1 ]] && echo yes || echo "n/a ($no_bf16)")"
uptime | sed 's/^/load before: /'
"$FFN" bench peak --threads "$TH" --json | tee -a "$OUT"
if ((have_torch)); then
    echo "libblas.so.3 -> $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo '?')"
    OPENBLAS_NUM_THREADS=$TH $PY - "$TH" <<'PYEOF'
import sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
def rate(m, k, n, reps, dtype=torch.float32):
    a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
    a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * m * k * n * reps / (time.perf_counter() - t) / 1e9
print(f"torch {torch.__version__} matmul on {sys.argv[1]} threads: 1024^3 fp32 {rate(1024, 1024, 1024, 5):.1f} GFLOP/s, "
      f"bf16 {rate(1024, 1024, 1024, 5, torch.bfloat16):.1f} GFLOP/s")
PYEOF
fi

# max RSS in kB from a /usr/bin/time -v report
max_rss() { sed -n 's/^[[:space:]]*Maximum resident set size (kbytes): //p' "$1"; }

# size -> "L H T B F"
shape_of() {
    case $1 in
    128) echo "4 4 128 8 344" ;;
    512) echo "8 8 256 2 1376" ;;
    1024) echo "8 16 256 1 2752" ;;
    *) echo "bench_train.sh: BENCH_TRAIN_SIZES: no model for D = $1 (128, 512, 1024)" >&2; exit 2 ;;
    esac
}

# run_ffn TAG THREADS flags...: one ffn run; a JSON line (with the profile
# when --profile is among the flags)
run_ffn() {
    local tag=$1 th=$2; shift 2
    rm -f "$tmp/$tag.jsonl"
    /usr/bin/time -v -o "$tmp/time-$tag" "$FFN" train --data "$DATA" --tokenizer char \
        "${model[@]}" "$@" --seq-len "$SEQ" --batch-size "$B" --steps "$FFN_STEPS" \
        --eval-every 0 --eval-batches 1 --threads "$th" --out "$tmp/run-$tag" --force \
        --log "$tmp/$tag.jsonl" --quiet --json >"$tmp/$tag.json" 2>"$tmp/$tag.err" ||
        { cat "$tmp/$tag.err" >&2; return 1; }
    $PY - "$tmp/$tag.jsonl" "$tmp/$tag.json" "$(max_rss "$tmp/time-$tag")" "$peer" "$v" "$D" \
        "$B" "$SEQ" "$WARM" "$th" <<'PYEOF' | tee -a "$OUT"
import json, sys
log, summ, rss, peer, v, D, B, T, W, th = sys.argv[1:]
D, B, T, W = int(D), int(B), int(T), int(W)
rows = [json.loads(l) for l in open(log) if l.strip()]
s = json.load(open(summ))
secs = {r["step"]: r["step"] * B * T / r["tokens_per_s"] for r in rows}
last = rows[-1]["step"]
tps = (last - W) * B * T / (secs[last] - secs[W])
r = {"peer": peer, "variant": v, "D": D, "params": s.get("params"), "batch_size": B,
     "seq_len": T, "threads": int(th), "steps": last, "timed_steps": last - W,
     "seconds": round(secs[last] - secs[W], 3), "tokens_per_s": round(tps, 1),
     "final_loss": round(rows[-1]["loss"], 4), "max_rss_kb": int(rss)}
p = s.get("profile")
if p:
    st = p["step_seconds"]
    r["profile"] = {"share": {k: round(x / st, 4) for k, x in p["seconds"].items()},
                    "step_seconds": round(st / p["steps"], 4),
                    "product_gflops": p["product_gflops"], "fma_peak_gflops": p["fma_peak_gflops"],
                    "product_pct_peak": p["product_pct_peak"]}
print(json.dumps(r))
PYEOF
}

# run_torch TAG THREADS OPENBLAS_THREADS flags...
run_torch() {
    local tag=$1 th=$2 ob=$3; shift 3
    /usr/bin/time -v -o "$tmp/time-$tag" env OPENBLAS_NUM_THREADS="$ob" $PY bench/torch_train.py \
        --data "$DATA" --hidden-size "$D" --layers "$L" --heads "$H" --seq-len "$SEQ" \
        --batch-size "$B" "$@" --steps "$TORCH_STEPS" --warmup "$WARM" --threads "$th" \
        --json >"$tmp/$tag.json"
    $PY -c 'import json,sys; r=json.load(open(sys.argv[1])); r["max_rss_kb"]=int(sys.argv[2]); r["D"]=int(sys.argv[3]); r["openblas_threads"]=int(sys.argv[4]); print(json.dumps(r))' \
        "$tmp/$tag.json" "$(max_rss "$tmp/time-$tag")" "$D" "$ob" | tee -a "$OUT"
}

# check_model TAG torch-flags...: the same loss at ffn's weights
check_model() {
    local tag=$1; shift
    local dir=$tmp/run-$tag n=$((8 * SEQ))
    head -c 20000 "$DATA" >"$tmp/check.txt"
    "$FFN" tokenize --tokenizer "$dir" --file "$tmp/check.txt" --ids-only --no-specials |
        awk -v n="$n" '{ for (i = 1; i <= NF && i <= n; i++) printf "%s ", $i }' >"$tmp/check.ids"
    "$FFN" eval "$dir" --data "$tmp/check.txt" --window "$SEQ" --stride "$SEQ" \
        --max-tokens "$n" --threads "$TH" --json >"$tmp/check-ffn.json"
    $PY bench/torch_train.py --check-ffn "$dir" --ids "$tmp/check.ids" --hidden-size "$D" \
        --layers "$L" --heads "$H" --seq-len "$SEQ" "$@" --threads "$TH" --json >"$tmp/check-pt.json"
    $PY - "$tmp/check-ffn.json" "$tmp/check-pt.json" "$tmp/$tag.json" "$v" "$D" <<'PYEOF' | tee -a "$OUT"
import json, sys
f, t, s = (json.load(open(p)) for p in sys.argv[1:4])
ok = (t["params"] == s["params"] and f["scored"] == t["scored"]
      and abs(f["nll"] - t["nll"]) <= 1e-4 * abs(f["nll"]))
print(json.dumps({"check": "same model", "variant": sys.argv[4], "D": int(sys.argv[5]),
                  "params_ffn": s["params"], "params_torch": t["params"], "scored": t["scored"],
                  "nll_ffn": f["nll"], "nll_torch": t["nll"], "ok": ok}))
PYEOF
}

for D in $SIZES; do
    read -r L H SEQ B F <<<"$(shape_of "$D")"
    B=${BENCH_TRAIN_BATCH:-$B}
    model=(--hidden-size "$D" --num-hidden-layers "$L" --num-attention-heads "$H"
           --num-key-value-heads "$H")
    variants=(swiglu)
    [[ "${BENCH_TRAIN_MOE:-1}" != 0 ]] && variants+=(moe)
    for v in "${variants[@]}"; do
        if [[ $v == swiglu ]]; then
            fflags=(--mlp-type gated --hidden-act silu --intermediate-size "$F")
            tflags=(--intermediate-size "$F")
        else
            fflags=(--mlp-type moe --hidden-act silu --intermediate-size "$F" --num-experts 4
                    --num-experts-per-tok 2 --moe-intermediate-size $((F / 2)))
            tflags=(--moe 4,2,$((F / 2)))
        fi
        echo "-- D=$D L=$L H=$H T=$SEQ B=$B $v"
        peer=ffn
        run_ffn "$D-$v-ffn" "$TH" "${fflags[@]}" --profile
        run_ffn "$D-$v-ffn-1t" 1 "${fflags[@]}"
        if ((have_bf16)); then
            peer=ffn-bf16
            run_ffn "$D-$v-ffn-bf16" "$TH" "${fflags[@]}" --precision bf16
        fi
        if ((have_torch)); then
            check_model "$D-$v-ffn" "${tflags[@]}"
            run_torch "$D-$v-pt" "$TH" "$TH" "${tflags[@]}"
            run_torch "$D-$v-pt-ob1" "$TH" 1 "${tflags[@]}"
            run_torch "$D-$v-pt-1t" 1 1 "${tflags[@]}"
            run_torch "$D-$v-pt-bf16" "$TH" "$TH" "${tflags[@]}" --autocast
            run_torch "$D-$v-pt-bf16-ob1" "$TH" 1 "${tflags[@]}" --autocast
        fi
    done
done
uptime | sed 's/^/load after: /'

$PY - "$OUT" "$TH" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
TH = int(sys.argv[2])
def get(peer, v, D, th):  # the fastest run of that set-up
    rs = [r for r in rows if r.get("peer") == peer and r.get("variant") == v and r.get("D") == D
          and r.get("threads") == th]
    return max(rs, key=lambda r: r["tokens_per_s"]) if rs else None
def tps(r):
    return r["tokens_per_s"] if r else float("nan")
def ratio(a, b):
    return f"{tps(a) / tps(b):.2f}x" if a and b else "n/a"
def cell(r):  # n/a: not measured here (no PyTorch, or bf16 refused by this CPU)
    return f"{tps(r):.0f}" if r else "n/a"
print("\nsteady training tokens/s (wall clock, after the warm-up steps); "
      f"threads {TH} unless marked 1t; pt = PyTorch 1.13 eager, pt-bf16 = with bf16 autocast "
      "(each the faster of OPENBLAS_NUM_THREADS %d / 1)" % TH)
hdr = (f"{'D':>5} {'variant':<7}{'params':>11}{'ffn':>8}{'pt':>8}{'ffn/pt':>8}{'pt-bf16':>9}"
       f"{'ffn/ptbf':>9}{'ffn-bf16':>9}{'bf/ffn':>7}{'bf/ptbf':>8}{'ffn 1t':>8}{'scale':>7}"
       f"{'pt 1t':>7}{'scale':>7}{'prod%pk':>8}")
print(hdr)
print("-" * len(hdr))
seen = []
for r in rows:
    k = (r.get("D"), r.get("variant"))
    if r.get("peer") == "ffn" and k not in seen:
        seen.append(k)
for D, v in seen:
    f, f1 = get("ffn", v, D, TH), get("ffn", v, D, 1)
    p, p1, pb = get("pytorch", v, D, TH), get("pytorch", v, D, 1), get("pytorch-bf16", v, D, TH)
    fb = get("ffn-bf16", v, D, TH)
    pk = f.get("profile", {}).get("product_pct_peak") if f else None
    print(f"{D:>5} {v:<7}{f['params']:>11}{cell(f):>8}{cell(p):>8}{ratio(f, p):>8}"
          f"{cell(pb):>9}{ratio(f, pb):>9}{cell(fb):>9}{ratio(fb, f):>7}{ratio(fb, pb):>8}"
          f"{cell(f1):>8}{ratio(f, f1):>7}{cell(p1):>7}{ratio(p, p1):>7}"
          f"{(f'{pk:.1f}%' if pk is not None else '-'):>8}")
print("\nwhere ffn's step goes (--profile, share of the step time, threads %d):" % TH)
parts = ["ffn_forward", "ffn_backward", "attn_proj", "attn_core", "norm", "embed_head",
         "optimizer", "data", "other", "weight_pack"]
print(f"{'D':>5} {'variant':<7}{'s/step':>8}" + "".join(f"{p[:10]:>11}" for p in parts) + f"{'GFLOP/s':>9}{'peak':>7}")
for D, v in seen:
    f = get("ffn", v, D, TH)
    pr = f.get("profile") if f else None
    if not pr:
        continue
    pk = pr["fma_peak_gflops"]
    print(f"{D:>5} {v:<7}{pr['step_seconds']:>8.3f}" +
          "".join(f"{100 * pr['share'][p]:>10.1f}%" for p in parts) +
          f"{pr['product_gflops']:>9.1f}{(pk if pk else 0):>7.0f}")
checks = [r for r in rows if r.get("check") == "same model"]
for c in checks:
    print(f"same model D={c['D']} {c['variant']}: params ffn {c['params_ffn']} / torch "
          f"{c['params_torch']}, loss over {c['scored']} tokens ffn {c['nll_ffn']:.6f} / torch "
          f"{c['nll_torch']:.6f}: {'ok' if c['ok'] else 'DIFFERENT'}")
print("targets: ffn/pt >= 1.3x, products >= 88% of the FMA peak, scale 1 -> 2 threads >= 1.8x; "
      "bf16: >= 1.7x ffn fp32, >= 1.3x pt-bf16")
sys.exit(0 if all(c["ok"] for c in checks) else 1)
PYEOF
