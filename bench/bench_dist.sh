#!/usr/bin/env bash
# bench/bench_dist.sh -- 1 rank against 2 ranks (1 thread each) on this
# host, under mpirun (run by `make bench` through bench/run.sh, or alone):
#   - the tensor-parallel FFN layer, SwiGLU D 4096 / F 11008, N = 1 and
#     N = 512: forward and forward+backward time, speed-up, the all-reduce's
#     share of the time;
#   - the expert-parallel MoE, 8 SwiGLU experts top-2 (D 1024, F 1408),
#     512 tokens a rank: tokens/s over all ranks, speed-up, bytes a rank
#     sends per layer;
#   - data-parallel training (D 256, 4 layers, T 128, batch 8 a rank):
#     tokens/s, speed-up; the gradient sum in 4 MiB buckets against one
#     bucket and ZeRO-1 (tokens/s ratio, the sums' share of the time,
#     optimizer bytes a rank);
#   - `ffn plan`'s predicted data-parallel step against the measured one,
#     with this run's 1-rank step time as the compute (peak) figure and the
#     all-reduce bandwidth measured by the TP runs as the link figure;
#   - `ffn plan`'s predictions (--layer ffn / moe, and the DP step) for
#     the 2-rank TP FFN, EP MoE and DP runs above, with the peak (`ffn bench
#     peak --threads 1`) and the link (`ffn bench link`: GB/s a rank sends
#     in the all-reduce, us a message) measured in this run: predicted /
#     measured.
# Speed-up = time(1 rank) / time(2 ranks) for the same work (the TP layer),
# or tokens/s(2) / tokens/s(1) for the same work per rank (EP, DP).
# Environment: BENCH_QUICK=1 (fewer repeats and steps), BENCH_DIST_OUT
# (JSON lines, default build/bench/dist.jsonl).  Needs mpirun (openmpi-bin).
# Run it on an otherwise idle machine: the numbers mean nothing under load.
set -euo pipefail
cd "$(dirname "$0")/.."
FFN=$(realpath "${FFN_BIN:-build/ffn}")
OUT=${BENCH_DIST_OUT:-build/bench/dist.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpirun >/dev/null || { echo "bench_dist: mpirun missing" >&2; exit 1; }
R=10; STEPS=60
[[ "${BENCH_QUICK:-0}" == 1 ]] && { R=3; STEPS=20; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "== bench_dist: 1 vs 2 ranks, 1 thread each (load $(cut -d' ' -f1-3 /proc/loadavg))"

run() { # NP ARGS... -> one JSON line
    mpirun --oversubscribe -np "$1" "$FFN" "${@:2}" --threads 1 --json | tail -1 | tee -a "$OUT"
}
for N in 1 512; do
    a=$(run 1 bench layer --tp 1 --hidden 4096 --intermediate 11008 --tokens $N --repeats $R)
    b=$(run 2 bench layer --tp 2 --hidden 4096 --intermediate 11008 --tokens $N --repeats $R)
    echo "$b" >"$tmp/tp$N.json"
    /usr/bin/python3 - "$a" "$b" "$tmp/link_gbps" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("TP FFN SwiGLU 4096x11008 N=%d: forward %.2f -> %.2f ms (x%.2f, all-reduce %.0f%%), "
      "fwd+bwd %.2f -> %.2f ms (x%.2f, all-reduce %.0f%%)" % (
      a["tokens"], a["forward_ms"], b["forward_ms"], a["forward_ms"] / b["forward_ms"],
      100 * b["forward_comm_ms"] / b["forward_ms"], a["forward_backward_ms"],
      b["forward_backward_ms"], a["forward_backward_ms"] / b["forward_backward_ms"],
      100 * b["forward_backward_comm_ms"] / b["forward_backward_ms"]))
if a["tokens"] == 512:
    gbps = b["bytes_sent_per_allreduce"] / (b["forward_comm_ms"] * 1e-3) / 1e9
    print("  all-reduce: %.0f B sent a rank in %.3f ms: %.2f GB/s effective" % (
          b["bytes_sent_per_allreduce"], b["forward_comm_ms"], gbps))
    open(sys.argv[3], "w").write("%.6f" % gbps)
PY
done
a=$(run 1 bench moe --ep 1 --tokens 512 --repeats $R)
b=$(run 2 bench moe --ep 2 --tokens 512 --repeats $R)
echo "$b" >"$tmp/ep.json"
/usr/bin/python3 - "$a" "$b" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("EP MoE 8 experts top-2 D=%d F=%d, %d tokens a rank: fwd %.0f -> %.0f tokens/s (x%.2f), "
      "fwd+bwd %.0f -> %.0f tokens/s (x%.2f); a rank sends %.2f MB forward, %.2f MB backward per layer" % (
      a["hidden"], a["moe_intermediate"], a["tokens_per_rank"], a["tokens_per_s_forward"],
      b["tokens_per_s_forward"], b["tokens_per_s_forward"] / a["tokens_per_s_forward"],
      a["tokens_per_s_forward_backward"], b["tokens_per_s_forward_backward"],
      b["tokens_per_s_forward_backward"] / a["tokens_per_s_forward_backward"],
      b["bytes_sent_forward"] / 1e6, b["bytes_sent_backward"] / 1e6))
PY
TR=(--hidden-size 256 --intermediate-size 688 --num-hidden-layers 4 --num-attention-heads 4
    --seq-len 128 --batch-size 8 --steps $STEPS --eval-every 0 --quiet --corpus en)
( cd "$tmp" && mpirun --oversubscribe -np 1 "$FFN" train "${TR[@]}" --threads 1 --out d1 --json >d1.json 2>/dev/null )
( cd "$tmp" && mpirun --oversubscribe -np 2 "$FFN" train --dp 2 "${TR[@]}" --threads 1 --out d2 --json >d2.json 2>/dev/null )
# the gradient sum in 4 MiB buckets (default) against one bucket, and ZeRO-1
( cd "$tmp" && mpirun --oversubscribe -np 2 "$FFN" train --dp 2 "${TR[@]}" --threads 1 --bucket-mb 0 --out d2b --json >d2b.json 2>/dev/null )
( cd "$tmp" && mpirun --oversubscribe -np 2 "$FFN" train --dp 2 "${TR[@]}" --threads 1 --zero 1 --out d2z --json >d2z.json 2>/dev/null )
/usr/bin/python3 - "$tmp" <<'PY' | tee -a "$OUT"
import json, sys
r = {n: json.load(open("%s/%s.json" % (sys.argv[1], n))) for n in ("d2", "d2b", "d2z")}
for n, what in (("d2", "4 MiB buckets"), ("d2b", "one bucket"), ("d2z", "ZeRO-1")):
    x = r[n]
    print("DP 2 train, %-13s: %.0f tokens/s (x%.2f of 4 MiB buckets), gradient sums %.1f%% of the time, "
          "%.1f buckets a step, optimizer %d B a rank" % (what, x["tokens_per_s"], x["tokens_per_s"] / r["d2"]["tokens_per_s"],
          100 * x["grad_sum_s"] / x["seconds"], x["grad_buckets_per_step"], x["optimizer_bytes_per_rank"]), file=sys.stderr)
print(json.dumps({"bench": "train_dp_buckets", **{n: {k: r[n][k] for k in ("tokens_per_s", "seconds", "grad_sum_s",
      "grad_buckets_per_step", "optimizer_bytes_per_rank")} for n in r}}))
PY
# ffn plan's prediction of the 2-rank step: compute calibrated by the
# 1-rank run (its GFLOP/s as the peak), the link by the TP all-reduce above
/usr/bin/python3 - "$tmp" "$FFN" <<'PY' | tee -a "$OUT"
import json, subprocess, sys
tmp, ffn = sys.argv[1], sys.argv[2]
link = float(open(tmp + "/link_gbps").read())
a, b = (json.load(open("%s/%s.json" % (tmp, n))) for n in ("d1", "d2"))
cfg = tmp + "/d1/config.json"
prm = json.loads(subprocess.run([ffn, "params", cfg, "--seq-len", "128", "--json"],
                                capture_output=True, text=True, check=True).stdout)
tokens1 = 8 * 128
s1 = tokens1 / a["tokens_per_s"]                       # one rank's step
gflops = prm["training_flops_per_token"] * tokens1 / s1 / 1e9    # what that rank sustains
plan = json.loads(subprocess.run([ffn, "plan", cfg, "--dp", "2", "--batch-size", "8", "--seq-len", "128",
                                  "--peak-gflops", "%.3f" % gflops, "--link-gbps", "%.4f" % link,
                                  "--latency-us", "5", "--json"],
                                 capture_output=True, text=True, check=True).stdout)
s2 = 2 * tokens1 / b["tokens_per_s"]
pred = plan["time_s"]["step_serial"]
print(json.dumps({"bench": "train_dp", "tokens_per_s_1": a["tokens_per_s"], "tokens_per_s_2": b["tokens_per_s"],
                  "speedup": b["tokens_per_s"] / a["tokens_per_s"], "step_s_measured_2": s2,
                  "step_s_predicted_2": pred, "predicted_over_measured": pred / s2,
                  "plan_assumptions": {"peak_gflops": gflops, "link_gbps": link, "latency_us": 5}}))
PY

# ffn plan against the 2-rank measurements above, with this run's peak and link
"$FFN" bench peak --threads 1 --json >"$tmp/peak.json"
mpirun --oversubscribe -np 2 "$FFN" bench link --threads 1 --json | tail -1 >"$tmp/link.json"
/usr/bin/python3 - "$tmp" "$FFN" <<'PY' | tee -a "$OUT"
import json, subprocess, sys
tmp, ffn = sys.argv[1], sys.argv[2]
ld = lambda n: json.load(open("%s/%s.json" % (tmp, n)))
peak, link, d2 = ld("peak"), ld("link"), ld("d2")
mach = ["--peak-gflops", "%.4f" % peak["gflops"], "--link-gbps", "%.6f" % link["link_gbps"],
        "--latency-us", "%.4f" % link["latency_us"], "--json"]
def plan(*a):
    return json.loads(subprocess.run([ffn, "plan", *a, *mach], capture_output=True, text=True, check=True).stdout)
rows = []
for n in (1, 512):
    m = ld("tp%d" % n)
    p = plan("--layer", "ffn", "--tp", "2", "--hidden", "4096", "--intermediate", "11008", "--tokens", str(n))
    rows.append(("TP FFN 4096x11008 N=%d fwd+bwd" % n, p["time_s"]["forward_backward"], m["forward_backward_ms"] * 1e-3))
m = ld("ep")
p = plan("--layer", "moe", "--ep", "2", "--hidden", str(m["hidden"]), "--moe-intermediate", str(m["moe_intermediate"]),
         "--experts", str(m["experts"]), "--top-k", str(m["top_k"]), "--tokens", str(m["tokens_per_rank"]))
rows.append(("EP MoE fwd+bwd", p["time_s"]["forward_backward"], m["forward_backward_ms"] * 1e-3))
p = plan(tmp + "/d1/config.json", "--dp", "2", "--batch-size", "8", "--seq-len", "128")
rows.append(("DP train step", p["time_s"]["step_serial"], 2 * 8 * 128 / d2["tokens_per_s"]))
print("ffn plan vs 2 ranks (peak %.1f GFLOP/s a rank, link %.3f GB/s, %.1f us a message, measured in this run):" % (
      peak["gflops"], link["link_gbps"], link["latency_us"]), file=sys.stderr)
for name, pr, me in rows:
    print("  %-32s predicted %.4f s, measured %.4f s, predicted/measured %.2f" % (name, pr, me, pr / me), file=sys.stderr)
print(json.dumps({"bench": "plan_check", "peak_gflops": peak["gflops"], "link_gbps": link["link_gbps"],
                  "latency_us": link["latency_us"],
                  "rows": [{"what": n, "predicted_s": p, "measured_s": m, "predicted_over_measured": p / m} for n, p, m in rows]}))
PY
