#!/usr/bin/env bash
# test_trace.sh -- `ffn trace` on a tiny model trained here on the facts corpus:
#   - one prompt, --json: three L x T tables; restoring the embedding
#     everywhere gives p_clean back (p_restore_input); nothing before the
#     subject has an effect; the last layer's state at the last position
#     restores p_clean exactly; the same seed gives the same bytes;
#   - --svg writes three heat maps atomically and is not replaced without
#     --force;
#   - --facts: the average by position class and the MLP summary;
#     --recall: shares in [0, 1] over trained prompts, paraphrases, neighbours,
#     also from a --facts-file;
#   - the text of one prompt: positions grouped by class as --facts does,
#     80 columns at most, the traced token named; no progress off a
#     terminal; a warning exactly when the corruption leaves p(answer)
#     unchanged (--noise 0 always), never on stdout;
#   - --svg DIR (a directory, even with --force) and --svg in a missing
#     directory are refused before the trace runs (no table printed);
#   - bad input: a subject not in the prompt, missing flags, flags that
#     exclude each other, a malformed facts file: a message, non-zero exit.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

grep -q "Causal tracing" <<<"$("$FFN" trace --help)"
"$FFN" train --corpus facts --tokenizer word --corpus-sentences 2000 --hidden-size 32 \
    --intermediate-size 64 --num-hidden-layers 2 --num-attention-heads 2 --num-key-value-heads 2 \
    --seq-len 32 --batch-size 8 --steps 60 --eval-batches 1 --threads 1 --quiet --out "$tmp/m" > /dev/null
