#!/usr/bin/env bash
# deep_facts.sh -- issue 25 item 5: is the facts model deep enough for the
# classic picture of ROME (Meng et al. 2022)?  Trains the facts model with
# more layers (same data: `ffn train --corpus facts`), measures its recall,
# runs causal tracing over the facts it recalls, and edits 40 facts with
# ROME at every layer (each edit alone, from the same weights), so the
# peak layer's efficacy and specificity can be read beside the others.
#
#   bash bench/deep_facts.sh [DIR]        (default build/deep-facts)
#
# Environment (defaults in brackets):
#   DEEP_LAYERS [8]  DEEP_HIDDEN [64]  DEEP_FF [172]  DEEP_STEPS [2000]
#   DEEP_THREADS [2] DEEP_TRACE_FACTS [40]  DEEP_EDITS [40]  FFN_BIN [build/ffn]
# (the default model is 4 layers of D 128, F 344; this one is twice as deep
# and half as wide, so that its training costs about what the default's
# does per step; 2000 steps, as at 1000 it recalls only about half the facts)
# A DIR that already holds a model is not retrained.  Prints what it runs,
# the training time, and at the end one line per question:
#   peak:  the layer and position class of the largest MLP indirect effect,
#          and the peak at the last subject token: ROME's picture when it
#          is in a middle layer (L/4 .. 3L/4, not the first or last) and at
#          least half the largest MLP effect anywhere
#   rome:  efficacy / specificity at that layer (>= 0.9 / >= 0.8?)
# The JSON of each step is kept in DIR/deep-*.json.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
dir="${1:-build/deep-facts}"
L="${DEEP_LAYERS:-8}" D="${DEEP_HIDDEN:-64}" F="${DEEP_FF:-172}" S="${DEEP_STEPS:-2000}"
TH="${DEEP_THREADS:-2}" NT="${DEEP_TRACE_FACTS:-40}" NE="${DEEP_EDITS:-40}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { echo "+ $*" >&2; "$@"; }

if [[ ! -f "$dir/model.safetensors" ]]; then
    t0=$(date +%s)
    run "$FFN" train --corpus facts --tokenizer word --num-hidden-layers "$L" --hidden-size "$D" \
        --intermediate-size "$F" --steps "$S" --threads "$TH" --eval-every 250 --json --out "$dir" \
        >"$work/train.json"
    t1=$(date +%s)
    cp "$work/train.json" "$dir/deep-train.json"
    echo "trained in $((t1 - t0)) s (load average $(cut -d' ' -f1 /proc/loadavg))" >&2
fi
run "$FFN" trace "$dir" --recall --json --threads "$TH" >"$dir/deep-recall.json"
run "$FFN" trace "$dir" --facts --n-facts "$NT" --json --threads "$TH" >"$dir/deep-trace.json"
run "$FFN" corpus --facts --json >"$work/facts.jsonl"
# the edits of scripts/rome_table.sh: facts 0..39 (the first DEEP_EDITS of
# them), each given another object of its relation (fixed seed)
/usr/bin/python3 - "$work/facts.jsonl" "$work/batch.jsonl" "$NE" <<'EOF'
import json, random, sys
facts = [json.loads(l) for l in open(sys.argv[1])]
rng = random.Random(5)
objects = {}
for f in facts:
    objects.setdefault(f["relation"], set()).add(f["object"])
with open(sys.argv[2], "w") as out:
    for i, f in enumerate(facts[:40]):
        if i >= int(sys.argv[3]):
            break
        target = rng.choice(sorted(objects[f["relation"]] - {f["object"]}))
        out.write(json.dumps({"fact": f["id"], "target": target}) + "\n")
EOF
run "$FFN" edit "$dir" --facts "$work/facts.jsonl" --batch "$work/batch.jsonl" --sweep-layers \
    --method rome --threads "$TH" --cache "$work" --json >"$dir/deep-rome.json"
/usr/bin/python3 - "$dir" <<'EOF'
import json, sys
d = sys.argv[1]
rec = json.load(open(d + "/deep-recall.json"))
tr = json.load(open(d + "/deep-trace.json"))
rome = json.load(open(d + "/deep-rome.json"))
print("recall: trained %.3f, paraphrases %.3f" % (rec["trained"]["share"], rec["paraphrases"]["share"]))
print("trace over %d facts (%d recalled, %d averaged): p_clean %.3f, p_corrupt %.3f" %
      (tr["facts"], tr["recalled"], tr["averaged"], tr["p_clean"], tr["p_corrupt"]))
L = len(tr["mlp_out"])
ls = tr["classes"].index("last subject")
print("MLP effect at the last subject token, per layer: " +
      " ".join("%d:%+.3f" % (l, tr["mlp_out"][l][ls]) for l in range(L)))
ps = tr["mlp_peak_last_subject"]["layer"]
print("peak: %s at layer %d (%s); at the last subject token layer %d (%+.3f), at the last token "
      "layer %d (%+.3f); share of the strongest layer %.2f" %
      (("%+.3f" % tr["mlp_peak"]["effect"]), tr["mlp_peak"]["layer"], tr["mlp_peak"]["class"], ps,
       tr["mlp_peak_last_subject"]["effect"], tr["mlp_peak_last"]["layer"],
       tr["mlp_peak_last"]["effect"], tr["mlp_layer_share"]))
mid = 0 < ps < L - 1 and L // 4 <= ps <= (3 * L) // 4
strong = tr["mlp_peak_last_subject"]["effect"] >= 0.5 * tr["mlp_peak"]["effect"] > 0
print("the peak at the last subject token is in a middle layer: %s; it is at least half the largest MLP "
      "effect anywhere: %s; ROME's picture: %s" % ("yes" if mid else "no", "yes" if strong else "no",
                                                  "yes" if mid and strong else "no"))
for r in rome["rows"]:
    s = r["scores"]
    print("rome layer %d: efficacy %.3f generalisation %.3f specificity %.3f d loss %+.4f%s" %
          (r["layer"], s["efficacy"], s["generalisation"], s["specificity"], r["heldout_delta"],
           "   <- trace peak" if r["layer"] == ps else ""))
pk = [r for r in rome["rows"] if r["layer"] == ps][0]["scores"]
print("rome at the peak (layer %d): efficacy %.3f (>= 0.9: %s), specificity %.3f (>= 0.8: %s)" %
      (ps, pk["efficacy"], "yes" if pk["efficacy"] >= 0.9 else "no", pk["specificity"],
       "yes" if pk["specificity"] >= 0.8 else "no"))
EOF
