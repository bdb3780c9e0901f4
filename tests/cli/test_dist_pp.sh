#!/usr/bin/env bash
# test_dist_pp.sh -- pipeline stages (ffn train --pp P: the layers split
# over P ranks, a step's --grad-accum micro-batches in 1F1B, the residual
# stream and its gradient by MPI point-to-point) under Open MPI:
#   - --pp 2 --grad-accum 4 equals one process with --grad-accum 4 (losses
#     1e-6 relative, every tensor of the model and of AdamW's m and v within
#     1e-4: tests/cli/dist_cmp.py), and twice it writes the same bytes;
#   - untied embeddings, 3 layers over --pp 3 (a middle stage sends both
#     ways): the bytes of one process; 3 layers over --pp 2 (uneven) and
#     an MoE model (its aux losses summed over the stages) equal;
#   - --pp 2 --dp 2 (4 ranks) equals one process with batch 2B and --dp 2;
#   - --pp 2 --dp 2 --zero 1 (each stage's moments split over its dp
#     group): the bytes of --pp 2 --dp 2, so one process's with batch 2B;
#   - resumed across layouts: --pp 2 stopped at 4 -> one process, one
#     process -> --pp 2, --pp 2 --dp 2 -> --dp 2, --dp 2 -> --pp 2 --dp 2,
#     --pp 2 --dp 2 --zero 1 -> one process, one process -> --pp 2 --dp 2
#     --zero 1, all equal to the uninterrupted run;
#   - mutations: FFN_DIST_MUTATE=pp-boundary (3 layers over --pp 2: stage 0
#     ends a layer early, so that layer never runs) breaks the equality; pp-skip-send (one stream never sent)
#     ends the job with a deadline message instead of finishing;
#     zero-held-owner (--pp 2 --dp 2 --zero 1: a rank updates another's
#     part) changes the checkpoint's bytes;
#   - refused on every rank with one message naming both numbers, nothing
#     written: --pp 4 on 2 layers, -np 3 for --pp 2, --pp 0, --pp 2 --tp 2,
#     --pp 2 --ep 2, --pp 2 --dp 2 --zero 2, --pp 2 in one process;
#   - the state a rank keeps ("state_bytes"), its activation block
#     ("activation_bytes") and each rank's peak RSS for --pp 2 against one
#     process, printed (a 4-layer model, untied): stage 0's state (the
#     writer prints it) must be under 0.65 of one process's, its
#     activations under 0.8, and both stages' peak RSS under one
#     process's (a stage builds only its layers; the save streams).
set -uo pipefail
source "$(dirname "$0")/lib_dist.sh"

Z=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
   --corpus en --steps 8 --eval-every 4 --eval-batches 4 --grad-accum 4 --threads 1 --quiet --json)
prun() { local np=$1; shift; timeout 120 "${MPIRUN[@]}" -np "$np" "$FFN" train "${Z[@]}" "$@" 2>"$tmp/ez" ||
             bad "-np $np $*: $(tail -3 "$tmp/ez")"; }
one() { "$FFN" train "${Z[@]}" "$@" 2>"$tmp/ez" || bad "one process $*: $(tail -3 "$tmp/ez")"; }