"$FFN" corpus --facts --json --n-facts 6 > "$tmp/facts.jsonl"
read -r prompt subject object < <("$py" -c '
import json, sys
f = json.loads(open(sys.argv[1]).readline())
print(f["prompt"].replace(" ", "_"), f["subject"], f["object"])' "$tmp/facts.jsonl")
prompt=${prompt//_/ }

"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --target "$object" --samples 3 \
    --json --threads 1 > "$tmp/one.json"
"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --target "$object" --samples 3 \
    --json --threads 1 | cmp - "$tmp/one.json"
"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --samples 3 --threads 1 > "$tmp/one.txt"
grep -q "^mlp_out: p_restored - p_corrupt" "$tmp/one.txt"
"$py" - "$tmp/one.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
T, L = len(r["tokens"]), 2
for k in ("resid_post", "mlp_out", "attn_out"):
    m = r[k]
    assert len(m) == L and all(len(row) == T for row in m), (k, len(m))
    for row in m:
        for t in range(r["subject_begin"]):
            assert row[t] == 0, (k, t, row[t])
assert abs(r["p_restore_input"] - r["p_clean"]) < 1e-9, (r["p_restore_input"], r["p_clean"])
last = r["resid_post"][L - 1][T - 1]
assert abs(last - (r["p_clean"] - r["p_corrupt"])) < 1e-5, (last, r["p_clean"], r["p_corrupt"])
assert 0 <= r["p_corrupt"] <= 1 and 0 < r["p_clean"] <= 1 and r["noise_std"] > 0
assert r["subject_end"] > r["subject_begin"]
print("one prompt ok")
PY

# ---- SVG -----------------------------------------------------------------------
"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --samples 2 --svg "$tmp/t.svg" \
    --threads 1 > /dev/null
grep -q "<svg" "$tmp/t.svg"
[[ $(grep -c "max |effect|" "$tmp/t.svg") == 3 ]] || { echo "svg: expected 3 panels"; exit 1; }
ls "$tmp" | grep -q "tmp-" && { echo "a temporary file was left behind"; exit 1; }
cp "$tmp/t.svg" "$tmp/t.before"
set +e
out=$("$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --svg "$tmp/t.svg" 2>&1); rc=$?
set -e
[[ $rc == 1 && $out == *"--force"* ]] || { echo "svg without --force: rc $rc: $out"; exit 1; }
cmp "$tmp/t.svg" "$tmp/t.before"
"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --samples 2 --noise 5 \
    --svg "$tmp/t.svg" --force --threads 1 > /dev/null
! cmp -s "$tmp/t.svg" "$tmp/t.before" || { echo "--force did not replace the svg"; exit 1; }

# ---- the text of one prompt, the nil warning ------------------------------------
"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --samples 3 --threads 1 \
    > "$tmp/one.txt" 2> "$tmp/one.err"
wide=$(awk 'length($0) > 80' "$tmp/one.txt")
[[ -z $wide ]] || { echo "lines wider than 80 columns: $wide"; exit 1; }
grep -q "^layer  *before  *subject  *subject  *subject  *after  *further  *last$" "$tmp/one.txt" ||
    { echo "no position-class table:"; cat "$tmp/one.txt"; exit 1; }
grep -q "^  last subject  *[0-9]" "$tmp/one.txt" || { echo "no 'last subject' positions"; exit 1; }
grep -q "forwards" "$tmp/one.err" && { echo "progress printed off a terminal"; exit 1; }
nil=$("$py" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(int(abs(r["p_clean"]-r["p_corrupt"]) < 0.01))' "$tmp/one.json")
"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --target "$object" --samples 3 \
    --threads 1 > "$tmp/tgt.txt" 2> "$tmp/tgt.err"
grep -qF "trace of p('$object' | '$prompt')" "$tmp/tgt.txt" ||
    grep -qF "trace of p(' $object' | '$prompt')" "$tmp/tgt.txt" ||
    { echo "the traced token '$object' is not named: $(head -1 "$tmp/tgt.txt")"; exit 1; }
if grep -q "nothing to trace" "$tmp/tgt.err"; then warned=1; else warned=0; fi
[[ $warned == "$nil" ]] || { echo "nil warning $warned, but |p_clean - p_corrupt| < 0.01 is $nil"; exit 1; }
"$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --noise 0 --samples 1 --threads 1 \
    > "$tmp/nil.txt" 2> "$tmp/nil.err"
grep -q "warning: the corruption does not change p(answer).*nothing to trace" "$tmp/nil.err" ||
    { echo "--noise 0: no warning: $(cat "$tmp/nil.err")"; exit 1; }
grep -q "nothing to trace" "$tmp/nil.txt" && { echo "the warning went to stdout"; exit 1; }
echo "one prompt's text ok (nil: $nil)"

# ---- --svg that cannot be written: refused before the work --------------------
mkdir "$tmp/svgdir"
for bad in "$tmp/svgdir" "$tmp/no/such/dir/t.svg"; do
    set +e
    "$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --svg "$bad" --force --threads 1 \
        > "$tmp/bad.out" 2> "$tmp/bad.err"; rc=$?
    set -e
    [[ $rc != 0 && ! -s "$tmp/bad.out" ]] || { echo "--svg $bad: rc $rc, stdout $(head -2 "$tmp/bad.out")"; exit 1; }
    grep -qE "is a directory|does not exist" "$tmp/bad.err" || { echo "--svg $bad: $(cat "$tmp/bad.err")"; exit 1; }
done
echo "--svg checked before the trace ok"

# ---- facts: average, recall -----------------------------------------------------------
"$FFN" trace "$tmp/m" --facts --n-facts 4 --samples 2 --json --threads 1 > "$tmp/avg.json"
"$FFN" trace "$tmp/m" --facts --n-facts 4 --samples 2 --threads 1 --svg "$tmp/avg.svg" > "$tmp/avg.txt"
grep -q "share\|holds" "$tmp/avg.txt"
grep -q "last subject" "$tmp/avg.svg"
"$FFN" trace "$tmp/m" --recall --json --threads 1 > "$tmp/recall.json"
"$FFN" trace "$tmp/m" --recall --facts-file "$tmp/facts.jsonl" --json --threads 1 > "$tmp/recall6.json"
"$FFN" trace "$tmp/m" --recall --line-start --n-facts 8 --json --threads 1 | "$py" -c '
import json, sys
r = json.load(sys.stdin)
assert r["facts"] == 8 and r["trained"]["of"] == 8, r'
"$py" - "$tmp/avg.json" "$tmp/recall.json" "$tmp/recall6.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert a["facts"] == 4 and 1 <= a["averaged"] <= 4
assert a["classes"][3] == "last subject" and a["classes"][6] == "last"
for k in ("resid_post", "mlp_out", "attn_out"):
    assert len(a[k]) == 2 and all(len(r) == 7 for r in a[k])
assert 0 <= a["mlp_layer_share"] <= 1
assert a["mlp_peak_last_subject"]["layer"] in (0, 1)
r = json.load(open(sys.argv[2]))
assert r["facts"] == 100 and r["trained"]["of"] == 100 and r["paraphrases"]["of"] == 300
for k in ("trained", "paraphrases", "neighbours"):
    assert 0 <= r[k]["share"] <= 1 and r[k]["recalled"] <= r[k]["of"]
assert sum(v["of"] for v in r["relations"].values()) == 100
r6 = json.load(open(sys.argv[3]))
assert r6["facts"] == 6 and r6["paraphrases"]["of"] == 18
print("facts ok")
PY

# ---- bad input --------------------------------------------------------------------------
expect() { # expect RC NEEDLE cmd...
    local want=$1 needle=$2; shift 2
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [[ $rc == "$want" && $out == *"$needle"* ]] || { echo "FAIL ($rc, want $want): $* -> $out"; exit 1; }
}
expect 1 "'Nobody' does not occur in the prompt" "$FFN" trace "$tmp/m" --prompt "$prompt" --subject Nobody
expect 2 "--subject" "$FFN" trace "$tmp/m" --prompt "$prompt"
expect 2 "give one" "$FFN" trace "$tmp/m" --facts --recall
expect 2 "drop --prompt" "$FFN" trace "$tmp/m" --facts --prompt "$prompt"
expect 2 "need --facts, --recall or --distributed" "$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --n-facts 3
expect 2 "--line-start needs --recall" "$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --line-start
expect 2 "--samples" "$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --samples 0
expect 2 "--noise" "$FFN" trace "$tmp/m" --prompt "$prompt" --subject "$subject" --noise -1
expect 1 "" "$FFN" trace "$tmp/none" --prompt "$prompt" --subject "$subject"
head -n 1 "$tmp/facts.jsonl" > "$tmp/bad.jsonl"
echo '{"id": 1, "subject": "X", "relation": "r", "prompt": "Y is"' >> "$tmp/bad.jsonl"
expect 1 "bad.jsonl: line 2" "$FFN" trace "$tmp/m" --recall --facts-file "$tmp/bad.jsonl"
echo '{"id": 1, "subject": "X", "relation": "r", "prompt": "Y is", "object": "o"}' > "$tmp/bad2.jsonl"
expect 1 "does not contain the subject" "$FFN" trace "$tmp/m" --recall --facts-file "$tmp/bad2.jsonl"
echo '{"id": 1, "subject": "X", "relation": "r", "prompt": "X is"}' > "$tmp/bad3.jsonl"
expect 1 "field \"object\" is missing" "$FFN" trace "$tmp/m" --facts --facts-file "$tmp/bad3.jsonl"
echo "test_trace: ok"
