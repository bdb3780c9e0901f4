#!/usr/bin/env bash
# test_options.sh -- the option table of the `ffn` command (tools/cli.c):
#   - every command's and subcommand's --help exits 0 on stdout, has a usage
#     line and no line wider than 80 columns; `ffn help CMD` is CMD --help;
#   - one uniform usage error: a bad value names the flag, the value and the
#     accepted range; an unknown flag suggests the nearest one; exit 2;
#   - every flag the trainer's resume table names is a flag ffn train takes;
#   - the thread rule: --threads 0 runs, more threads than cores warn;
#   - consistency: generate takes MODEL positionally or as --model; generate
#     and run document the same sampling defaults; --data with --corpus is
#     refused; every --help with --layer says layers count from 0;
#     --dump-logits writes the FILE it is given; run --info of a llama2.c
#     file says fp32; the summary of a run stopped between evaluations says
#     at which step its validation loss was measured;
#   - ffn layer --make-example writes files that ffn layer and ffn collapse
#     run on, and keeps existing files unless --force.
set -uo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
SHARED="${FFN_SHARED:-../shared}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# expect CODE PATTERN cmd... : exit CODE and stderr matching the ERE PATTERN
expect() {
    local code=$1 pat=$2; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -eq $code ]] && grep -qE -- "$pat" "$tmp/err"; then ok "($code) $*"
    else bad "$* : exit $rc (expected $code), stderr: $(head -c 300 "$tmp/err")"; fi
}

# columns of the widest line (characters, not bytes)
widest() { /usr/bin/python3 -c 'import sys; print(max((len(l.rstrip("\n")) for l in sys.stdin.buffer.read().decode("utf-8").splitlines(True)), default=0))'; }

# ---- --help everywhere: exit 0, a usage line, at most 80 columns ----
helps=("" "version" "params" "layer" "collapse" "bench" "bench layer" "bench moe" "bench peak"
       "bench bandwidth" "corpus" "train" "generate" "demo" "compare" "run" "export" "quantize" "eval" "inspect"
       "inspect keys" "inspect gates" "report")
for c in "${helps[@]}"; do
    # shellcheck disable=SC2086
    if "$FFN" $c --help >"$tmp/h" 2>"$tmp/e"; then
        w=$(widest <"$tmp/h")
        if grep -q "^usage: ffn" "$tmp/h" && [[ $w -le 80 && ! -s "$tmp/e" ]]; then ok "ffn $c --help ($w columns)"
        else bad "ffn $c --help: widest line $w, usage line $(grep -c '^usage: ffn' "$tmp/h"), stderr $(head -c 100 "$tmp/e")"; fi
    else bad "ffn $c --help exits non-zero"; fi
done
for c in train generate "inspect keys" params; do
    # shellcheck disable=SC2086
    cmp -s <("$FFN" help $c) <("$FFN" $c --help) && ok "ffn help $c = ffn $c --help" || bad "ffn help $c differs from ffn $c --help"
done
"$FFN" help >"$tmp/g" && grep -q "^commands:" "$tmp/g" && ok "ffn help alone: the command list" || bad "ffn help"

# ---- one uniform usage error ----
expect 2 "^ffn train: --steps: expected an integer in \[1, 100000000\], got 'x'$" "$FFN" train --steps x
expect 2 "^ffn train: unknown option '--stepz' \(did you mean --steps\? see 'ffn train --help'\)$" "$FFN" train --stepz 3
expect 2 "^ffn compare: --steps: expected an integer in \[1, 100000000\], got '0'$" "$FFN" compare --steps 0
expect 2 "^ffn generate: --temperature: expected a number in \[0, 100\], got '-1'$" "$FFN" generate m --temperature -1
expect 2 "^ffn run: --top-p: expected a number in \(0, 1\], got '0'$" "$FFN" run m --ids 1 --top-p 0
expect 2 "^ffn corpus: --lang: expected en or zh, got 'fr'$" "$FFN" corpus --lang fr
expect 2 "^ffn inspect keys: unknown option '--dat' \(did you mean --data\?" "$FFN" inspect keys m --dat x
expect 2 "--steps needs a value \(an integer in \[1, 100000000\]\)" "$FFN" train --steps
expect 2 "--json takes no value" "$FFN" params x.json --json=1
expect 2 "unknown command 'trian' \(did you mean train\?" "$FFN" trian
for c in layer collapse export report run generate train compare demo inspect \
         "inspect keys" "inspect gates" "bench layer" "bench moe" "bench peak"; do
    # shellcheck disable=SC2086
    expect 2 "^ffn $c: --threads: expected an integer in \[0, 4096\], got '-3'$" "$FFN" $c --threads -3
