#!/usr/bin/env bash
# rome_table.sh -- the measured answer to the lesson's warning: ROME and the
# fine-tuning baseline at every layer of a model trained on the facts
# corpus, over 40 edits (facts 0..39, each given another object of its
# relation, drawn with a fixed seed), each edit alone from the same weights.
#
#   scripts/rome_table.sh [MODEL]     (default: trains build/rome-facts, ~3 min)
#
# Prints three tables (docs: README "Does the FFN store facts?"):
#   1. the defaults (v* fitted through the update), ROME and FT;
#   2. ROME with ROME's own fit (--fit subject);
#   3. ROME with delta unconstrained (no decay, no clamp, 100 steps).
# Each sweep takes 1 to 3 minutes on 2 threads.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
model="${1:-build/rome-facts}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ ! -d "$model" ]]; then
    echo "training $model (ffn train --corpus facts --tokenizer word --steps 1000)" >&2
    "$FFN" train --corpus facts --tokenizer word --steps 1000 --threads 2 --out "$model" >&2
fi
"$FFN" corpus --facts --json >"$work/facts.jsonl"
/usr/bin/python3 - "$work/facts.jsonl" "$work/batch.jsonl" <<'EOF'
import json, random, sys
facts = [json.loads(l) for l in open(sys.argv[1])]
rng = random.Random(5)
objects = {}
for f in facts:
    objects.setdefault(f["relation"], set()).add(f["object"])
with open(sys.argv[2], "w") as out:
    for f in facts[:40]:
        target = rng.choice(sorted(objects[f["relation"]] - {f["object"]}))
        out.write(json.dumps({"fact": f["id"], "target": target}) + "\n")
EOF
sweep() {
    echo "== $*"
    "$FFN" edit "$model" --facts "$work/facts.jsonl" --batch "$work/batch.jsonl" --sweep-layers \
        --threads 2 --cache "$work" "$@"
}
sweep
sweep --method rome --fit subject
sweep --method rome --steps 100 --delta-decay 0 --clamp-norm 1000
