#!/usr/bin/env bash
# test_dist_zero.sh -- ZeRO-1 (--zero 1) with tensor parallelism under ffn
# train (Open MPI):
#   - a dense model: --tp 2 --dp 2 --zero 1 writes the bytes --tp 2 --dp 2
#     does (the reduce-scatter is the first half of the all-reduce, the
#     update elementwise, the all-gather copies), the same twice, and equals
#     one process with batch 2B (losses 1e-6 relative, every tensor of the
#     model and of AdamW's m and v within 1e-4); stopped at 4 and resumed in
#     one process it ends where the uninterrupted run does;
#   - a mutation (FFN_DIST_MUTATE=zero-owner: each rank updates another
#     rank's range) breaks the equality;
#   - MoE: --tp 2 --ep 2 --dp 2 --zero 1 equals --tp 2 --ep 2 --dp 2 (the
#     router's TP sum comes before the DP sum under ZeRO).
set -uo pipefail
source "$(dirname "$0")/lib_dist.sh"

# ---- ZeRO-1 with --tp (and --tp T --ep T) ----
# A dense model: --tp 2 --dp 2 --zero 1 writes the bytes --tp 2 --dp 2 does
# (the reduce-scatter is the first half of the all-reduce, the update
# elementwise, the all-gather copies), twice the same, and equals one
# process with batch 2B; stopped at 4 and resumed in one process it ends
# where the uninterrupted run does.  The mutation zero-owner (each rank
# updates another rank's range) must break the equality.  With MoE, --tp 2
# --ep 2 --dp 2 --zero 1 equals --tp 2 --ep 2 --dp 2 (1e-6: the router's
# TP sum comes before the DP sum under ZeRO).
Z=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
   --corpus en --steps 8 --eval-every 4 --eval-batches 4 --quiet --json)
zrun() { local np=$1; shift; timeout 300 "${MPIRUN[@]}" -np "$np" "$FFN" train "${Z[@]}" "$@" 2>"$tmp/ez" >/dev/null ||
             bad "-np $np $*: $(tail -3 "$tmp/ez")"; }
"$FFN" train "${Z[@]}" --batch-size 8 --threads 1 --out zone >/dev/null 2>"$tmp/ez" || bad "zero: one process: $(tail -3 "$tmp/ez")"
zrun 4 --tp 2 --dp 2 --batch-size 4 --out ztp
zrun 4 --tp 2 --dp 2 --zero 1 --batch-size 4 --out ztpz
zrun 4 --tp 2 --dp 2 --zero 1 --batch-size 4 --out ztpz2
zrun 4 --tp 2 --dp 2 --zero 1 --batch-size 4 --stop-at 4 --out ztpzs
"$FFN" train --resume ztpzs --threads 1 --quiet >/dev/null 2>"$tmp/ez" || bad "resume tp 2 dp 2 zero 1 -> one process: $(tail -3 "$tmp/ez")"
FFN_DIST_MUTATE=zero-owner zrun 4 --tp 2 --dp 2 --zero 1 --batch-size 4 --out ztpzm
MZ=(--num-experts 4 --num-experts-per-tok 2)
zrun 4 --tp 2 --ep 2 --dp 2 --batch-size 4 "${MZ[@]}" --out zte
zrun 4 --tp 2 --ep 2 --dp 2 --zero 1 --batch-size 4 "${MZ[@]}" --out ztez
for f in model.safetensors train_state.safetensors; do
    cmp -s ztp/$f ztpz/$f && cmp -s ztpz/$f ztpz2/$f && ok "tp 2 dp 2 zero 1: $f bitwise that of tp 2 dp 2, and the same twice" ||
        bad "tp 2 dp 2 zero 1: $f differs from tp 2 dp 2 or between two runs"
done
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
exec(open("cmp.py").read())
r = [same("zone", "ztpz"), same("zone", "ztpzs"), same("zte", "ztez")]
print("losses within %.1e relative, parameters and moments within %.1e" % (max(x for x, _ in r), max(y for _, y in r)))
PY
then ok "zero 1: tp 2 dp 2, tp 2 dp 2 -> one process resumed = one process (batch 8); tp 2 ep 2 dp 2 = without zero: $(cat "$tmp/out")"
else bad "zero 1 with tp: $(tail -5 "$tmp/out")"; fi
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
import sys; exec(open("cmp.py").read())
try:
    same("zone", "ztpzm")
except AssertionError as e:
    print("caught: %s" % (e,)); sys.exit(0)
sys.exit(1)
PY
then ok "mutation zero-owner (each rank updates another's range) fails the comparison: $(head -c 160 "$tmp/out")"
else bad "mutation zero-owner not caught: $(tail -3 "$tmp/out")"; fi

exit $fail
