#!/usr/bin/env bash
# test_resume.sh -- `ffn train --resume` continues bit-identically:
#   a run of 2·S steps == S steps (--stop-at S) + a resume to 2·S,
# byte-identical model.safetensors and equal losses at every step (and equal
# val losses at every common evaluation), for a dense model with gradient
# accumulation and GQA, a MoE model, and a run stopped by SIGINT (Ctrl-C)
# at an arbitrary step then resumed.  Also: the interrupted run says where it
# saved and exits 130.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
FFN_SHARED="${FFN_SHARED:-../shared}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
head -c 60000 "$FFN_SHARED/data/tinyshakespeare.txt" > "$tmp/data.txt"
fail() { echo "FAIL: $*"; exit 1; }

# "step loss" of every line of a metrics log, and "step val_loss" of evaluations
losses() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    print(o["step"], repr(o["loss"]))' "$1"; }
vals() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if "val_loss" in o: print(o["step"], repr(o["val_loss"]))' "$1"; }

check_pair() { # name, dir of the straight run, dir of the split run
    local name=$1 a=$2 b=$3
    cmp "$a/model.safetensors" "$b/model.safetensors" || fail "$name: model.safetensors differ"
    diff <(losses "$a.jsonl") <(losses "$b.jsonl") || fail "$name: training losses differ"
    # every evaluation of the straight run appears, equal, in the split run
    local missing
    missing=$(comm -23 <(vals "$a.jsonl" | sort) <(vals "$b.jsonl" | sort))
    [[ -z "$missing" ]] || fail "$name: val losses differ: $missing"
    local n
    n=$(losses "$a.jsonl" | wc -l)
    echo "ok $name: $n steps, identical weights ($(stat -c %s "$a/model.safetensors") bytes) and losses"
}

small=(--data "$tmp/data.txt" --hidden-size 32 --intermediate-size 48 --num-hidden-layers 2
       --num-attention-heads 4 --num-key-value-heads 2 --seq-len 32 --batch-size 4
       --eval-every 3 --eval-batches 2 --quiet)
# Case 1 runs on 2 threads (reductions must still be reproducible); the
# others on 1, which is also fast on a loaded machine.

# 1. dense SwiGLU, GQA, gradient accumulation, char tokenizer: 12 = 6 + 6
"$FFN_BIN" train "${small[@]}" --threads 2 --grad-accum 2 --steps 12 --out "$tmp/a1" --log "$tmp/a1.jsonl" >/dev/null
"$FFN_BIN" train "${small[@]}" --threads 2 --grad-accum 2 --steps 12 --stop-at 6 --out "$tmp/b1" --log "$tmp/b1.jsonl" >/dev/null
"$FFN_BIN" train --resume "$tmp/b1" --log "$tmp/b1.jsonl" --quiet --threads 2 >/dev/null
check_pair dense "$tmp/a1" "$tmp/b1"

# 1b. the log after a crash: steps logged after the last checkpoint are taken
#     again on resume, and the log keeps one line per step.  Simulated: a run
#     from the step-6 checkpoint to step 9 into another --out (the log gains
#     7..9 while b1c stays at 6), then the real resume from b1c.
"$FFN_BIN" train "${small[@]}" --threads 2 --grad-accum 2 --steps 12 --stop-at 6 --out "$tmp/b1c" --log "$tmp/b1c.jsonl" >/dev/null
"$FFN_BIN" train --resume "$tmp/b1c" --out "$tmp/b1x" --stop-at 9 --log "$tmp/b1c.jsonl" --quiet --threads 2 >/dev/null
[[ $(wc -l < "$tmp/b1c.jsonl") -eq 9 ]] || fail "log setup: expected 9 lines"
"$FFN_BIN" train --resume "$tmp/b1c" --log "$tmp/b1c.jsonl" --quiet --threads 2 >/dev/null
check_pair log-after-crash "$tmp/a1" "$tmp/b1c"

# 2. MoE (top-2 of 4 gated experts in every other layer), word tokenizer: 10 = 5 + 5
moe=(--threads 1 --mlp-type moe --num-experts 4 --num-experts-per-tok 2 --moe-layer-freq 2 --tokenizer word
     --steps 10)
"$FFN_BIN" train "${small[@]}" "${moe[@]}" --out "$tmp/a2" --log "$tmp/a2.jsonl" >/dev/null
"$FFN_BIN" train "${small[@]}" "${moe[@]}" --stop-at 5 --out "$tmp/b2" --log "$tmp/b2.jsonl" >/dev/null
"$FFN_BIN" train --resume "$tmp/b2" --log "$tmp/b2.jsonl" --quiet --threads 1 >/dev/null
check_pair moe "$tmp/a2" "$tmp/b2"

# 3. Ctrl-C at an arbitrary moment, then resume: equal to the straight run.
long=("${small[@]}" --threads 1 --steps 400 --eval-every 100)
"$FFN_BIN" train "${long[@]}" --out "$tmp/a3" --log "$tmp/a3.jsonl" >/dev/null
"$FFN_BIN" train "${long[@]}" --out "$tmp/b3" --log "$tmp/b3.jsonl" >/dev/null 2>"$tmp/err3" &
pid=$!
# wait for the first steps to be logged, then interrupt
for _ in $(seq 500); do [[ $(cat "$tmp/b3.jsonl" 2>/dev/null | wc -l) -ge 3 ]] && break; sleep 0.01; done
kill -INT $pid
rc=0; wait $pid || rc=$?
if [[ $rc -eq 0 ]]; then
    echo "note: the run finished before SIGINT arrived; the interrupt path was not exercised"
else
    [[ $rc -eq 130 ]] || { cat "$tmp/err3"; fail "SIGINT: expected exit 130, got $rc"; }
    grep -q "interrupted at step" "$tmp/err3" || fail "SIGINT: no 'interrupted at step' message"
    grep -q "checkpoint saved in $tmp/b3" "$tmp/err3" || fail "SIGINT: the message does not say where it saved"
    stopped=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["step"])' "$tmp/b3.jsonl")
    echo "interrupted at step $stopped: $(grep -o 'interrupted.*' "$tmp/err3")"
    "$FFN_BIN" train --resume "$tmp/b3" --log "$tmp/b3.jsonl" --quiet --threads 1 >/dev/null
fi
check_pair sigint "$tmp/a3" "$tmp/b3"
echo "all resume checks passed"