one --batch-size 4 --out one >/dev/null
one --batch-size 8 --out one8 >/dev/null
prun 2 --pp 2 --batch-size 4 --out pp >/dev/null
prun 2 --pp 2 --batch-size 4 --out ppb >/dev/null
prun 4 --pp 2 --dp 2 --batch-size 4 --out ppdp >/dev/null
prun 2 --dp 2 --batch-size 4 --out dp2 >/dev/null
U=(--num-hidden-layers 3 --grad-accum 3 --batch-size 2)
one "${U[@]}" --tie-word-embeddings 0 --out u1 >/dev/null
prun 3 "${U[@]}" --tie-word-embeddings 0 --pp 3 --out u3 >/dev/null
one "${U[@]}" --out t1 >/dev/null
prun 2 "${U[@]}" --pp 2 --out t2 >/dev/null
one --mlp-type moe --batch-size 2 --out m1 >/dev/null
prun 2 --mlp-type moe --batch-size 2 --pp 2 --out m2 >/dev/null
# resume across layouts
prun 2 --pp 2 --batch-size 4 --stop-at 4 --out r1 >/dev/null
"$FFN" train --resume r1 --threads 1 --quiet >/dev/null 2>"$tmp/ez" || bad "resume pp 2 -> one process: $(tail -3 "$tmp/ez")"
one --batch-size 4 --stop-at 4 --out r2 >/dev/null
timeout 120 "${MPIRUN[@]}" -np 2 "$FFN" train --resume r2 --pp 2 --threads 1 --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume one process -> pp 2: $(tail -3 "$tmp/ez")"
prun 4 --pp 2 --dp 2 --batch-size 4 --stop-at 4 --out r3 >/dev/null
timeout 120 "${MPIRUN[@]}" -np 2 "$FFN" train --resume r3 --dp 2 --threads 1 --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume pp 2 dp 2 -> dp 2: $(tail -3 "$tmp/ez")"
prun 2 --dp 2 --batch-size 4 --stop-at 4 --out r4 >/dev/null
timeout 120 "${MPIRUN[@]}" -np 4 "$FFN" train --resume r4 --pp 2 --dp 2 --threads 1 --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume dp 2 -> pp 2 dp 2: $(tail -3 "$tmp/ez")"
FFN_DIST_MUTATE=pp-boundary prun 2 "${U[@]}" --pp 2 --out pm >/dev/null
# --zero 1: each stage's moments sharded over its dp group
prun 4 --pp 2 --dp 2 --zero 1 --batch-size 4 --out ppz >/dev/null
prun 4 --pp 2 --dp 2 --zero 1 --batch-size 4 --stop-at 4 --out r5 >/dev/null
"$FFN" train --resume r5 --threads 1 --quiet >/dev/null 2>"$tmp/ez" || bad "resume pp 2 dp 2 zero 1 -> one process: $(tail -3 "$tmp/ez")"
one --batch-size 8 --stop-at 4 --out r6 >/dev/null
timeout 120 "${MPIRUN[@]}" -np 4 "$FFN" train --resume r6 --pp 2 --dp 2 --zero 1 --threads 1 --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume one process -> pp 2 dp 2 zero 1: $(tail -3 "$tmp/ez")"
FFN_DIST_MUTATE=zero-held-owner prun 4 --pp 2 --dp 2 --zero 1 --batch-size 4 --out pzm >/dev/null

for f in model.safetensors train_state.safetensors; do
    cmp -s pp/$f ppb/$f && ok "pp 2: $f the same bytes twice" || bad "pp 2: $f differs between two runs"
    cmp -s u1/$f u3/$f && ok "untied, 3 layers, pp 3: $f the bytes of one process" ||
        bad "untied, 3 layers, pp 3: $f differs from one process"
    cmp -s ppdp/$f ppz/$f && ok "pp 2 dp 2 zero 1: $f the bytes of pp 2 dp 2" ||
        bad "pp 2 dp 2 zero 1: $f differs from pp 2 dp 2"
    cmp -s ppz/$f pzm/$f && bad "mutation zero-held-owner (pp 2 dp 2 zero 1): $f unchanged" ||
        ok "mutation zero-held-owner (pp 2 dp 2 zero 1): $f differs"
done
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
exec(open("cmp.py").read())
r = [same("one", "pp"), same("t1", "t2"), same("m1", "m2"), same("one8", "ppdp"), same("dp2", "ppdp"),
     same("one", "r1"), same("one", "r2"), same("one8", "r3"), same("one8", "r4"),
     same("one8", "ppz"), same("one8", "r5"), same("one8", "r6")]
print("losses within %.1e relative, parameters and moments within %.1e" % (max(x for x, _ in r), max(y for _, y in r)))
PY
then ok "pp 2 = one process (grad-accum 4), 3 layers pp 2 = one process, MoE pp 2 = one process, pp 2 dp 2 (and with zero 1) = one process batch 8 = dp 2, resumed pp 2 -> 1, 1 -> pp 2, pp 2 dp 2 -> dp 2, dp 2 -> pp 2 dp 2, pp 2 dp 2 zero 1 -> 1, 1 -> pp 2 dp 2 zero 1 = uninterrupted: $(cat "$tmp/out")"
else bad "pp equality: $(tail -5 "$tmp/out")"; fi
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
import sys; exec(open("cmp.py").read())
try:
    same("t1", "pm")
except AssertionError as e:
    print("caught: %s" % (e,)); sys.exit(0)
sys.exit(1)
PY
then ok "mutation pp-boundary fails the comparison: $(head -c 160 "$tmp/out")"
else bad "mutation pp-boundary not caught: $(tail -3 "$tmp/out")"; fi
if FFN_DIST_MUTATE=pp-skip-send timeout 60 "${MPIRUN[@]}" -np 2 "$FFN" train "${Z[@]}" --pp 2 --batch-size 4 \
       --dist-timeout 2 --out ps >/dev/null 2>"$tmp/ez"; then
    bad "mutation pp-skip-send: the job finished"