done

# ---- the trainer's resume table names only flags ffn train takes ----
"$FFN" train --help >"$tmp/th"
flags=$(sed -n '/^static const opt_field opt_fields\[\] = {/,/^};/p' "$ROOT/src/train/train.c" | grep -oE '"--[a-z0-9-]+"' | tr -d '"' | sort -u)
[[ -n "$flags" ]] || bad "no flags found in src/train/train.c's opt_fields"
for f in $flags; do
    grep -qE -- "^  $f( |$)" "$tmp/th" && ok "resume table flag $f is an ffn train flag" || bad "src/train/train.c names $f, which ffn train does not take"
done

# ---- the thread rule ----
cores=$(nproc)
"$FFN" layer --make-example "$tmp/ex" >/dev/null || bad "--make-example"
L=(layer --config "$tmp/ex/layer.json" --weights "$tmp/ex/w.safetensors" --input "$tmp/ex/in.safetensors" --output "$tmp/ex/out.safetensors")
if "$FFN" "${L[@]}" --threads 0 >/dev/null 2>"$tmp/err" && [[ ! -s "$tmp/err" ]]; then ok "--threads 0 runs without a word"
else bad "--threads 0: $(cat "$tmp/err")"; fi
if "$FFN" "${L[@]}" --threads $((cores + 1)) >/dev/null 2>"$tmp/err" &&
   grep -q "warning: --threads $((cores + 1)) is more than the $cores cores" "$tmp/err"; then ok "--threads $((cores + 1)) on $cores cores warns"
else bad "no warning for --threads $((cores + 1)) on $cores cores: $(cat "$tmp/err")"; fi
if "$FFN" "${L[@]}" --threads "$cores" >/dev/null 2>"$tmp/err" && [[ ! -s "$tmp/err" ]]; then ok "--threads $cores (the cores) runs without a word"
else bad "--threads $cores: $(cat "$tmp/err")"; fi
grep -q "0 = FFN_NUM_THREADS when set, else every" "$tmp/th" && ok "train --help states the thread rule" || bad "train --help: thread rule"

# ---- --make-example: files that run; existing ones kept ----
"$FFN" "${L[@]}" --backward >/dev/null && ok "ffn layer runs on the example (forward and backward)" || bad "ffn layer on the example"
"$FFN" collapse --config "$tmp/ex/linear.json" --weights "$tmp/ex/linear.safetensors" --output "$tmp/ex/m.safetensors" --json >"$tmp/c.json" &&
    /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["max_rel_diff"] < 1e-5 else 1)' "$tmp/c.json" &&
    ok "ffn collapse runs on the example's linear layer (relative difference < 1e-5)" || bad "collapse on the example: $(cat "$tmp/c.json")"
before=$(md5sum "$tmp/ex/w.safetensors")
expect 1 "w.safetensors exists|layer.json exists" "$FFN" layer --make-example "$tmp/ex"
[[ "$(md5sum "$tmp/ex/w.safetensors")" == "$before" ]] && ok "existing files untouched without --force" || bad "--make-example replaced a file without --force"
echo junk >"$tmp/ex/layer.json"
"$FFN" layer --make-example "$tmp/ex" --force >/dev/null && grep -q hidden_size "$tmp/ex/layer.json" &&
    ok "--force replaces them" || bad "--make-example --force"
expect 2 "takes no --config" "$FFN" layer --make-example "$tmp/ex2" --config x.json

# ---- consistency ----
for c in generate run; do "$FFN" $c --help >"$tmp/$c.h"; done
for p in "--steps N +tokens to generate \(default 100;" "--temperature T" "0.8;" "--top-p P" "0.95;" "--seed S +.*\(default 42;"; do
    if grep -qE -- "$p" "$tmp/generate.h" && grep -qE -- "$p" "$tmp/run.h"; then ok "generate and run --help both say '$p'"
    else bad "generate and run --help differ on '$p'"; fi
done
grep -q "FILE (a safetensors file" "$tmp/run.h" && ! grep -q "FILE.safetensors" "$tmp/run.h" &&
    ok "run --help: --dump-logits writes FILE" || bad "run --help: --dump-logits wording"
