#!/usr/bin/env bash
# test_facts.sh -- the facts corpus (`ffn corpus --facts`, `ffn train --corpus facts`):
#   - the same seed gives the same bytes, another seed other facts; the
#     first N facts of a larger set have the same subjects, objects, prompts;
#   - --json: one object per line with exactly the fields id, subject,
#     relation, prompt, object, paraphrases, neighbours, of the right types;
#     ids 0..N-1, subjects distinct, capitals distinct, the prompt contains
#     the subject, neighbours are other facts of the same relation;
#   - the training text (--facts --text) states facts and English sentences,
#     never contains a held-out paraphrase, and holds every word of the
#     paraphrases (held out in context, not in vocabulary);
#   - ffn train --corpus facts trains on that text; bad flags are refused.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py=/usr/bin/python3

grep -q "The facts corpus" <<<"$("$FFN" corpus --help)"
"$FFN" corpus --facts --json > "$tmp/a.jsonl"
"$FFN" corpus --facts --json > "$tmp/b.jsonl"
cmp "$tmp/a.jsonl" "$tmp/b.jsonl" || { echo "same seed, different bytes"; exit 1; }
"$FFN" corpus --facts --json --seed 2 > "$tmp/c.jsonl"
! cmp -s "$tmp/a.jsonl" "$tmp/c.jsonl" || { echo "seed 2 gives the same facts"; exit 1; }
"$FFN" corpus --facts --json --n-facts 20 > "$tmp/d.jsonl"
"$FFN" corpus --facts > "$tmp/table.txt"
grep -q "^0	lives_in	" "$tmp/table.txt"

"$py" - "$tmp/a.jsonl" "$tmp/d.jsonl" "$tmp/c.jsonl" <<'PY'
import json, sys
def load(p):
    return [json.loads(l) for l in open(p, encoding="utf-8")]
a, d, c = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
assert len(a) == 100 and len(d) == 20, (len(a), len(d))
fields = ["id", "subject", "relation", "prompt", "object", "paraphrases", "neighbours"]
for i, f in enumerate(a):
    assert list(f.keys()) == fields, f.keys()
    assert f["id"] == i and isinstance(f["id"], int)
    for k in ["subject", "relation", "prompt", "object"]:
        assert isinstance(f[k], str) and f[k], (i, k)
    assert f["subject"] in f["prompt"], f
    assert f["relation"] in ("lives_in", "colour", "capital", "profession")
    assert len(f["paraphrases"]) == 3 and all(isinstance(p, str) and p for p in f["paraphrases"])
    assert f["prompt"] not in f["paraphrases"]
    assert all(f["subject"] in p for p in f["paraphrases"])
    assert 1 <= len(f["neighbours"]) <= 3
    for n in f["neighbours"]:
        assert list(n.keys()) == ["prompt", "object"]
        other = [g for g in a if g["prompt"] == n["prompt"]]
        assert len(other) == 1 and other[0]["id"] != i, n
        assert other[0]["relation"] == f["relation"] and other[0]["object"] == n["object"]
assert len({f["subject"] for f in a}) == 100, "subjects repeat"
caps = [f["object"] for f in a if f["relation"] == "capital"]
assert len(set(caps)) == len(caps), "capitals repeat"
for x, y in zip(a, d):
    assert (x["subject"], x["object"], x["prompt"], x["paraphrases"]) == \
           (y["subject"], y["object"], y["prompt"], y["paraphrases"])
assert [f["subject"] for f in c] != [f["subject"] for f in a]
print("facts json ok")
PY

# ---- the training text --------------------------------------------------------
"$FFN" corpus --facts --text --sentences 4000 > "$tmp/text.txt"
"$FFN" corpus --facts --text --sentences 4000 | cmp - "$tmp/text.txt"
"$py" - "$tmp/a.jsonl" "$tmp/text.txt" <<'PY'
import json, re, sys
facts = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
text = open(sys.argv[2], encoding="utf-8").read()
lines = text.splitlines()
assert len(lines) == 4000
stated = sum(1 for l in lines if any(f["subject"] in l for f in facts[:100]))
assert 1600 < stated < 2400, stated          # about half the lines state a fact
assert "gave" in text or "handed" in text    # and the English corpus is there
trained = sum(1 for f in facts if (f["prompt"] + " " + f["object"]) in text)
assert trained >= 95, trained                # the prompts are trained statements
words = set(re.findall(r"[A-Za-z]+", text))
for f in facts:
    for p in f["paraphrases"]:
        assert p not in text, "held-out paraphrase in the training text: " + p
        missing = set(re.findall(r"[A-Za-z]+", p)) - words
        assert not missing, (p, missing)
print("facts text ok")
PY

# ---- training on it ----------------------------------------------------------------
"$FFN" train --corpus facts --tokenizer word --corpus-sentences 500 --hidden-size 32 \
    --intermediate-size 64 --num-hidden-layers 1 --seq-len 16 --batch-size 2 --steps 2 \
    --eval-batches 1 --threads 1 --quiet --out "$tmp/m" > /dev/null
grep -q "Velm\|ford\|grad" "$tmp/m/tokenizer.txt"

# ---- bad input -------------------------------------------------------------------------
set +e
out=$("$FFN" corpus --facts --n-facts 0 2>&1); rc=$?
[[ $rc == 2 && $out == *"--n-facts"* ]] || { echo "n-facts 0: rc $rc: $out"; exit 1; }
out=$("$FFN" corpus --facts --n-facts 321 2>&1); rc=$?
[[ $rc == 2 ]] || { echo "n-facts 321: rc $rc: $out"; exit 1; }
out=$("$FFN" corpus --text 2>&1); rc=$?
[[ $rc == 2 && $out == *"needs --facts"* ]] || { echo "--text alone: rc $rc: $out"; exit 1; }
out=$("$FFN" corpus --facts --stats 2>&1); rc=$?
[[ $rc == 2 ]] || { echo "--facts --stats: rc $rc: $out"; exit 1; }
out=$("$FFN" train --corpus klingon --out "$tmp/x" 2>&1); rc=$?
[[ $rc == 2 && $out == *"en, zh or facts"* ]] || { echo "--corpus klingon: rc $rc: $out"; exit 1; }
set -e
echo "test_facts: ok"
