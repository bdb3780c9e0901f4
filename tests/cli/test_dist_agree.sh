#!/usr/bin/env bash
# test_dist_agree.sh -- ranks of one mpirun job that were started with
# different options stop together, before step 1, with one message naming
# the option and both values, printed by every rank, within a bounded time
# (ffn_dist_init's agreement: every rank's option text compared first):
#   - ffn train, two ranks (mpirun's MPMD form, -np 1 ... : -np 1 ...),
#     each option a resume compares (model shape, vocabulary, optimizer,
#     schedule, batch, precision, train-only), the others that shape the
#     run (--steps, --stop-at, --eval-every, --save-every, the corpus) and
#     the layout (--tp, --dp, --ep, --zero, --bucket-mb, which used to
#     overflow the heap in the gradient sum): exit non-zero, both ranks
#     print "the ranks were started with different options: FLAG: rank 0
#     has A, rank 1 has B", nothing written, within 60 s; under ASan no
#     sanitizer report;
#   - a resumed run whose ranks read two checkpoints of other --lr: the
#     checkpoint's values are compared too;
#   - options that only shape a rank's output or host (--threads, --quiet,
#     --json, --dist-timeout) may differ: the job trains;
#   - ffn run --tp 2 with other --ids or --steps, ffn bench link with other
#     --mb: the same refusal;
#   - the deadline: a rank stopped (SIGSTOP) mid-training makes the other
#     give up after --dist-timeout seconds with a message naming the wait,
#     and mpirun ends the job (no process left).
# Under ASan (FFN_BIN in build/asan/) the first group runs for 13 of its 42
# flags (one of each kind: vocabulary, shape, optimizer, precision, MoE,
# run length, corpus, and every layout flag, --bucket-mb among them): every
# flag goes through the same comparison, which the plain build checks for
# each; the rest of the test runs whole.
set -uo pipefail
FFN="${FFN_BIN:-build/ffn}"
FFN="$(cd "$(dirname "$FFN")" && pwd)/$(basename "$FFN")"
SHARED="${FFN_SHARED:-../shared}"
SHARED="$(cd "$SHARED" 2>/dev/null && pwd || echo "$SHARED")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
case "$FFN" in */asan/*) export ASAN_OPTIONS="abort_on_error=0:detect_leaks=0" ;; esac
MPIRUN=(mpirun --oversubscribe)
command -v mpirun >/dev/null || { bad "mpirun missing (scripts/setup.sh test installs openmpi-bin)"; exit 1; }

B=(--batch-size 2 --seq-len 16 --hidden-size 32 --num-hidden-layers 1 --eval-batches 1 --quiet --threads 1)
# refused CMD_A... -- CMD_B... : both ranks must print PATTERN
refused() { # NAME PATTERN OUT -- args of rank 0 -- args of rank 1
    local name=$1 pat=$2 out=$3; shift 4
    local a=() b=()
    while [[ $1 != -- ]]; do a+=("$1"); shift; done
    shift
    b=("$@")
    local rc=0 t0=$SECONDS
    timeout 60 "${MPIRUN[@]}" -np 1 "$FFN" "${a[@]}" : -np 1 "$FFN" "${b[@]}" >"$tmp/out" 2>"$tmp/err" || rc=$?
    local n took=$((SECONDS - t0))
    n=$(grep -cF -- "$pat" "$tmp/err")
    if ((rc == 0 || rc == 124)); then bad "$name: exit $rc after ${took} s: $(grep -v '^ \|^-' "$tmp/err" | head -c 300)"
    elif ((n != 2)); then bad "$name: $n of 2 ranks printed '$pat': $(grep -v '^ \|^-' "$tmp/err" | head -c 400)"
    elif [[ -n $out && -e $out ]]; then bad "$name: $out written"
    elif grep -qE "AddressSanitizer|runtime error|LeakSanitizer" "$tmp/err"; then bad "$name: a sanitizer report: $(grep -m3 -E 'ERROR|runtime error' "$tmp/err")"
    else ok "$name: both ranks ($took s): $pat"; fi
}
P="the ranks were started with different options:"

# flag, rank 0's value, rank 1's value (as ffn prints them back)
cases=(
    "--tokenizer char word" "--max-vocab 0 100" "--val-fraction 0.1 0.2" "--seed 1 2"
    "--batch-size 2 4" "--seq-len 16 24" "--grad-accum 1 2" "--lr 0.001 0.002"
    "--min-lr 0.0001 0.0002" "--warmup 1 2" "--weight-decay 0.1 0.2" "--beta1 0.9 0.8"
    "--beta2 0.95 0.99" "--eps 1e-08 1e-09" "--clip 1 2" "--eval-batches 1 2"
    "--train-only all ffn" "--precision fp32 bf16" "--hidden-size 32 48"
    "--intermediate-size 64 96" "--num-hidden-layers 1 2" "--num-attention-heads 2 4"
    "--num-key-value-heads 2 1" "--rope-theta 10000 5000" "--tie-word-embeddings 0 1"
    "--hidden-act silu gelu" "--mlp-type gated dense" "--num-experts 0 2"
    "--num-experts-per-tok 1 2" "--moe-intermediate-size 0 32" "--moe-layer-freq 1 2"
    "--steps 5 6" "--stop-at 0 3" "--eval-every 0 2" "--save-every 0 2" "--corpus en zh"
    "--corpus-sentences 1000 2000" "--zero 0 1" "--bucket-mb 4 0.01"
    "--tp 1 2" "--dp 2 1" "--ep 1 2"
)
asan_flags=" --tokenizer --seq-len --lr --precision --hidden-size --num-experts --steps --corpus --zero --bucket-mb --tp --dp --ep "
for c in "${cases[@]}"; do
    read -r flag va vb <<<"$c"
    case "$FFN" in */asan/*) [[ $asan_flags == *" $flag "* ]] || continue ;; esac
    layout=(--dp 2)
    [[ $flag == --dp || $flag == --tp ]] && layout=()
    out="o${flag#--}"
    refused "train $flag" "$P $flag: rank 0 has $va, rank 1 has $vb" "$out" -- \
        train "${layout[@]}" --steps 5 "${B[@]}" $flag $va --out "$out" -- \
        train "${layout[@]}" --steps 5 "${B[@]}" $flag $vb --out "$out"
done
# a path: given on one rank only (its contents are compared later: the data's fingerprint)
head -c 4000 /dev/urandom | base64 > data.txt
refused "train --data" "$P --data: rank 0 has given, rank 1 has none" odata -- \
    train --dp 2 --steps 5 "${B[@]}" --data data.txt --out odata -- train --dp 2 --steps 5 "${B[@]}" --out odata

# resumed: the checkpoints' own values are compared
"$FFN" train --steps 6 --stop-at 2 "${B[@]}" --batch-size 4 --lr 0.001 --out ck1 >/dev/null 2>&1 &&
"$FFN" train --steps 6 --stop-at 2 "${B[@]}" --batch-size 4 --lr 0.002 --out ck2 >/dev/null 2>&1 ||
    bad "the checkpoints to resume"
refused "resume from checkpoints of other --lr" "$P --lr: rank 0 has 0.001, rank 1 has 0.002" "" -- \
    train --dp 2 --resume ck1 --quiet -- train --dp 2 --resume ck2 --out ck1 --quiet
refused "resume with --lr given on one rank" "$P --lr: rank 0 has 0.001, rank 1 has 0.003" "" -- \
    train --dp 2 --resume ck1 --quiet -- train --dp 2 --resume ck1 --lr 0.003 --quiet

# what may differ: a rank's output and host
rc=0
timeout 120 "${MPIRUN[@]}" -np 1 "$FFN" train --dp 2 --steps 3 "${B[@]}" --out same --json --dist-timeout 100 : \
    -np 1 "$FFN" train --dp 2 --steps 3 --batch-size 2 --seq-len 16 --hidden-size 32 --num-hidden-layers 1 \
    --eval-batches 1 --threads 2 --out elsewhere >"$tmp/out" 2>"$tmp/err" || rc=$?
if ((rc == 0)) && [[ -f same/model.safetensors ]] && grep -q '"steps_done": 3' "$tmp/out"; then
    ok "ranks that differ in --threads, --quiet, --json, --out, --dist-timeout only: trained"
else bad "output-only differences refused: exit $rc: $(grep -v '^ \|^-' "$tmp/err" | head -c 300)"; fi

# ffn run --tp and ffn bench link
M260="$SHARED/models/stories260K.bin"
if [[ -f "$M260" ]]; then
    refused "run --tp 2 --ids" "$P --ids: rank 0 has 1 2 3, rank 1 has 1 2 4" "" -- \
        run "$M260" --tp 2 --ids "1 2 3" --steps 4 --threads 1 -- run "$M260" --tp 2 --ids "1 2 4" --steps 4 --threads 1
    refused "run --tp 2 --steps" "$P --steps: rank 0 has 4, rank 1 has 5" "" -- \
        run "$M260" --tp 2 --ids "1 2 3" --steps 4 --threads 1 -- run "$M260" --tp 2 --ids "1 2 3" --steps 5 --threads 1
else bad "$M260 missing (FFN_SHARED)"; fi
refused "bench link --mb" "$P --mb: rank 0 has 1, rank 1 has 2" "" -- \
    bench link --mb 1 --repeats 1 -- bench link --mb 2 --repeats 1

# the deadline: rank 1 stopped in the middle of training
K=(--steps 100000 --batch-size 2 --seq-len 32 --hidden-size 48 --num-hidden-layers 2 --save-every 5 --quiet --dist-timeout 4)
"${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 "${K[@]}" --out stopped >/dev/null 2>"$tmp/es" &
mp=$!
for _ in $(seq 1 600); do [[ -f stopped/model.safetensors ]] && break; sleep 0.1; done
victim=$(pgrep -f -- "--out stopped" | while read -r p; do
    [[ "$(cat /proc/"$p"/comm 2>/dev/null)" != mpirun ]] && grep -qz '^OMPI_COMM_WORLD_RANK=1$' /proc/"$p"/environ 2>/dev/null && echo "$p"
done | head -1)
if [[ -n "$victim" ]]; then
    kill -STOP "$victim"
    t0=$SECONDS
    for _ in $(seq 1 600); do kill -0 $mp 2>/dev/null || break; sleep 0.1; done
    if kill -0 $mp 2>/dev/null; then
        bad "mpirun still running 60 s after rank 1 was stopped (deadline 4 s)"; kill -CONT "$victim"; kill -9 $mp
    else
        wait $mp; rc=$?
        left=$(pgrep -f -- "--out stopped" | wc -l)
        if ((rc != 0)) && grep -q "rank 0 had no answer from the other ranks for 4 s (the deadline, --dist-timeout)" "$tmp/es" && ((left == 0)); then
            ok "rank 1 stopped: rank 0 gave up after the 4 s deadline, mpirun ended the job after $((SECONDS - t0)) s (exit $rc)"
        else bad "stopped rank: exit $rc, $left processes left, stderr: $(grep -v '^ \|^-' "$tmp/es" | head -c 400)"; fi
    fi
    kill -CONT "$victim" 2>/dev/null; kill -9 "$victim" 2>/dev/null
else
    bad "could not find rank 1's process"; kill $mp 2>/dev/null; wait $mp 2>/dev/null
fi
exit $fail
