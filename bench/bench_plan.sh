#!/usr/bin/env bash
# bench/bench_plan.sh -- `ffn plan` against `ffn train` under mpirun, for
# every layout the dist tests run (dp 2, tp 2, ep 2, tp 2 x dp 2, zero 1,
# zero 2, dp 4 oversubscribed on this host's cores), in one run:
#   - the link: `ffn bench link --gap-us 1000 --json` under mpirun -np 2
#     (GB/s a rank sends in the ring all-reduce; us a message when the
#     ranks compute 1 ms between messages, as training does: on a loaded
#     host that includes waiting for a partner the scheduler had put
#     aside), with 2 and with 4 ranks (a layout uses its world's), measured
#     first and last, the two averaged;
#   - the compute: P single-process trainings of the same model with a
#     rank's batch, started together (P = the layout's ranks, so they share
#     the cores and the machine's load as the ranks do): their step time and
#     plan's FLOPs give the GFLOP/s the kernels reach at these shapes,
#     forward, backward and AdamW, one thread, dense and MoE;
#   - each layout: `ffn train` under mpirun (step time = seconds / steps),
#     right after its compute probe (probe, train, probe, train: the means), and `ffn plan` with the same model,
#     layout and the figures above (--link-json, --peak-gflops), printing
#     measured/predicted.
# Fails (exit 1) when a layout's measured/predicted is outside [1/1.5, 1.5]
# (BENCH_PLAN_BOUND to change it).  JSON lines in build/bench/plan.jsonl.
# Environment: BENCH_QUICK=1 (fewer steps), FFN_BIN.  Needs mpirun.
set -euo pipefail
cd "$(dirname "$0")/.."
FFN=$(realpath "${FFN_BIN:-build/ffn}")
OUT=${BENCH_PLAN_OUT:-build/bench/plan.jsonl}
BOUND=${BENCH_PLAN_BOUND:-1.5}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
command -v mpirun >/dev/null || { echo "bench_plan: mpirun missing" >&2; exit 1; }
STEPS=30; REPS=2
[[ "${BENCH_QUICK:-0}" == 1 ]] && { STEPS=12; REPS=1; }
CORES=$(nproc)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== bench_plan: ffn plan vs ffn train, $CORES cores (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
M=(--seq-len 32 --hidden-size 128 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 344
   --corpus en --eval-every 0 --quiet --threads 1 --steps "$STEPS" --json)
MOE=(--num-experts 4 --num-experts-per-tok 2 --moe-intermediate-size 172)
B=8
links() { # SUFFIX: the link with 2 and with 4 ranks
    for np in 2 4; do
        mpirun --oversubscribe -np $np "$FFN" bench link --mb 2 --repeats 5 --gap-us 1000 --threads 1 --json 2>/dev/null |
            tail -1 >"$tmp/link$np$1.json"
    done
}
links a
# P processes at a rank's batch, together: the compute rate at these shapes
probe() { # NAME P EXTRA... -> NAME.json (the slowest of the P), NAME.config.json
    local name=$1 np=$2 k; shift 2
    for ((k = 0; k < np; k++)); do
        ( cd "$tmp" && "$FFN" train "${M[@]}" "$@" --batch-size $B --out $name.$k >$name.$k.json 2>/dev/null ) &
    done
    wait
    /usr/bin/python3 -c 'import json, sys; print(json.dumps(max((json.load(open(f)) for f in sys.argv[1:]), key=lambda j: j["seconds"])))' \
        "$tmp"/$name.*.json >"$tmp/$name.json"
    cp "$tmp/$name.0/config.json" "$tmp/$name.config.json"
}
layouts=("2|--dp 2" "2|--tp 2" "2|--ep 2 --dp 2|moe" "4|--tp 2 --dp 2" "2|--dp 2 --zero 1"
         "2|--dp 2 --zero 2" "4|--dp 4" "4|--ep 2 --dp 4|moe")
i=0
for l in "${layouts[@]}"; do
    IFS='|' read -r np lay moe <<<"$l"
    extra=(); [[ -n "$moe" ]] && extra=("${MOE[@]}")
    for ((rep = 0; rep < REPS; rep++)); do # probe, train, probe, train: the load alike for both
        probe c$i.$rep "$np" "${extra[@]}"
        # shellcheck disable=SC2086
        ( cd "$tmp" && mpirun --oversubscribe -np "$np" "$FFN" train $lay "${M[@]}" "${extra[@]}" --batch-size $B \
            --out r$i.$rep >r$i.$rep.json 2>r$i.err ) || { echo "bench_plan: train $lay failed: $(tail -3 "$tmp/r$i.err")" >&2; exit 1; }
    done
    echo "$np|$lay|$moe" >"$tmp/r$i.lay"
    i=$((i + 1))
done
links b
/usr/bin/python3 - "$tmp" "$FFN" "$i" "$STEPS" "$B" "$REPS" "$BOUND" <<'PY' | tee -a "$OUT"
import json, subprocess, sys
tmp, ffn, n, steps, B, reps, bound = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]), float(sys.argv[7])
ld = lambda p: json.load(open(tmp + "/" + p))
# the link of P ranks: the mean of the first and the last measurements (the load of the run)
links = {}
for P in (2, 4):
    l1, l2 = ld("link%da.json" % P), ld("link%db.json" % P)
    links[P] = dict(l1, link_gbps=(l1["link_gbps"] + l2["link_gbps"]) / 2, latency_us=(l1["latency_us"] + l2["latency_us"]) / 2)
    json.dump(links[P], open(tmp + "/link%d.json" % P, "w"))
