#!/usr/bin/env bash
# test_ablate.sh -- neuron interventions on the command line:
#   - ffn inspect MODEL --text T --ablate L:i[,...] [--scale L:i=x] --json:
#     the next token's distribution before and after, KL(before || after) >= 0
#     and equal to what the two printed distributions imply when they hold
#     almost all the mass; scaling by 1 changes nothing (KL ~ 0);
#   - ffn inspect keys MODEL --layer L --effect --data FILE: neurons ranked
#     by the mean KL (or --rank-by loss) of their ablation, with promoted
#     tokens, every neuron of the layer once;
#   - malformed specs and out-of-range layers/neurons: the message names the
#     item and the limits, exit 2.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

"$FFN" train --corpus facts --tokenizer word --corpus-sentences 1500 --hidden-size 32 \
    --intermediate-size 48 --num-hidden-layers 2 --num-attention-heads 2 --num-key-value-heads 2 \
    --seq-len 32 --batch-size 8 --steps 40 --eval-batches 1 --threads 1 --quiet --out "$tmp/m" > /dev/null
text="Mary gave John the apple because he was"
"$FFN" inspect "$tmp/m" --text "$text" --ablate 0:3,1:7 --scale 1:2=4 --json --threads 1 > "$tmp/a.json"
"$FFN" inspect "$tmp/m" --text "$text" --scale 0:5=1 --json --threads 1 > "$tmp/one.json"
"$FFN" inspect "$tmp/m" --prompt "$text" --ablate 0:3 --threads 1 > "$tmp/a.txt"
grep -q "^KL(before || after) = " "$tmp/a.txt"
"$py" - "$tmp/a.json" "$tmp/one.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
assert [(e["layer"], e["neuron"], e["factor"]) for e in a["edits"]] == [(0, 3, 0), (1, 7, 0), (1, 2, 4)]
assert a["kl"] >= 0
for side, other in (("before", "p_after"), ("after", "p_before")):
    ps = [t["p"] for t in a[side]]
    assert len(ps) == 10 and ps == sorted(ps, reverse=True), ps
    assert 0 < sum(ps) <= 1 + 1e-5
    assert all(0 <= t[other] <= 1 for t in a[side])
# the same token in both lists has the same two probabilities
b = {t["id"]: (t["p"], t["p_after"]) for t in a["before"]}
for t in a["after"]:
    if t["id"] in b:
        assert abs(b[t["id"]][1] - t["p"]) < 1e-6 and abs(b[t["id"]][0] - t["p_before"]) < 1e-6
one = json.load(open(sys.argv[2]))
assert one["kl"] < 1e-6, one["kl"]
assert all(abs(t["p"] - t["p_after"]) < 1e-5 for t in one["before"])
print("ablate ok")
PY

# ---- keys --effect ------------------------------------------------------------------
"$FFN" corpus --facts --text --sentences 60 --seed 9 > "$tmp/data.txt"
"$FFN" inspect keys "$tmp/m" --layer 1 --effect --data "$tmp/data.txt" --window 32 --neurons 48 \
    --json --threads 1 > "$tmp/eff.json" 2>/dev/null
"$FFN" inspect keys "$tmp/m" --layer 1 --effect --rank-by loss --data "$tmp/data.txt" --window 32 \
    --neurons 5 --threads 1 > "$tmp/eff.txt" 2>/dev/null
grep -q "ranked by the loss change" "$tmp/eff.txt"
"$py" - "$tmp/eff.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
n = e["neurons"]
assert e["layer"] == 1 and e["rank_by"] == "kl" and len(n) == 48
kl = [x["mean_kl"] for x in n]
assert kl == sorted(kl, reverse=True) and kl[0] > 0 and min(kl) >= 0
assert sorted(x["neuron"] for x in n) == list(range(48))
assert all(len(x["promoted"]) == 5 for x in n)
print("effect ok")
PY
# ---- bad specs ---------------------------------------------------------------------------
expect() { # expect RC NEEDLE cmd...
    local want=$1 needle=$2; shift 2
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [[ $rc == "$want" && $out == *"$needle"* ]] || { echo "FAIL ($rc, want $want): $* -> $out"; exit 1; }
}
M=(inspect "$tmp/m" --text "$text")
expect 2 "--ablate '9:1': layer 9 out of range (the model has 2 layers: 0..1)" "$FFN" "${M[@]}" --ablate 9:1
expect 2 "--ablate '1:48': neuron 48 out of range (layer 1 has 48 neurons: 0..47)" "$FFN" "${M[@]}" --ablate 0:1,1:48
expect 2 "--ablate 'x': expected L:i (layer:neuron)" "$FFN" "${M[@]}" --ablate x
expect 2 "--ablate '1:-2': expected L:i (layer:neuron) with L and i non-negative" "$FFN" "${M[@]}" --ablate 1:-2
expect 2 "item 2 is empty" "$FFN" "${M[@]}" --ablate 1:2,,1:3
expect 2 "--scale '1:2': expected L:i=x" "$FFN" "${M[@]}" --scale 1:2
expect 2 "--scale '1:2=nan': expected a finite number" "$FFN" "${M[@]}" --scale 1:2=nan
expect 2 "--effect needs --layer" "$FFN" inspect keys "$tmp/m" --effect --data "$tmp/data.txt"
expect 2 "--rank-by" "$FFN" inspect keys "$tmp/m" --layer 0 --effect --rank-by x --data "$tmp/data.txt"
echo "test_ablate: ok"
