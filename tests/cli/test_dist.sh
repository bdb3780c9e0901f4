#!/usr/bin/env bash
# test_dist.sh -- ffn on several processes (libffn_dist, Open MPI):
#   - the tensor-parallel FFN layer equals the single-process layer (y, dx,
#     every weight gradient to 1e-5; odd F; dense and gated; biases), and
#     the fixed-order all-reduce gives every rank the same bits: mpirun
#     -np 2 and -np 4 of build/tests/dist_test_tp_ffn;
#   - the expert-parallel MoE equals one process's MoE on each rank's
#     tokens (y, dx, router, shared and expert gradients; E not dividing
#     the ranks, K = 1 and 3, capacity drops, empty experts), and dispatch
#     + combine with identity experts is the identity, bitwise:
#     build/tests/dist_test_ep_moe;
#   - the tensor-parallel model (attention heads and FFN units split, two
#     all-reduces a layer each way; MoE experts split by units) equals the
#     whole model: logits, loss,
#     every gradient, the KV-cache path (build/tests/dist_test_tp_model), and
#     `ffn run --tp 2 / 4` on stories260K gives one process's 64 tokens,
#     greedy and sampled, and logits within 1e-5 -- up to a tie (a step
#     whose two tokens' logits are within 1e-5: the split's order of
#     summation may pick either, and the runs are compared up to there);
#   - `ffn run --tp 2` without --threads gives each rank the host's cores
#     divided by its ranks;
#   - ZeRO-1 (--zero 1: AdamW's moments sharded over dp 2, 3, 4) gives the
#     losses of one process (1e-6; at dp 2 plain dp's model bitwise), prints
#     the optimizer bytes a rank (8 x ceil(params / dp)), and its
#     checkpoint's moments are whole: dp 3 -> one process and one process ->
#     dp 2 resume on the same path;
#   - ffn plan's predictions for the 2-rank TP FFN layer, EP MoE layer and
#     DP training step (peak and link measured in the same run: ffn bench
#     peak, ffn bench link) are within [1/100, 10] of the measurement;
#   - expert-parallel training of a MoE model (5 experts, top-2: --ep 2
#     --dp 2, --ep 2 alone, --ep 2 --dp 4 whose expert-replica groups sum
#     the experts' gradients) gives the losses of one process taking the
#     same micro-batches (--grad-accum P) to 1e-6, and resumes under
#     another layout (ep 2 -> dp 2, dp 2 -> ep 2) on the same path; so do
#     --tp 2 and --tp 2 --dp 2 on it (every expert split by units);
#   - --tp 2 --ep 2 (experts whole, spread over the TP pair; and with
#     --dp 2) gives one process's losses (1e-6), the same bits twice, a
#     checkpoint equal to one process's, resumes across layouts, 3 experts
#     on 2 ranks, experts that get no token;
#   - tensor-parallel training (--tp 2, and --tp 2 --dp 2) gives the loss
#     of one process at every step (1e-6), and a --tp run's checkpoint is
#     whole: it resumes under --dp or in one process;
#   - data-parallel training: P ranks with batch B give the loss of one
#     process with batch P*B at every step (1e-6 relative) and the same
#     held-out loss; two runs of the same layout are bitwise identical; a
#     200-step (under ASan 40-step) --dp 2 run reaches one process's validation loss within
#     1e-4; the gradient sum cut into small buckets (--bucket-mb 0.01,
#     dp 4) gives the same losses and twice the same bits; a run stopped
#     under one layout resumes under another (dp 2 ->
#     1 process, 1 -> dp 4) and ends where the uninterrupted run ends;
#   - failures: a layout without mpirun, -np that is not tp*dp, --tp that
#     does not divide the heads or the KV heads, --tp T with --ep E != T,
#     --tp 2 --ep 2 without MoE or on 1 expert, --ep
#     larger than the experts, --ep without MoE, --ep not dividing --dp, ranks with different seeds (the options' agreement) or one rank
#     that cannot open its data: every rank stops with the message, non-zero;
#     a rank killed with -9 ends the job (no hang) and the last checkpoint
#     still loads.
# Under the ASan build of ffn the MPI runs keep address and UB checks but
# not leak checks: Open MPI unloads its components at exit before
# LeakSanitizer can attribute their allocations (the same code paths are
# leak-checked in the single-process tests).
set -uo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
TPBIN="$ROOT/build/tests/dist_test_tp_ffn"
FFN="$(cd "$(dirname "$FFN")" && pwd)/$(basename "$FFN")" # the test changes directory
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
case "$FFN" in */asan/*) export ASAN_OPTIONS="abort_on_error=0:detect_leaks=0" ;; esac
MPIRUN=(mpirun --oversubscribe)
command -v mpirun >/dev/null || { bad "mpirun missing (scripts/setup.sh test installs openmpi-bin)"; exit 1; }

# ---- the tensor-parallel layer, the expert-parallel MoE, the reductions ----
for bin in "$TPBIN" "$ROOT/build/tests/dist_test_tp_model" "$ROOT/build/tests/dist_test_ep_moe"; do
    for p in 2 4; do
        if [[ ! -x "$bin" ]]; then bad "$bin missing (make unit)"; break; fi
        if timeout 120 "${MPIRUN[@]}" -np $p "$bin" $p >"$tmp/out$p" 2>&1 && grep -q "^PASS" "$tmp/out$p"; then
            ok "$(basename "$bin") -np $p: $(grep -c '^ok' "$tmp/out$p") checks"; grep '^ok' "$tmp/out$p" | sed 's/^/     /'
        else bad "$(basename "$bin") -np $p: $(tail -5 "$tmp/out$p")"; fi
    done
done

# ---- ffn run --tp: the same tokens and logits as one process ----
SHARED="${FFN_SHARED:-$ROOT/../shared}"
M260="$SHARED/models/stories260K.bin"
if [[ -f "$M260" ]]; then
    # greedy and sampled (the defaults: temperature 0.8, top-p 0.95); the
    # ids agree up to a tie: a step where the two runs pick different
    # tokens must be one where one process's logits of both tokens are
    # within 1e-5 (of the largest logit) -- the split's other order of
    # summation may then put either first (stories260K's tokens 25 and 88
    # differ by 2e-8 in float64 at the 10th sampled step) -- and the run is
    # compared up to that step only, logits within 1e-5 throughout
    cmp_run() { # ids1 idsP logits1 logitsP prompt-length
        /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
def read(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    s, e = h["logits"]["data_offsets"]; d = b[8 + n + s:8 + n + e]; V = h["logits"]["shape"][1]
    f = struct.unpack("<%df" % (len(d) // 4), d)
    return [f[i:i + V] for i in range(0, len(f), V)]
ia, ib = (open(p).read().split() for p in sys.argv[1:3])
la, lb = read(sys.argv[3]), read(sys.argv[4]); P = int(sys.argv[5])
assert len(ia) == len(ib) == 64 and len(la) == len(lb), (len(ia), len(ib), len(la), len(lb))
m = max(abs(x) for r in la for x in r)
k = next((k for k in range(len(ia)) if ia[k] != ib[k]), len(ia))
rows = P + k  # the rows both runs computed from the same tokens
e = max(abs(x - y) for ra, rb in zip(la[:rows], lb[:rows]) for x, y in zip(ra, rb)) / m
assert e <= 1e-5, "logits differ by %.2e (relative) before any tie" % e
if k == len(ia):
    print("64 ids identical, logits within %.1e" % e); sys.exit(0)
r = la[P - 1 + k]; a, b = int(ia[k]), int(ib[k]); gap = abs(r[a] - r[b]) / m
assert gap <= 1e-5, "step %d: token %s vs %s, not a tie (logits %.7g and %.7g)" % (k + 1, a, b, r[a], r[b])
print("ids identical up to step %d, a tie there (tokens %d and %d: logits %.7g, %.7g), logits within %.1e"
      % (k + 1, a, b, r[a], r[b], e))
PY
    }
    for mode in greedy sampled; do
        temp=(); [[ $mode == greedy ]] && temp=(--temperature 0)
        "$FFN" run "$M260" --ids "1 2 3" --steps 64 --emit ids --threads 1 "${temp[@]}" \
            --dump-logits "$tmp/l1.safetensors" >"$tmp/r1" 2>/dev/null || bad "run one process"
        for p in 2 4; do
            timeout 120 "${MPIRUN[@]}" -np $p "$FFN" run "$M260" --tp $p --ids "1 2 3" --steps 64 --emit ids \
                --threads 1 "${temp[@]}" --dump-logits "$tmp/l$p.safetensors" >"$tmp/r$p" 2>"$tmp/er" ||
                bad "run --tp $p: $(tail -3 "$tmp/er")"
            if cmp_run "$tmp/r1" "$tmp/r$p" "$tmp/l1.safetensors" "$tmp/l$p.safetensors" 3 >"$tmp/cmp" 2>&1
            then ok "run --tp $p (stories260K, $mode): $(tail -1 "$tmp/cmp")"
            else bad "run --tp $p ($mode) differs from one process: $(tail -2 "$tmp/cmp")"; fi
        done
    done
    # without --threads each rank takes the host's cores divided by the ranks on it
    want=$(( $(nproc) / 2 )); ((want >= 1)) || want=1
    info=$(timeout 60 "${MPIRUN[@]}" -np 2 "$FFN" run "$M260" --tp 2 --ids "1" --steps 2 --info 2>&1 >/dev/null)
    got=$(grep -c "rank [01] of 2 (--tp 2) holds [0-9]* of the parameters, $want thread(s)" <<<"$info")
    [[ "$got" == 2 ]] && ok "run --tp 2 without --threads: $want thread(s) a rank ($(nproc) cores, 2 ranks)" || bad "run --tp 2 threads: $got ranks report $want thread(s)"
    # the model's parameter count, not a rank's share (that is the rank line's)
    one=$("$FFN" run "$M260" --ids "1" --steps 1 --info 2>&1 >/dev/null | grep -o "[0-9]* parameters")
    [[ -n "$one" ]] && grep -q ": $one" <<<"$info" && ok "run --tp 2 --info prints the model's $one" ||
        bad "run --tp 2 --info parameters: one process '$one', --tp 2: $(grep parameters <<<"$info" | head -1)"
    expect_tp=$(timeout 60 "${MPIRUN[@]}" -np 3 "$FFN" run "$M260" --tp 3 --ids "1" --steps 2 --threads 1 2>&1 >/dev/null)
    grep -q -- "--tp 3 does not divide the 8 attention heads" <<<"$expect_tp" && ok "run --tp 3 on 8 heads: refused, naming both" || bad "run --tp 3: $expect_tp"
else bad "$M260 missing (FFN_SHARED)"; fi

# ---- data-parallel training equals one process with the whole batch ----
cd "$tmp" || exit 1
A=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 96
   --corpus en --eval-every 5 --eval-batches 4 --quiet)
"$FFN" train --steps 15 --batch-size 8 "${A[@]}" --threads 1 --out one >/dev/null 2>"$tmp/e1" || bad "one process: $(cat "$tmp/e1")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --steps 15 --batch-size 4 "${A[@]}" --out two >/dev/null 2>"$tmp/e2" || bad "dp 2: $(tail -3 "$tmp/e2")"
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --dp 4 --steps 15 --batch-size 2 "${A[@]}" --out four >/dev/null 2>"$tmp/e4" || bad "dp 4: $(tail -3 "$tmp/e4")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --steps 15 --batch-size 4 "${A[@]}" --out two_again >/dev/null 2>&1 || bad "dp 2 again"
# small buckets (the gradient sum cut into many pieces), twice
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --dp 4 --steps 15 --batch-size 2 --bucket-mb 0.01 "${A[@]}" --out four_b --json >four_b.json 2>"$tmp/e4" || bad "dp 4 small buckets: $(tail -3 "$tmp/e4")"
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --dp 4 --steps 15 --batch-size 2 --bucket-mb 0.01 "${A[@]}" --out four_b2 >/dev/null 2>&1 || bad "dp 4 small buckets again"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --tp 2 --steps 15 --batch-size 8 "${A[@]}" --out tp2 >/dev/null 2>"$tmp/et" || bad "tp 2: $(tail -3 "$tmp/et")"
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --tp 2 --dp 2 --steps 15 --batch-size 4 "${A[@]}" --out tp2dp2 >/dev/null 2>"$tmp/et" || bad "tp 2 dp 2: $(tail -3 "$tmp/et")"
if /usr/bin/python3 - one/metrics.jsonl two/metrics.jsonl four/metrics.jsonl tp2/metrics.jsonl tp2dp2/metrics.jsonl four_b/metrics.jsonl >"$tmp/cmp" 2>&1 <<'PY'
import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:]]
ref = runs[0]
assert len(ref) == 15
worst = 0.0
for r in runs[1:]:
    assert len(r) == len(ref)
    for a, b in zip(ref, r):
        for k in ("loss", "val_loss"):
            if k in a:
                e = abs(a[k] - b[k]) / abs(a[k]); worst = max(worst, e)
                assert e <= 1e-6, (a["step"], k, a[k], b[k], e)
print("worst relative difference %.2e over 15 steps, loss and val_loss" % worst)
PY
then ok "dp 2 (batch 4), dp 4 (batch 2; and in 10 KiB buckets), tp 2 (batch 8), tp 2 x dp 2 (batch 4) = one process (batch 8): $(cat "$tmp/cmp")"
else bad "dp losses: $(cat "$tmp/cmp")"; fi
if cmp -s two/model.safetensors two_again/model.safetensors &&
   cmp -s <(sed 's/"tokens_per_s": [0-9.e+]*,//' two/metrics.jsonl) <(sed 's/"tokens_per_s": [0-9.e+]*,//' two_again/metrics.jsonl); then
    ok "dp 2 twice: model.safetensors and the losses bitwise identical"
else bad "dp 2 runs differ"; fi
nb=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grad_buckets_per_step"])' four_b.json 2>/dev/null)
if cmp -s four_b/model.safetensors four_b2/model.safetensors && [[ -n "$nb" ]] && /usr/bin/python3 -c "import sys; sys.exit(0 if float('$nb') > 3 else 1)"; then
    ok "dp 4 in 10 KiB buckets ($nb buckets a step) twice: model.safetensors bitwise identical"
else bad "dp 4 small buckets: runs differ or $nb buckets a step"; fi

# ---- ZeRO-1: the optimizer's moments sharded over the dp ranks ----
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --zero 1 --steps 15 --batch-size 4 "${A[@]}" --out z2 --json >z2.json 2>"$tmp/ez" || bad "zero dp 2: $(tail -3 "$tmp/ez")"
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --dp 4 --zero 1 --steps 15 --batch-size 2 "${A[@]}" --out z4 --json >z4.json 2>"$tmp/ez" || bad "zero dp 4: $(tail -3 "$tmp/ez")"
"$FFN" train --steps 15 --batch-size 6 "${A[@]}" --threads 1 --out one6 >/dev/null 2>&1 || bad "one process batch 6"
timeout 300 "${MPIRUN[@]}" -np 3 "$FFN" train --dp 3 --zero 1 --steps 15 --stop-at 7 --batch-size 2 "${A[@]}" --out z3s >/dev/null 2>"$tmp/ez" || bad "zero dp 3 stop at 7: $(tail -3 "$tmp/ez")"
"$FFN" train --resume z3s --threads 1 --quiet >/dev/null 2>"$tmp/ez" || bad "resume zero dp 3 -> one process: $(cat "$tmp/ez")"
"$FFN" train --steps 15 --stop-at 7 --batch-size 8 "${A[@]}" --threads 1 --out z1s >/dev/null 2>&1 || bad "one process stop at 7"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --zero 1 --resume z1s --quiet >/dev/null 2>"$tmp/ez" || bad "resume one process -> zero dp 2: $(tail -3 "$tmp/ez")"
if /usr/bin/python3 - one z2 z4 z1s one6 z3s >"$tmp/cmp" 2>&1 <<'PY'
import json, sys
runs = [[json.loads(l) for l in open(p + "/metrics.jsonl")] for p in sys.argv[1:]]
worst = 0.0
for ref, others in ((runs[0], runs[1:4]), (runs[4], runs[5:])):
    assert len(ref) == 15
    for r in others:
        assert len(r) == len(ref)
        for a, b in zip(ref, r):
            for k in ("loss", "val_loss"):
                if k in a:
                    e = abs(a[k] - b[k]) / abs(a[k]); worst = max(worst, e)
                    assert e <= 1e-6, (a["step"], k, a[k], b[k], e)
z2, z4 = (json.load(open(p + ".json")) for p in ("z2", "z4"))
n = z2["params"]
assert z2["optimizer_bytes_per_rank"] == 8 * ((n + 1) // 2) and z4["optimizer_bytes_per_rank"] == 8 * ((n + 3) // 4), (z2, z4)
print("worst relative difference %.2e; optimizer bytes a rank: %d (dp 2), %d (dp 4) of %d" % (
      worst, z2["optimizer_bytes_per_rank"], z4["optimizer_bytes_per_rank"], 8 * n))
PY
then ok "zero 1: dp 2, dp 4, one process -> zero dp 2 resumed = one process (batch 8); zero dp 3 -> one process resumed = one process (batch 6): $(cat "$tmp/cmp")"
else bad "zero 1: $(cat "$tmp/cmp")"; fi
cmp -s two/model.safetensors z2/model.safetensors && ok "zero 1 dp 2: model.safetensors bitwise that of plain dp 2" || bad "zero 1 dp 2 differs from dp 2 bitwise"

# ---- expert-parallel training equals one process ----
# One process with --grad-accum P and batch B takes the P micro-batches the
# P ranks take (the same windows), so the MoE aux loss, computed per
# micro-batch, means the same thing on both sides; --eval-batches P*K
# there evaluates the windows P ranks with K batches evaluate.
M=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
   --num-experts 5 --num-experts-per-tok 2 --corpus en --eval-every 5 --quiet)
"$FFN" train --steps 10 --batch-size 4 --grad-accum 2 --eval-batches 8 "${M[@]}" --threads 1 --out moe1 >/dev/null 2>"$tmp/em" || bad "moe one process: $(cat "$tmp/em")"
"$FFN" train --steps 10 --batch-size 2 --grad-accum 4 --eval-batches 8 "${M[@]}" --threads 1 --out moe1x4 >/dev/null 2>"$tmp/em" || bad "moe one process x4: $(cat "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --ep 2 --dp 2 --steps 10 --batch-size 4 --eval-batches 4 "${M[@]}" --out ep2dp2 >/dev/null 2>"$tmp/em" || bad "ep 2 dp 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --ep 2 --steps 10 --batch-size 4 --eval-batches 4 "${M[@]}" --out ep2 >/dev/null 2>"$tmp/em" || bad "ep 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --ep 2 --dp 4 --steps 10 --batch-size 2 --eval-batches 2 "${M[@]}" --out ep2dp4 >/dev/null 2>"$tmp/em" || bad "ep 2 dp 4: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --ep 2 --steps 10 --stop-at 5 --batch-size 4 --eval-batches 4 "${M[@]}" --out ep2s >/dev/null 2>"$tmp/em" || bad "ep 2 stop at 5: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --resume ep2s --quiet >/dev/null 2>"$tmp/em" || bad "resume ep 2 -> dp 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --tp 2 --steps 10 --batch-size 4 --grad-accum 2 --eval-batches 8 "${M[@]}" --out moetp2 >/dev/null 2>"$tmp/em" || bad "moe tp 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --tp 2 --dp 2 --steps 10 --batch-size 4 --eval-batches 4 "${M[@]}" --out moetp2dp2 >/dev/null 2>"$tmp/em" || bad "moe tp 2 dp 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --steps 10 --stop-at 5 --batch-size 4 --eval-batches 4 "${M[@]}" --out dp2s >/dev/null 2>"$tmp/em" || bad "dp 2 stop at 5: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --ep 2 --resume dp2s --quiet >/dev/null 2>"$tmp/em" || bad "resume dp 2 -> ep 2: $(tail -3 "$tmp/em")"
if /usr/bin/python3 - moe1 ep2dp2 ep2 ep2s dp2s moetp2 moetp2dp2 moe1x4 ep2dp4 >"$tmp/cmp" 2>&1 <<'PY'
import json, sys
runs = [[json.loads(l) for l in open(p + "/metrics.jsonl")] for p in sys.argv[1:]]
worst = 0.0
for ref, others in ((runs[0], runs[1:7]), (runs[7], runs[8:])):
    assert len(ref) == 10
    for r in others:
        assert len(r) == len(ref)
        for a, b in zip(ref, r):
            for k in ("loss", "val_loss"):
                if k in a:
                    e = abs(a[k] - b[k]) / abs(a[k]); worst = max(worst, e)
                    assert e <= 1e-6, (a["step"], k, a[k], b[k], e)
print("worst relative difference %.2e over 10 steps, loss and val_loss" % worst)
PY
then ok "moe (5 experts, top-2): ep 2 x dp 2, ep 2, ep 2 -> dp 2 resumed, dp 2 -> ep 2 resumed, tp 2 (experts split by units), tp 2 x dp 2 = one process (2 micro-batches); ep 2 x dp 4 = one process (4): $(cat "$tmp/cmp")"
else bad "ep losses: $(cat "$tmp/cmp")"; fi

# ---- --tp 2 --ep 2: the experts spread by expert over the TP group ----
# The attention is split over the TP pair as with --tp 2; each MoE layer's
# 5 experts live whole on one rank of the pair (3 and 2: the uneven split),
# no all-to-all (both ranks have every token).  Same losses as one process
# (1e-6 relative, the tolerance of the TP tests), the same bits twice,
# resumed under other layouts; 3 experts on 2 ranks; 8 experts top-1 on 4
# tokens a micro-batch (at least 4 experts get no token in every layer).
TE=(--tp 2 --ep 2 --steps 10 --batch-size 4 --grad-accum 2 --eval-batches 8)
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train "${TE[@]}" "${M[@]}" --out tpep2 >/dev/null 2>"$tmp/em" || bad "tp 2 ep 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train "${TE[@]}" "${M[@]}" --out tpep2b >/dev/null 2>"$tmp/em" || bad "tp 2 ep 2 again: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 4 "$FFN" train --tp 2 --ep 2 --dp 2 --steps 10 --batch-size 4 --eval-batches 4 "${M[@]}" --out tpep2dp2 >/dev/null 2>"$tmp/em" || bad "tp 2 ep 2 dp 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train "${TE[@]}" --stop-at 5 "${M[@]}" --out tpeps >/dev/null 2>"$tmp/em" || bad "tp 2 ep 2 stop at 5: $(tail -3 "$tmp/em")"
cp -r tpeps tpeps_1 && cp -r tpeps tpeps_dp && cp -r tpeps tpeps_tp
"$FFN" train --resume tpeps_1 --threads 1 --quiet >/dev/null 2>"$tmp/em" || bad "resume tp 2 ep 2 -> one process: $(tail -3 "$tmp/em")"
# (--dp 2 halves the micro-batches and so the aux loss's batches: compared
# with one process's checkpoint resumed the same way)
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --ep 2 --dp 2 --resume tpeps_dp --quiet >/dev/null 2>"$tmp/em" || bad "resume tp 2 ep 2 -> ep 2 dp 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --tp 2 --resume tpeps_tp --quiet >/dev/null 2>"$tmp/em" || bad "resume tp 2 ep 2 -> tp 2: $(tail -3 "$tmp/em")"
"$FFN" train --steps 10 --stop-at 5 --batch-size 4 --grad-accum 2 --eval-batches 8 "${M[@]}" --threads 1 --out ones >/dev/null 2>&1 || bad "one process stop at 5"
cp -r ones ones_dp
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --ep 2 --dp 2 --resume ones_dp --quiet >/dev/null 2>"$tmp/em" || bad "resume one process -> ep 2 dp 2: $(tail -3 "$tmp/em")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --tp 2 --ep 2 --resume ones --quiet >/dev/null 2>"$tmp/em" || bad "resume one process -> tp 2 ep 2: $(tail -3 "$tmp/em")"
M3=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
    --num-experts 3 --num-experts-per-tok 2 --corpus en --eval-every 5 --quiet)
"$FFN" train --steps 10 --batch-size 4 --grad-accum 2 --eval-batches 8 "${M3[@]}" --threads 1 --out moe3 >/dev/null 2>&1 || bad "3 experts one process"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train "${TE[@]}" "${M3[@]}" --out tpep3 >/dev/null 2>"$tmp/em" || bad "3 experts tp 2 ep 2: $(tail -3 "$tmp/em")"
M8=(--seq-len 4 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
    --num-experts 8 --num-experts-per-tok 1 --corpus en --eval-every 5 --quiet)
"$FFN" train --steps 10 --batch-size 1 --eval-batches 2 "${M8[@]}" --threads 1 --out moe8 >/dev/null 2>&1 || bad "8 experts one process"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --tp 2 --ep 2 --steps 10 --batch-size 1 --eval-batches 2 "${M8[@]}" --out tpep8 >/dev/null 2>"$tmp/em" || bad "8 experts tp 2 ep 2: $(tail -3 "$tmp/em")"
if /usr/bin/python3 - moe1 tpep2 tpep2dp2 tpeps_1 tpeps_tp ones -- ones_dp tpeps_dp -- moe3 tpep3 -- moe8 tpep8 >"$tmp/cmp" 2>&1 <<'PY'
import json, sys
groups, cur = [], []
for a in sys.argv[1:] + ["--"]:
    if a == "--": groups.append(cur); cur = []
    else: cur.append(a)
worst = 0.0
for g in groups:
    runs = [[json.loads(l) for l in open(p + "/metrics.jsonl")] for p in g]
    ref = runs[0]
    assert len(ref) == 10
    for p, r in zip(g[1:], runs[1:]):
        assert len(r) == len(ref), (p, len(r))
        for a, b in zip(ref, r):
            for k in ("loss", "val_loss"):
                if k in a:
                    e = abs(a[k] - b[k]) / abs(a[k]); worst = max(worst, e)
                    assert e <= 1e-6, (p, a["step"], k, a[k], b[k], e)
print("worst relative difference %.2e over 10 steps, loss and val_loss" % worst)
PY
then ok "tp 2 x ep 2 (experts by expert over the TP pair), tp 2 x ep 2 x dp 2, resumed tp 2 ep 2 -> one process / tp 2 and one process -> tp 2 ep 2 = one process; tp 2 ep 2 -> ep 2 dp 2 = one process -> ep 2 dp 2; 3 experts on 2 ranks, 8 experts top-1 on 4 tokens = one process: $(cat "$tmp/cmp")"
else bad "tp ep losses: $(cat "$tmp/cmp")"; fi
cmp -s tpep2/model.safetensors tpep2b/model.safetensors && ok "tp 2 ep 2 twice: model.safetensors bitwise identical" || bad "tp 2 ep 2: two runs differ"
if /usr/bin/python3 - moe1/model.safetensors tpep2/model.safetensors >"$tmp/cmp" 2>&1 <<'PY'
import json, struct, sys
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    return {k: struct.unpack("<%df" % ((v["data_offsets"][1] - v["data_offsets"][0]) // 4), d[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F32"}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys() and any(".experts.4." in k for k in a)
worst = max(abs(x - y) for k in a for x, y in zip(a[k], b[k]))
assert worst <= 1e-4, worst
print("%d tensors (every expert from its owner), max |difference| %.1e" % (len(a), worst))
PY
then ok "tp 2 ep 2 checkpoint = one process's: $(cat "$tmp/cmp")"; else bad "tp 2 ep 2 checkpoint: $(cat "$tmp/cmp")"; fi

# ---- ffn plan's prediction against the measurement (2 ranks) ----
# The peak (one thread) and the link (ffn bench link) are measured in this
# run and passed to ffn plan; the bound is generous (predicted/measured in
# [1/100, 10]: a loaded host stretches the measurement, never shrinks it):
# this checks the model's arithmetic and units, not the machine.
# Under ASan (asan-cli round) this part is left out, said on the output: an
# instrumented binary's times are not the machine's, and the plain round
# runs it.
if [[ "$FFN" == */asan/* ]]; then
    ok "ffn plan vs 2 ranks: not under ASan (timings of an instrumented binary); the plain round checks it"
else
peak=$("$FFN" bench peak --threads 1 --json 2>/dev/null)
link=$(timeout 120 "${MPIRUN[@]}" -np 2 "$FFN" bench link --mb 8 --repeats 3 --json 2>/dev/null | tail -1)
mtp=$(timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" bench layer --tp 2 --hidden 1024 --intermediate 2816 --tokens 128 --repeats 3 --threads 1 --json 2>/dev/null | tail -1)
mep=$(timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" bench moe --ep 2 --hidden 512 --moe-intermediate 704 --experts 8 --top-k 2 --tokens 256 --repeats 3 --threads 1 --json 2>/dev/null | tail -1)
P=(--seq-len 32 --hidden-size 128 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 344 --corpus en --eval-every 0 --quiet)
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --steps 10 --batch-size 8 "${P[@]}" --threads 1 --out pdp --json >pdp.json 2>/dev/null || bad "plan check: dp 2 training"
if /usr/bin/python3 - "$FFN" "$peak" "$link" "$mtp" "$mep" pdp.json pdp/config.json >"$tmp/cmp" 2>&1 <<'PY'
import json, subprocess, sys
ffn, peak, link, mtp, mep = sys.argv[1], *(json.loads(a) for a in sys.argv[2:6])
dp, cfg = json.load(open(sys.argv[6])), sys.argv[7]
mach = ["--peak-gflops", "%.4f" % peak["gflops"], "--link-gbps", "%.6f" % link["link_gbps"],
        "--latency-us", "%.4f" % link["latency_us"], "--json"]
def plan(*a):
    return json.loads(subprocess.run([ffn, "plan", *a, *mach], capture_output=True, text=True, check=True).stdout)
ptp = plan("--layer", "ffn", "--tp", "2", "--hidden", "1024", "--intermediate", "2816", "--tokens", "128")
pep = plan("--layer", "moe", "--ep", "2", "--hidden", "512", "--moe-intermediate", "704", "--experts", "8",
           "--top-k", "2", "--tokens", "256")
pdp = plan(cfg, "--dp", "2", "--batch-size", "8", "--seq-len", "32")
rows = [("TP FFN 1024x2816 N=128 fwd+bwd", ptp["time_s"]["forward_backward"], mtp["forward_backward_ms"] * 1e-3),
        ("EP MoE 8x704 top-2 N=256 fwd+bwd", pep["time_s"]["forward_backward"], mep["forward_backward_ms"] * 1e-3),
        ("DP train step (D 128, B 8, T 32)", pdp["time_s"]["step_serial"], 2 * 8 * 32 / dp["tokens_per_s"])]
print("peak %.1f GFLOP/s, link %.3f GB/s, %.1f us a message (measured here):" % (
      peak["gflops"], link["link_gbps"], link["latency_us"]))
for name, p, m in rows:
    print("  %s: predicted %.4f s, measured %.4f s, predicted/measured %.2f" % (name, p, m, p / m))
for name, p, m in rows:
    assert 1 / 100 <= p / m <= 10, (name, p, m)
PY
then ok "ffn plan vs 2 ranks here: $(cat "$tmp/cmp" | tr '\n' ';')"
else bad "ffn plan vs measurement: $(cat "$tmp/cmp")"; fi
fi

# ---- 200 steps, and resuming under another layout ----
# lr 5e-4: at 1e-3 this small model goes through a loss spike near step 65
# that amplifies the 1e-9 differences of any other summation order to 2e-4.
# Under ASan 40 steps (stopped and resumed at 20): the same layouts and
# resumes through the sanitizer; the plain build runs the 200.
N=200; H=100
case "$FFN" in */asan/*) N=40; H=20 ;; esac
L=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 96
   --corpus en --eval-every $H --eval-batches 4 --lr 5e-4 --quiet --json)
"$FFN" train --steps $N --batch-size 4 "${L[@]}" --threads 1 --out l1 >l1.json 2>/dev/null || bad "$N steps, one process"
timeout 600 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --steps $N --batch-size 2 "${L[@]}" --out l2 >l2.json 2>/dev/null || bad "$N steps, dp 2"
timeout 600 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --steps $N --stop-at $H --batch-size 2 "${L[@]}" --out l3 >/dev/null 2>&1 || bad "dp 2 stop at $H"
"$FFN" train --resume l3 --threads 1 --quiet --json >l3.json 2>"$tmp/e3" || bad "resume dp 2 -> 1 process: $(cat "$tmp/e3")"
"$FFN" train --steps $N --stop-at $H --batch-size 4 "${L[@]}" --threads 1 --out l4 >/dev/null 2>&1 || bad "one process stop at $H"
timeout 600 "${MPIRUN[@]}" -np 4 "$FFN" train --dp 4 --resume l4 --quiet --json >l4.json 2>"$tmp/e4" || bad "resume 1 -> dp 4: $(tail -3 "$tmp/e4")"
timeout 600 "${MPIRUN[@]}" -np 2 "$FFN" train --tp 2 --steps $N --batch-size 4 "${L[@]}" --out l5 >l5.json 2>/dev/null || bad "$N steps, tp 2"
timeout 600 "${MPIRUN[@]}" -np 2 "$FFN" train --tp 2 --steps $N --stop-at $H --batch-size 4 "${L[@]}" --out l6 >/dev/null 2>&1 || bad "tp 2 stop at $H"
timeout 600 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --resume l6 --quiet --json >l6.json 2>"$tmp/e6" || bad "resume tp 2 -> dp 2: $(tail -3 "$tmp/e6")"
if /usr/bin/python3 - "$N" l1.json l2.json l3.json l4.json l5.json l6.json >"$tmp/cmp" 2>&1 <<'PY'
import json, sys
n = int(sys.argv[1])
v = [json.loads(open(p).read())["val_loss"] for p in sys.argv[2:]]
s = [json.loads(open(p).read())["steps_done"] for p in sys.argv[2:]]
assert s == [n] * 6, s
for x in v[1:]:
    assert abs(x - v[0]) <= 1e-4, v
print(("val_loss at %d: " % n) + "one %.6f, dp2 %.6f, dp2->1 %.6f, 1->dp4 %.6f, tp2 %.6f, tp2->dp2 %.6f" % tuple(v))
PY
then ok "$(cat "$tmp/cmp")"; else bad "$N steps / resume: $(cat "$tmp/cmp")"; fi

# ---- failures: every rank stops with the message ----
B=(--steps 5 --batch-size 2 --seq-len 16 --hidden-size 32 --num-hidden-layers 1 --quiet)
expect() { # CODE PATTERN cmd...
    local code=$1 pat=$2; shift 2
    local rc=0
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if { [[ $code == nz ]] && ((rc != 0 && rc != 124)); } || { [[ $code != nz ]] && ((rc == code)); }; then :; else
        bad "$* : exit $rc (expected $code), stderr: $(head -c 400 "$tmp/err")"; return; fi
    if grep -qE -- "$pat" "$tmp/err"; then ok "($rc) ${*: -6}"
    else bad "$* : stderr lacks '$pat': $(head -c 400 "$tmp/err")"; fi
}
expect 1 "needs 2 processes: start them with mpirun -np 2" "$FFN" train --dp 2 "${B[@]}" --out f1
[[ ! -e f1 ]] && ok "nothing written without mpirun" || bad "f1 written"
expect nz "--dp 3 = 3 ranks, but mpirun started 2" "${MPIRUN[@]}" -np 2 "$FFN" train --dp 3 "${B[@]}" --out f2
expect nz "--tp 3 does not divide the 4 attention heads" "${MPIRUN[@]}" -np 3 "$FFN" train --tp 3 "${B[@]}" --num-attention-heads 4 --out f3
# each of these: the message, nothing written.  Every rank fails with it,
# but mpirun ends the job when the first one exits, so a slower rank may
# be gone before it prints: at least one must have.
expect_all() { # NP PATTERN OUT cmd...
    local np=$1 pat=$2 out=$3; shift 3
    local rc=0
    timeout 120 "${MPIRUN[@]}" -np "$np" "$@" --out "$out" >"$tmp/out" 2>"$tmp/err" || rc=$?
    local n; n=$(grep -cE -- "$pat" "$tmp/err")
    if ((rc != 0 && rc != 124)) && ((n >= 1)) && [[ ! -e "$out" ]]; then ok "($rc, $n of $np ranks printed it, nothing written) $pat"
    else bad "-np $np $* : exit $rc, $n of $np ranks said '$pat', $(ls -d "$out" 2>/dev/null): $(head -c 400 "$tmp/err")"; fi
}
expect_all 2 "--ep 2 is larger than the 1 experts" g1 "$FFN" train --ep 2 "${B[@]}" --num-experts 1 --num-experts-per-tok 1
expect_all 2 "--ep 2: the model has no MoE layers" g2 "$FFN" train --ep 2 "${B[@]}"
expect_all 3 "--ep 2 does not divide --dp 3" g3 "$FFN" train --ep 2 --dp 3 "${B[@]}" --num-experts 4
expect_all 2 "--tp 2 does not divide the 1 key/value heads" g4 "$FFN" train --tp 2 "${B[@]}" --num-attention-heads 4 --num-key-value-heads 1
expect_all 4 "--tp 2 with --ep 4: with --tp T the experts are either split by units" g5 "$FFN" train --tp 2 --dp 2 --ep 4 "${B[@]}" --num-experts 4
expect_all 2 "--ep 2: the model has no MoE layers" g5b "$FFN" train --tp 2 --ep 2 "${B[@]}"
expect_all 2 "--ep 2 is larger than the 1 experts" g5c "$FFN" train --tp 2 --ep 2 "${B[@]}" --num-experts 1 --num-experts-per-tok 1
expect_all 2 "--tp 2 x --dp 2 = 4 ranks, but mpirun started 2" g6 "$FFN" train --tp 2 --dp 2 "${B[@]}"
expect 1 "--ep 2 needs 2 processes|needs 2 processes" "$FFN" train --ep 2 "${B[@]}" --num-experts 4 --out g7
[[ ! -e g7 ]] && ok "--ep without mpirun: nothing written" || bad "g7 written"
expect_all 2 "--zero 2 with --dp 1: ZeRO-2 shards the gradients and the optimizer over the data-parallel ranks" g8 "$FFN" train --tp 2 --zero 2 "${B[@]}"
expect 2 "--zero 1 shards the optimizer over --dp ranks: start them with mpirun" "$FFN" train --zero 1 "${B[@]}" --out g9
[[ ! -e g9 ]] && ok "--zero without mpirun: nothing written" || bad "g9 written"
# (every option mismatched across the ranks: tests/cli/test_dist_agree.sh)
expect nz "the ranks were started with different options: --seed: rank 0 has 1, rank 1 has 2" \
    "${MPIRUN[@]}" -np 1 "$FFN" train --dp 2 "${B[@]}" --seed 1 --out f4 : -np 1 "$FFN" train --dp 2 "${B[@]}" --seed 2 --out f4
head -c 3000 /dev/urandom | base64 > "$tmp/some.txt"
expect nz "rank 1: $tmp/nope.txt: cannot open" \
    "${MPIRUN[@]}" -np 1 "$FFN" train --dp 2 "${B[@]}" --out f5 --data "$tmp/some.txt" : -np 1 "$FFN" train --dp 2 "${B[@]}" --out f5 --data "$tmp/nope.txt"
[[ ! -e f4/model.safetensors && ! -e f5/model.safetensors ]] && ok "nothing written after a failed start" || bad "a failed start wrote a model"

# a rank killed with -9: the job ends (no hang), the checkpoint still loads
K=(--steps 100000 --batch-size 2 --seq-len 32 --hidden-size 48 --num-hidden-layers 2 --save-every 5 --quiet)
"${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 "${K[@]}" --out killed >/dev/null 2>"$tmp/ek" &
mp=$!
for _ in $(seq 1 600); do [[ -f killed/model.safetensors ]] && break; sleep 0.1; done
victim=$(pgrep -f -- "--out killed" | while read -r p; do
    [[ "$(cat /proc/"$p"/comm 2>/dev/null)" != mpirun ]] && grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/"$p"/environ 2>/dev/null && echo "$p"
done | head -1)
if [[ -n "$victim" ]]; then
    kill -9 "$victim"
    t0=$SECONDS
    for _ in $(seq 1 300); do kill -0 $mp 2>/dev/null || break; sleep 0.1; done
    if kill -0 $mp 2>/dev/null; then bad "mpirun still running 30 s after rank 1 was killed"; kill -9 $mp
    else
        wait $mp; rc=$?
        if [[ $rc -ne 0 ]] && grep -qiE "rank 1|\[\[[0-9]+,1\],1\]|signal 9" "$tmp/ek"; then
            ok "kill -9 of rank 1: mpirun exited $rc after $((SECONDS - t0)) s naming it"
        else bad "kill -9: rc $rc, stderr $(head -c 300 "$tmp/ek")"; fi
    fi
    "$FFN" generate killed --steps 5 --prompt "the" >/dev/null 2>"$tmp/eg" && ok "the last checkpoint loads (generate)" || bad "checkpoint after the kill: $(cat "$tmp/eg")"
else
    bad "could not find rank 1's process"; kill $mp 2>/dev/null; wait $mp 2>/dev/null
fi
exit $fail