def plan(cfg, *a):
    return json.loads(subprocess.run([ffn, "plan", cfg, "--seq-len", "32", "--batch-size", B, *a, "--json"],
                                     capture_output=True, text=True, check=True).stdout)
for P in (2, 4):
    print("link of %d ranks: %.3f GB/s, %.1f us a message (ffn bench link --gap-us 1000, mean of first and last)" % (
          P, links[P]["link_gbps"], links[P]["latency_us"]), file=sys.stderr)
worst, rows = 1.0, []
for i in range(n):
    np_, lay, moe = open("%s/r%d.lay" % (tmp, i)).read().strip().split("|")
    m = sum(ld("r%d.%d.json" % (i, k))["seconds"] for k in range(reps)) / reps / steps
    cfg = "%s/c%d.0.config.json" % (tmp, i)
    c1 = sum(ld("c%d.%d.json" % (i, k))["seconds"] for k in range(reps)) / reps / steps
    rate = plan(cfg)["flops_rank_step"] / c1 / 1e9
    p = plan(cfg, *lay.split(), "--peak-gflops", "%.4f" % rate, "--link-json", "%s/link%s.json" % (tmp, np_))
    pr = p["time_s"]["step"]
    r = m / pr
    worst = max(worst, r, 1 / r)
    rows.append({"layout": lay + (" (MoE)" if moe else ""), "ranks": int(np_), "gflops": rate, "measured_s": m, "predicted_s": pr,
                 "measured_over_predicted": r, "compute_s": p["time_s"]["compute"], "comm_s": p["time_s"]["comm"]})
    print("  mpirun -np %s ffn train %-22s measured %.4f s/step, predicted %.4f (%.2f GFLOP/s: compute %.4f, comm %.4f): measured/predicted %.2f" % (
          np_, lay + (" (MoE)" if moe else ""), m, pr, rate, p["time_s"]["compute"], p["time_s"]["comm"], r), file=sys.stderr)
print(json.dumps({"bench": "plan", "links": links, "batch": int(B), "steps": steps, "rows": rows,
                  "worst_ratio": worst, "bound": bound}))
if worst > bound:
    print("bench_plan: FAIL, worst measured/predicted off by %.2fx > %.2f" % (worst, bound), file=sys.stderr)
    sys.exit(1)
print("bench_plan: every layout within %.2fx (worst %.2fx)" % (bound, worst), file=sys.stderr)
PY