grep -q "tinyllamas" "$tmp/run.h" && ok "run --help says where llama2.c checkpoints come from" || bad "run --help: no source of llama2.c files"
for c in report inspect "inspect keys" params; do
    # shellcheck disable=SC2086
    "$FFN" $c --help >"$tmp/lh"
    grep -q "0-based\|count from 0" "$tmp/lh" && ok "ffn $c --help: layers are 0-based" || bad "ffn $c --help does not say layers are 0-based"
done
echo "some text" >"$tmp/text.txt"
expect 2 "--corpus zh and --data .* exclude each other" "$FFN" train --data "$tmp/text.txt" --corpus zh
expect 2 "--data .* and --lang/--corpus zh exclude each other" "$FFN" compare --data "$tmp/text.txt" --corpus zh

# a small checkpoint, stopped between evaluations
small=(--corpus-sentences 400 --hidden-size 16 --intermediate-size 32 --num-hidden-layers 1
       --num-attention-heads 2 --num-key-value-heads 2 --seq-len 16 --batch-size 2 --eval-batches 1 --threads 1 --quiet)
"$FFN" train "${small[@]}" --steps 6 --eval-every 4 --out "$tmp/m" >/dev/null 2>&1 || bad "train a small checkpoint"
# interrupted between evaluations (every 7 steps): the summary names the step
# of the validation loss it repeats whenever that is not the last step
"$FFN" train "${small[@]}" --steps 1000000 --eval-every 7 --out "$tmp/int" >"$tmp/sum" 2>/dev/null &
pid=$!
sleep 2
kill -INT $pid
wait $pid
rc=$?
line=$(grep "^step " "$tmp/sum" || true)
n=$(sed -n 's/^step \([0-9]*\):.*/\1/p' <<<"$line")
if [[ $rc -eq 130 && -n "$n" ]]; then
    last=$(( n / 7 * 7 ))
    if (( n % 7 == 0 )); then
        [[ "$line" != *"evaluated at"* ]] && ok "interrupted at step $n (an evaluation step): no note" || bad "note on a fresh val_loss: $line"
    elif (( last == 0 )); then
        [[ "$line" != *"val_loss"* ]] && ok "interrupted at step $n before any evaluation: no val_loss" || bad "val_loss before any evaluation: $line"
    else
        [[ "$line" == *"(evaluated at step $last)"* ]] && ok "interrupted at step $n: the val_loss is said to be from step $last" || bad "stale val_loss unmarked: $line"
    fi
else bad "interrupted train: exit $rc, summary '$line'"; fi
a=$("$FFN" generate "$tmp/m" --prompt "Mary" --steps 8 --temperature 0 --threads 1)
b=$("$FFN" generate --model "$tmp/m" --prompt "Mary" --steps 8 --temperature 0 --threads 1)
[[ -n "$a" && "$a" == "$b" ]] && ok "generate MODEL = generate --model MODEL" || bad "generate positional '$a' vs --model '$b'"
expect 2 "two models given" "$FFN" generate "$tmp/m" --model "$tmp/other"
expect 2 "MODEL or --model DIR is required" "$FFN" generate --prompt hi

if [[ -f "$SHARED/models/stories260K.bin" ]]; then
    "$FFN" run "$SHARED/models/stories260K.bin" --ids 1 --steps 2 --temperature 0 --info >/dev/null 2>"$tmp/info"
    grep -q "weights fp32 (the llama2.c format)" "$tmp/info" && ! grep -q "F32 0" "$tmp/info" &&
        ok "run --info: a llama2.c file is fp32" || bad "run --info: $(cat "$tmp/info")"
    "$FFN" run "$SHARED/models/stories260K.bin" --ids 1 --steps 3 --temperature 0 --dump-logits "$tmp/logits.bin" >/dev/null &&
        [[ -s "$tmp/logits.bin" && ! -e "$tmp/logits.bin.safetensors" ]] &&
        ok "--dump-logits FILE writes FILE" || bad "--dump-logits did not write FILE"
else
    echo "skip run --info and --dump-logits: $SHARED/models/stories260K.bin missing"
fi
"$FFN" params --help >"$tmp/params_help" && grep -q "tied input/output embedding is counted once" "$tmp/params_help" && ok "params --help has the conventions" || bad "params --help lacks the conventions"

exit $fail
