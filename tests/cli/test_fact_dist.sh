#!/usr/bin/env bash
# test_fact_dist.sh -- `ffn trace MODEL --distributed` (how distributed is a
# fact) on a tiny model trained here on the facts corpus:
#   - --json: one scope per layer and "all layers"; every known fact's set
#     has the size the summary counts, its units in range, p_after / the
#     verification top showing the fact removed; sizes' median and
#     quartiles recomputed from the per-fact sizes; histogram counts add up;
#     flips within [0, others]; the same run gives the same bytes;
#   - --layer L: that layer only; --threshold P: every removed fact's
#     p_after < P; --transcoder F: a features scope beside the layer's
#     neurons; the table form fits 80 columns;
#   - bad input: --layer out of range, a facts file that is not JSON lines,
#     a transcoder of another layer, flags without --distributed: a
#     message naming what is wrong, non-zero exit.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

"$FFN" train --corpus facts --tokenizer word --corpus-sentences 1500 --hidden-size 32 \
    --intermediate-size 48 --num-hidden-layers 2 --num-attention-heads 2 --num-key-value-heads 2 \
    --seq-len 32 --batch-size 8 --steps 400 --lr 3e-3 --eval-batches 1 --threads 1 --quiet --out "$tmp/m" > /dev/null

# a model this small knows few facts as top-1: the criterion here is
# p(object) >= 0.01 (top-1 is checked on a model built by hand, unit/test_fact_dist)
"$FFN" trace "$tmp/m" --distributed --n-facts 12 --threshold 0.01 --json --threads 1 > "$tmp/d.json"
"$FFN" trace "$tmp/m" --distributed --n-facts 12 --threshold 0.01 --json --threads 1 | cmp - "$tmp/d.json"
"$py" - "$tmp/d.json" 48 2 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
F, L = int(sys.argv[2]), int(sys.argv[3])
names = [s["scope"] for s in d["scopes"]]
assert names == ["layer 0", "layer 1", "all layers"], names
assert d["facts"] == 12 and 0 <= d["present"] <= 12 and d["criterion"] == "p_below_threshold"
assert d["heldout_before"] is not None and d["heldout_before"] > 0
def quant(v, q):
    at = q * (len(v) - 1); i = int(at)
    return v[-1] if i + 1 >= len(v) else v[i] + (at - i) * (v[i + 1] - v[i])
for s in d["scopes"]:
    assert s["units"] == (F * L if s["layer"] == -1 else F), s
    assert len(s["facts"]) == d["present"] == s["present"]
    sizes = sorted(f["size"] for f in s["facts"] if f["size"] > 0)
    assert len(sizes) == s["removed"] and s["present"] - s["removed"] == s["not_removed"]
    assert sum(s["histogram"]["counts"]) == s["removed"]
    if sizes:
        assert abs(s["median"] - quant(sizes, 0.5)) < 1e-9 and abs(s["q1"] - quant(sizes, 0.25)) < 1e-9
        assert abs(s["q3"] - quant(sizes, 0.75)) < 1e-9 and s["max"] == sizes[-1] and s["min"] == sizes[0]
    for f in s["facts"]:
        if f["size"] < 1:
            assert f["size"] == -1 and f["units"] == []
            continue
        assert len(f["units"]) == f["size"] == len(f["attribution"]) and f["size"] <= f["greedy"] <= f["candidates"]
        for l, i in f["units"]:
            assert (l == s["layer"] or s["layer"] == -1) and 0 <= l < L and 0 <= i < F, (l, i)
        assert all(a > 0 for a in f["attribution"])
        assert 0 <= f["flips"] <= f["others"] == d["present"] - 1
        assert f["p_clean"] >= 0.01 > f["p_after"], f
print("distributed ok: present %d, sizes %s" % (d["present"], [s["median"] for s in d["scopes"]]))
PY
# a model that knows nothing would make the checks above vacuous
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["present"] >= 2, d["present"]; assert any(s["removed"] for s in d["scopes"])' "$tmp/d.json"

"$FFN" trace "$tmp/m" --distributed --n-facts 6 --layer 1 --threshold 0.01 --no-side --json --threads 1 > "$tmp/t.json"
"$py" - "$tmp/t.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert [s["scope"] for s in d["scopes"]] == ["layer 1"] and d["criterion"] == "p_below_threshold"
for f in d["scopes"][0]["facts"]:
    assert f["p_clean"] >= 0.01
    if f["size"] > 0:
        assert f["p_after"] < 0.01 and "flips" not in f, f
PY
"$FFN" trace "$tmp/m" --distributed --n-facts 4 --threads 1 > "$tmp/d.txt" 2> "$tmp/d.err"
grep -q "^all layers" "$tmp/d.txt"
awk 'length > 80 { print "line too long: " $0; exit 1 }' "$tmp/d.txt"

# features of a transcoder of layer 0
"$FFN" transcoder train "$tmp/m" --layer 0 --features 96 --k 4 --steps 20 --batch-size 4 --seq-len 32 --threads 1 \
    --out "$tmp/tc0.st" > /dev/null 2>&1
"$FFN" trace "$tmp/m" --distributed --n-facts 6 --threshold 0.01 --transcoder "$tmp/tc0.st" --no-side --json --threads 1 > "$tmp/f.json"
"$py" -c 'import json,sys; d=json.load(open(sys.argv[1])); n=[s["scope"] for s in d["scopes"]]; assert n == ["layer 0", "features 0"], n; assert d["scopes"][1]["units"] == 96 and d["scopes"][1]["kind"] == "transcoder"' "$tmp/f.json"

fails() { # expected message, then the command
    local want="$1"; shift
    if "$@" > "$tmp/out" 2> "$tmp/err"; then echo "should have failed: $*"; exit 1; fi
    grep -q -- "$want" "$tmp/err" || { echo "expected '$want' in:"; cat "$tmp/err"; exit 1; }
    [[ ! -s "$tmp/out" ]] || { echo "stdout not empty: $*"; exit 1; }
}
fails "layer 5: out of range (the model has 2 layers: 0..1)" "$FFN" trace "$tmp/m" --distributed --layer 5
printf 'not json\n' > "$tmp/bad.jsonl"
fails "bad.jsonl" "$FFN" trace "$tmp/m" --distributed --facts-file "$tmp/bad.jsonl"
fails "a transcoder of layer 0, but --layer is 1" "$FFN" trace "$tmp/m" --distributed --layer 1 --transcoder "$tmp/tc0.st"
fails "need --distributed" "$FFN" trace "$tmp/m" --facts --layer 1
fails "give one" "$FFN" trace "$tmp/m" --distributed --recall
fails "svg" "$FFN" trace "$tmp/m" --distributed --svg "$tmp/x.svg"
echo "test_fact_dist ok"
