#!/usr/bin/env bash
# test_transcoder.sh -- `ffn transcoder` on a small word-level model trained
# here on facts sentences (2 layers, D 32):
#   1. train --json: the fields, a held-out FVU below 0.5 and below the
#      first curve point's, L0 <= k, the loss with mlp_out replaced
#      between the original and the zeroed one's neighbourhood (finite),
#      loss recovered > 0; the file's config (metadata) names the kind,
#      layer, features, k; OUT.state is written; --curve is a TSV; nothing
#      on stderr (no terminal: no progress);
#   2. resume: 12 steps, then --resume to 24, gives the file an
#      uninterrupted 24-step run gives, byte for byte;
#   3. --force: an existing --out is refused without it, replaced with it;
#      --resume with other flags (another k) is refused naming both;
#   4. --kind sae and --skip; eval of both files: one row each, --json;
#   5. inspect --feature: contexts by decreasing activation, the promoted
#      and suppressed tokens; a feature out of range is a usage error;
#   6. purity --facts: neurons, the transcoder and the SAE in one JSON
#      table: purity within [0, 1] and at least chance's floor minus 0.2,
#      readout sizes 1, 2, 4, ... and units_needed one of them (or -1);
#      a file of another layer is refused naming both layers;
#   7. bad input: --layer out of range, --skip with --kind sae, no --out,
#      a safetensors file that is not a transcoder: clear messages, exit
#      status 2 (usage) or 1 (failure).
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export FFN_NUM_THREADS=2

/usr/bin/python3 - "$tmp/text.txt" <<'PY'
import random, sys
names = ["Mira", "Tomas", "Lena", "Oskar", "Ines", "Pavel", "Rosa", "Kenji"]
cities = ["Osk", "Varn", "Telo", "Brisk", "Quell", "Dorn", "Amber", "Selk"]
jobs = ["baker", "pilot", "doctor", "farmer"]
rng = random.Random(3)
lines = []
for rep in range(30):
    for i, n in enumerate(names):
        lines += [n + " lives in " + cities[i] + ".", n + " works as a " + jobs[i % 4] + ".",
                  "The home of " + n + " is " + cities[i] + "."]
rng.shuffle(lines)
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
PY
train_bin="$FFN_BIN"
[[ -x "${FFN_ROOT:-.}/build/ffn" ]] && train_bin="${FFN_ROOT:-.}/build/ffn"
"$train_bin" train --data "$tmp/text.txt" --tokenizer word --hidden-size 32 --intermediate-size 64 \
    --num-hidden-layers 2 --num-attention-heads 2 --num-key-value-heads 2 --seq-len 32 \
    --batch-size 8 --steps 150 --lr 5e-3 --eval-every 0 --out "$tmp/m" > "$tmp/train.log" 2>&1 ||
    { cat "$tmp/train.log"; fail "training the model"; }
T=(--features 128 --k 8 --batch-size 4 --seq-len 32 --eval-windows 4 --log-every 5)

# 1. train
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 60 --lr 3e-3 --out "$tmp/tc.st" \
    --curve "$tmp/curve.tsv" --json > "$tmp/tc.json" 2> "$tmp/err" ||
    { cat "$tmp/err"; fail "transcoder train"; }
[[ -s "$tmp/err" ]] && { cat "$tmp/err"; fail "stderr not empty without a terminal"; }
[[ -s "$tmp/tc.st.state" ]] || fail "no OUT.state"
/usr/bin/python3 - "$tmp/tc.json" "$tmp/tc.st" "$tmp/curve.tsv" <<'PY'
import json, math, struct, sys
r = json.load(open(sys.argv[1]))
h = r["heldout"]
print("transcoder:", json.dumps(h))
assert r["kind"] == "transcoder" and r["layer"] == 1 and r["features"] == 128 and r["k"] == 8, r
assert r["steps"] == 60 and r["rows"] == 60 * 4 * 32, r
assert h["fvu"] < 0.5 and h["fvu"] < r["curve"][0]["fvu"], (h, r["curve"][0])
assert 0 < h["l0"] <= 8 and 0 <= h["dead"] <= 128 and h["rows"] > 0, h
for k in ("loss_original", "loss_replaced", "loss_zero"):
    assert math.isfinite(h[k]), h