elif grep -q "^ffn train: .*timed out" "$tmp/ez"; then
    ok "mutation pp-skip-send: the job stops at the deadline: $(grep -m1 "ffn train" "$tmp/ez" | head -c 160)"
else bad "mutation pp-skip-send: no deadline message: $(tail -3 "$tmp/ez")"; fi

# ---- refusals: every rank, the same message, nothing written ----
Q=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
   --corpus en --steps 2 --quiet)
refuse() { # NP WANT ARGS...: NP 0 = one process
    local np=$1 want=$2; shift 2
    rm -rf "$tmp/x"
    if [[ $np == 0 ]]; then "$FFN" train "${Q[@]}" "$@" --out "$tmp/x" >/dev/null 2>"$tmp/er"
    else timeout 60 "${MPIRUN[@]}" -np "$np" "$FFN" train "${Q[@]}" "$@" --out "$tmp/x" >/dev/null 2>"$tmp/er"; fi
    local rc=$? n
    n=$(grep -c "^ffn train: .*$want" "$tmp/er")
    local ranks=$((np == 0 ? 1 : np))
    if [[ $rc != 0 && $n == "$ranks" && ! -e "$tmp/x" ]]; then ok "refused on $ranks rank(s): $(grep -m1 "^ffn train" "$tmp/er")"
    else bad "$* (np $np): rc $rc, $n of $ranks ranks said '$want', out $( [[ -e $tmp/x ]] && echo written || echo absent): $(head -3 "$tmp/er")"; fi
}
refuse 4 "--pp 4 needs at least 4 layers; the model has 2" --pp 4
refuse 3 "--pp 2 x --dp 1 x --tp 1 = 2 ranks, but mpirun started 3" --pp 2
refuse 0 "--pp: expected an integer in \[1, 65536\], got '0'" --pp 0
refuse 4 "--pp 2 with --tp 2 is not supported yet" --pp 2 --tp 2
refuse 4 "--pp 2 with --ep 2 is not supported yet" --pp 2 --ep 2 --dp 2 --mlp-type moe
refuse 4 "--zero 2 with --pp 2 is not supported yet" --pp 2 --dp 2 --zero 2
refuse 0 "--pp 2 needs 2 processes" --pp 2

# ---- the state a rank keeps, and the peak RSS ----
R=(--seq-len 32 --hidden-size 256 --num-hidden-layers 4 --num-attention-heads 4 --intermediate-size 1024
   --tie-word-embeddings 0 --corpus en --steps 2 --eval-every 0 --eval-batches 1 --batch-size 2
   --grad-accum 2 --threads 1 --quiet --json)
/usr/bin/time -f "maxrss %M" -o rss.one "$FFN" train "${R[@]}" --out bigone >bigone.json 2>"$tmp/ez" ||
    bad "rss run one process: $(tail -3 "$tmp/ez")"
timeout 120 "${MPIRUN[@]}" -np 2 sh -c 'exec /usr/bin/time -f "maxrss %M" -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
    "$tmp/rss" "$FFN" train "${R[@]}" --pp 2 --out bigpp >bigpp.json 2>"$tmp/ez" || bad "rss run pp 2: $(tail -3 "$tmp/ez")"
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
import json
jo, jp = json.load(open("bigone.json")), json.load(open("bigpp.json")) # pp: the writer's, stage 0
one, s0 = jo["state_bytes"], jp["state_bytes"]
a1, a0 = jo["activation_bytes"], jp["activation_bytes"]
rss = lambda f: int(open(f).read().split()[1])
r1, r0, rr1 = rss("rss.one"), rss("rss.0"), rss("rss.1")
print("state bytes one process %d, pp 2 stage 0 %d (%.2f); activation bytes %d, %d (%.2f); peak RSS one process %d KiB, pp 2 stage 0 %d KiB, stage 1 %d KiB" % (one, s0, s0 / one, a1, a0, a0 / a1, r1, r0, rr1))
assert s0 < 0.65 * one, ("state", s0, one)
assert a0 < 0.8 * a1, ("activations", a0, a1) # 2 of 4 layers (the head's buffers are carved on every stage)
assert max(r0, rr1) < r1, ("peak RSS", r0, rr1, r1) # the writer streams the checkpoint
PY
then ok "memory: $(cat "$tmp/out")"; else bad "memory: $(tail -3 "$tmp/out")"; fi
exit $fail
