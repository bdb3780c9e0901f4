#!/usr/bin/env bash
# test_dist_overlap.sh -- ffn train --overlap (gradient buckets summed
# during the backward, src/dist/overlap.c) under Open MPI:
#   - --overlap 1 writes the bytes of --overlap 0 for --dp 2 with 16 buckets
#     and with one, for --dp 2 --zero 2 (16 buckets) and for --tp 2 --dp 2;
#     --dp 2 --overlap 1 equals one process with batch 2B (dist_cmp.py's
#     tolerance);
#   - mutations: FFN_DIST_MUTATE=overlap-early (every bucket started one
#     layer before its gradients are complete) and overlap-skip (the first
#     ready bucket never summed) break the equality, with --dp 2 and with
#     --zero 2 (early);
#   - --profile --json has the "comm" object (hidden share within [0, 1]);
#   - --overlap 2 refused, naming the flag and the range.
set -uo pipefail
source "$(dirname "$0")/lib_dist.sh"

Z=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
   --corpus en --steps 8 --eval-every 4 --eval-batches 4 --quiet --json)
run() { local np=$1; shift; timeout 300 "${MPIRUN[@]}" -np "$np" "$FFN" train "${Z[@]}" --threads 1 "$@" 2>"$tmp/e" ||
            bad "-np $np $*: $(tail -3 "$tmp/e")"; }
S=(--bucket-mb 0.01) # 2621 floats a bucket: 16 buckets of the 39,792 parameters
"$FFN" train "${Z[@]}" --threads 1 --batch-size 8 --out one >/dev/null 2>"$tmp/e" || bad "one process: $(tail -3 "$tmp/e")"
for ov in 0 1; do
    run 2 --dp 2 --batch-size 4 "${S[@]}" --overlap $ov --out d16_$ov >/dev/null
    run 2 --dp 2 --batch-size 4 --bucket-mb 0 --overlap $ov --out d1_$ov >/dev/null
    run 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --overlap $ov --out z2_$ov >/dev/null
    run 4 --tp 2 --dp 2 --batch-size 4 "${S[@]}" --overlap $ov --out tp_$ov >/dev/null
done
FFN_DIST_MUTATE=overlap-early run 2 --dp 2 --batch-size 4 "${S[@]}" --out m_early >/dev/null
FFN_DIST_MUTATE=overlap-skip run 2 --dp 2 --batch-size 4 "${S[@]}" --out m_skip >/dev/null
FFN_DIST_MUTATE=overlap-early run 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --out m_z2early >/dev/null

for c in d16:"dp 2, 16 buckets" d1:"dp 2, one bucket" z2:"dp 2 zero 2, 16 buckets" tp:"tp 2 dp 2"; do
    k=${c%%:*}
    if cmp -s ${k}_0/model.safetensors ${k}_1/model.safetensors &&
        cmp -s ${k}_0/train_state.safetensors ${k}_1/train_state.safetensors; then
        ok "${c#*:}: --overlap 1 writes the bytes of --overlap 0"
    else bad "${c#*:}: --overlap 1 differs from --overlap 0"; fi
done
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
exec(open("cmp.py").read())
print("losses within %.1e relative, parameters and moments within %.1e" % same("one", "d16_1"))
PY
then ok "dp 2 --overlap 1 = one process (batch 8): $(cat "$tmp/out")"
else bad "dp 2 --overlap 1 against one process: $(tail -5 "$tmp/out")"; fi
for m in m_early:d16_0:overlap-early m_skip:d16_0:overlap-skip m_z2early:z2_0:"overlap-early (zero 2)"; do
    IFS=: read -r run ref name <<<"$m"
    if [[ -f $run/model.safetensors && -f $ref/model.safetensors ]] && ! cmp -s $run/model.safetensors $ref/model.safetensors; then
        ok "mutation $name changes the checkpoint"
    else bad "mutation $name not caught (or the run failed)"; fi
done

run 2 --dp 2 --batch-size 4 "${S[@]}" --steps 2 --eval-every 0 --profile --out prof >prof.json
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
import json
c = json.load(open("prof.json"))["comm"]
assert c["overlap"] == 1 and c["comm_s_per_step"] > 0 and c["compute_s_per_step"] > 0, c
assert 0 <= c["hidden_share"] <= 1, c
print("hidden %.2f, communication %.2f ms/step" % (c["hidden_share"], 1e3 * c["comm_s_per_step"]))
PY
then ok "--profile --json: comm object ($(cat "$tmp/out"))"
else bad "--profile --json comm: $(tail -3 "$tmp/out")"; fi

"$FFN" train "${Z[@]}" --overlap 2 --out bad >/dev/null 2>"$tmp/e"; rc=$?
if [[ $rc -ne 0 && ! -e bad ]] && grep -q -- "--overlap" "$tmp/e" && grep -q "2" "$tmp/e"; then
    ok "--overlap 2 refused: $(head -1 "$tmp/e")"
else bad "--overlap 2: exit $rc, $(head -2 "$tmp/e")"; fi
exit $fail