assert h["loss_recovered"] > 0, h
assert len(r["curve"]) == 12 and r["curve"][-1]["step"] == 60, r["curve"]
with open(sys.argv[2], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    head = json.loads(f.read(n))
c = json.loads(head["__metadata__"]["ffn_transcoder"])
assert c["format"] == "ffn-transcoder" and c["kind"] == "transcoder" and c["layer"] == 1, c
assert c["features"] == 128 and c["k"] == 8 and c["d_model"] == 32 and c["skip"] is False, c
assert head["decoder.weight"]["shape"] == [128, 32] and "adam.m" not in head, head.keys()
lines = open(sys.argv[3]).read().split("\n")
assert lines[0] == "step\tloss\tfvu\taux\tl0\tdead" and len([l for l in lines[1:] if l]) == 12, lines[:3]
PY

# 2. resume = uninterrupted
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 24 --out "$tmp/a.st" > /dev/null ||
    fail "24 steps"
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 12 --out "$tmp/b.st" > /dev/null ||
    fail "12 steps"
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 24 --out "$tmp/b.st" --resume \
    > "$tmp/resume.txt" || fail "--resume"
grep -q "24 steps" "$tmp/resume.txt" || { cat "$tmp/resume.txt"; fail "resume did not reach 24 steps"; }
cmp "$tmp/a.st" "$tmp/b.st" || fail "12 + 12 resumed steps differ from 24 in one run"

# 3. --force, and --resume with other flags
if "$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 2 --out "$tmp/a.st" \
    > /dev/null 2> "$tmp/err"; then fail "an existing --out was replaced without --force"; fi
grep -q "a.st exists; give --force" "$tmp/err" || { cat "$tmp/err"; fail "--force message"; }
cmp "$tmp/a.st" "$tmp/b.st" || fail "the refused run touched --out"
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 2 --out "$tmp/a.st" --force \
    > /dev/null || fail "--force"
cmp -s "$tmp/a.st" "$tmp/b.st" && fail "--force did not replace --out"
set +e
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 --features 128 --k 4 --steps 30 --out "$tmp/b.st" \
    --resume > /dev/null 2> "$tmp/err"
rc=$?
set -e
[[ $rc == 2 ]] && grep -q "k 8; the flags ask for a transcoder of layer 1, 128 features, k 4" "$tmp/err" ||
    { cat "$tmp/err"; fail "--resume with another k: exit $rc"; }

# 4. an sae, a skip transcoder, eval
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 20 --kind sae --out "$tmp/sae.st" \
    --json > "$tmp/sae.json" || fail "--kind sae"
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 20 --skip --out "$tmp/skip.st" \
    > /dev/null || fail "--skip"
"$FFN_BIN" transcoder eval "$tmp/m" "$tmp/tc.st" "$tmp/sae.st" "$tmp/skip.st" --eval-windows 3 \
    > "$tmp/eval.txt" || fail "eval"
cat "$tmp/eval.txt"
[[ $(grep -c "transcoder \| sae " "$tmp/eval.txt") == 3 ]] || fail "eval: expected 3 rows"
"$FFN_BIN" transcoder eval "$tmp/m" "$tmp/tc.st" "$tmp/sae.st" --eval-windows 3 --json \
    > "$tmp/eval.json" || fail "eval --json"
/usr/bin/python3 - "$tmp/eval.json" "$tmp/sae.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert [f["kind"] for f in r["files"]] == ["transcoder", "sae"], r
s = json.load(open(sys.argv[2]))
assert s["kind"] == "sae" and s["heldout"]["fvu"] < 1, s
PY

# 5. inspect
"$FFN_BIN" transcoder inspect "$tmp/m" "$tmp/tc.st" --feature 5 --top 4 --promoted 3 --json \
    > "$tmp/ins.json" || fail "inspect"
"$FFN_BIN" transcoder inspect "$tmp/m" "$tmp/tc.st" --feature 5 --top 4 > "$tmp/ins.txt" ||
    fail "inspect (table)"
grep -q "promotes" "$tmp/ins.txt" || fail "inspect table"
/usr/bin/python3 - "$tmp/ins.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
acts = [c["activation"] for c in r["contexts"]]
assert acts == sorted(acts, reverse=True) and all(a > 0 for a in acts), acts
assert len(r["promoted"]) == 3 and len(r["suppressed"]) == 3, r
assert r["promoted"][0]["logit"] >= r["promoted"][-1]["logit"] > r["suppressed"][0]["logit"], r
PY

# 6. purity
/usr/bin/python3 - "$tmp/facts.jsonl" <<'PY'
import json, sys
names = ["Mira", "Tomas", "Lena", "Oskar", "Ines", "Pavel", "Rosa", "Kenji"]
cities = ["Osk", "Varn", "Telo", "Brisk", "Quell", "Dorn", "Amber", "Selk"]
jobs = ["baker", "pilot", "doctor", "farmer"]
with open(sys.argv[1], "w") as f:
    i = 0
    for j, n in enumerate(names):
        for rel, prompt, para, obj in (("lives_in", n + " lives in", "The home of " + n + " is", cities[j]),
                                       ("works_as", n + " works as a", n + " works as a", jobs[j % 4])):
            f.write(json.dumps({"id": i, "subject": n, "relation": rel, "prompt": prompt,
                                "object": obj, "paraphrases": [para, para], "neighbours": []}) + "\n")
            i += 1
PY
"$FFN_BIN" transcoder purity "$tmp/m" --layer 1 --facts "$tmp/facts.jsonl" --file "$tmp/tc.st" \
    --file "$tmp/sae.st" --top 4 --json > "$tmp/pur.json" || fail "purity"
"$FFN_BIN" transcoder purity "$tmp/m" --layer 1 --facts "$tmp/facts.jsonl" --file "$tmp/tc.st" \
    --top 4 > "$tmp/pur.txt" || fail "purity (table)"
cat "$tmp/pur.txt"
/usr/bin/python3 - "$tmp/pur.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["samples"] == 48 and r["classes"] == {"relation": 2, "object": 12}, r
assert [u["kind"] for u in r["units"]] == ["neuron", "transcoder", "sae"], r
assert r["units"][0]["count"] == 64 and r["units"][1]["count"] == 128, r
for u in r["units"]:
    for a in ("relation", "object"):
        x = u[a]
        sizes = [q["units"] for q in x["readout"]]
        assert sizes[:3] == [1, 2, 4] and sizes[-1] == u["count"], sizes
        assert x["units_needed"] in sizes + [-1], x
        assert all(0 <= q["accuracy"] <= 1 for q in x["readout"]), x
        if x["scored"]:
            assert x["chance"] - 0.2 <= x["purity"] <= 1, (u["name"], a, x)
PY
"$FFN_BIN" transcoder train "$tmp/m" --layer 0 "${T[@]}" --steps 2 --out "$tmp/l0.st" > /dev/null ||
    fail "layer 0"

# 7. bad input
bad() { # expected status, message, args...
    local want="$1" msg="$2"; shift 2
    set +e
    "$FFN_BIN" transcoder "$@" > /dev/null 2> "$tmp/err"
    local rc=$?
    set -e
    [[ $rc == "$want" ]] || { cat "$tmp/err"; fail "'$*': exit $rc, expected $want"; }
    grep -q -- "$msg" "$tmp/err" || { cat "$tmp/err"; fail "'$*': expected '$msg'"; }
}
bad 2 "layer 5 out of range\|--layer" train "$tmp/m" --layer 5 --out "$tmp/x.st"
bad 2 "\-\-skip is for --kind transcoder" train "$tmp/m" --layer 0 --kind sae --skip --out "$tmp/x.st"
bad 2 "\-\-out FILE is required" train "$tmp/m" --layer 0
bad 1 "not a transcoder" eval "$tmp/m" "$tmp/m/model.safetensors"
bad 2 "\-\-feature 999: the file has 128 features" inspect "$tmp/m" "$tmp/tc.st" --feature 999
bad 2 "expected a subcommand" frobnicate
bad 1 "a transcoder of layer 0 (width 32); --layer is 1" purity "$tmp/m" --layer 1 --facts "$tmp/facts.jsonl" --file "$tmp/l0.st"
[[ -e "$tmp/x.st" ]] && fail "a refused run left --out"
echo "test_transcoder: ok"
