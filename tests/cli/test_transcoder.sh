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
#   2b. SIGINT during train: exit 130, the state saved, nothing at --out;
#      --resume to 7 steps past it gives the file (and state) of one run;
#   3. --force: an existing --out is refused without it, replaced with it;
#      --resume with other flags (another k) is refused naming both;
#   4. --kind sae and --skip; eval of both files: one row each, --json;
#   5. inspect --feature: contexts by decreasing activation, the promoted
#      and suppressed tokens; a feature out of range is a usage error;
#      `ffn inspect MODEL --transcoder FILE` prints the same JSON;
#   5b. ffn report --transcoder (two files): the feature section's data,
#      every token's features by decreasing activation, 6 promoted tokens
#      by decreasing logit, the ones ffn transcoder inspect names; each
#      file's held-out figures equal ffn transcoder eval --json's;
#   6. purity --facts: neurons, the transcoder and the SAE in one JSON
#      table: purity within [0, 1] and at least chance's floor minus 0.2,
#      readout sizes 1, 2, 4, ... and units_needed one of them (or -1);
#      a file of another layer is refused naming both layers;
#   6b. ffn report --purity (that JSON) --edit-compare (ffn edit --compare
#      --json of 1 and 3 edits): the page's data carries every figure of
#      both files (units, purity, chance, units needed, best readout;
#      before/rome/ft/memit scores, held-out change), ordered by N; a file
#      of the wrong kind is exit 1 naming it, and no page is written;
#   6c. --profile: the dense products' FLOPs exactly 2 n D (Fp + D) per
#      forward (one more on the first step) + 2 n D D per skip gradient,
#      their seconds within the step's, the share of the FMA peak
#      consistent; the text line on stderr;
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

# 2b. Ctrl-C: the state saved, exit 130, --resume = uninterrupted (the run is stopped at
# whatever step the signal finds; its state is first written after step 5, so the
# handler is in place when the signal is sent)
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 1000000 --save-every 5 \
    --out "$tmp/c.st" --json > "$tmp/int.json" 2> "$tmp/int.err" &
pid=$!
for _ in $(seq 600); do [[ -s "$tmp/c.st.state" ]] && break; sleep 0.1; done
[[ -s "$tmp/c.st.state" ]] || { kill "$pid"; fail "no state after 60 s"; }
kill -INT "$pid"
set +e
wait "$pid"
rc=$?
set -e
[[ $rc == 130 ]] || { cat "$tmp/int.err"; fail "SIGINT: exit $rc, expected 130"; }
grep -q "interrupted at step [0-9]* of 1000000: the training state is in .*c.st.state" \
    "$tmp/int.err" || { cat "$tmp/int.err"; fail "SIGINT message"; }
[[ -e "$tmp/c.st" ]] && fail "an interrupted run wrote --out"
at=$(/usr/bin/python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["interrupted"] is True; print(r["steps"])' "$tmp/int.json")
echo "interrupted at step $at"
(( at >= 5 )) || fail "interrupted at step $at, before the first save"
end=$((at + 7))
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps "$end" --out "$tmp/c.st" \
    --resume > /dev/null || fail "--resume after SIGINT"
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps "$end" --out "$tmp/d.st" \
    > /dev/null || fail "$end steps in one run"
cmp "$tmp/c.st" "$tmp/d.st" || fail "interrupted at $at and resumed to $end differs from $end in one run"
cmp "$tmp/c.st.state" "$tmp/d.st.state" || fail "the states after $end steps differ"

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
"$FFN_BIN" inspect "$tmp/m" --transcoder "$tmp/tc.st" --feature 5 --top 4 --promoted 3 --json \
    > "$tmp/ins2.json" || fail "ffn inspect --transcoder"
cmp "$tmp/ins.json" "$tmp/ins2.json" || fail "ffn inspect --transcoder differs from ffn transcoder inspect"
"$FFN_BIN" inspect --help > "$tmp/ihelp.txt" || fail "ffn inspect --help"
grep -q -- "--transcoder FILE --feature I" "$tmp/ihelp.txt" || fail "ffn inspect --help: --transcoder"
/usr/bin/python3 - "$tmp/ins.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
acts = [c["activation"] for c in r["contexts"]]
assert acts == sorted(acts, reverse=True) and all(a > 0 for a in acts), acts
assert len(r["promoted"]) == 3 and len(r["suppressed"]) == 3, r
assert r["promoted"][0]["logit"] >= r["promoted"][-1]["logit"] > r["suppressed"][0]["logit"], r
PY

# 5b. the report's feature section
"$FFN_BIN" report "$tmp/m" --transcoder "$tmp/tc.st" --transcoder "$tmp/sae.st" \
    --prompt "Mira lives in Osk." --out "$tmp/r.html" > /dev/null 2> "$tmp/err" ||
    { cat "$tmp/err"; fail "report --transcoder"; }
/usr/bin/python3 - "$tmp/r.html" <<'PY'
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r'<script type="application/json" id="ffn-data">\n(.*?)\n</script>', html, re.S).group(1))
f = d["features"]["files"]
assert [(x["file"], x["kind"], x["layer"], x["features"], x["k"]) for x in f] == \
    [("tc.st", "transcoder", 1, 128, 8), ("sae.st", "sae", 1, 128, 8)], f
for x in f:
    assert "".join(t["piece"] for t in x["tokens"]).replace(" ", "") == "MiralivesinOsk.", x["tokens"]
    assert sum(len(t["features"]) for t in x["tokens"]) > 0
    for t in x["tokens"]:
        acts = [q["activation"] for q in t["features"]]
        assert len(acts) <= 5 and acts == sorted(acts, reverse=True) and all(a > 0 for a in acts), t
        for q in t["features"]:
            assert 0 <= q["feature"] < 128 and len(q["promoted"]) == 6, q
            lg = [p["logit"] for p in q["promoted"]]
            assert lg == sorted(lg, reverse=True), q
assert 'id="features"' in html and "features.js" in html or "DATA.features" in html
assert d["messages"]["report.features_title"].startswith("Features, not neurons")
PY
# the report's held-out figures are ffn transcoder eval's (its default 20 windows)
"$FFN_BIN" transcoder eval "$tmp/m" "$tmp/tc.st" "$tmp/sae.st" --json > "$tmp/eval20.json" ||
    fail "eval (default windows)"
/usr/bin/python3 - "$tmp/r.html" "$tmp/eval20.json" <<'PY'
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r'<script type="application/json" id="ffn-data">\n(.*?)\n</script>', html, re.S).group(1))
ev = json.load(open(sys.argv[2]))["files"]
for x, w in zip(d["features"]["files"], ev):
    assert x["file"] == w["file"].split("/")[-1] and x["eval"] == w["heldout"], (x, w["file"], w["heldout"])
assert "features_eval_lead" in json.dumps(d["messages"])
PY
# a feature of the report promotes what ffn transcoder inspect says it does
j=$(/usr/bin/python3 -c '
import json, re, sys
h = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r"<script type=\"application/json\" id=\"ffn-data\">\n(.*?)\n</script>", h, re.S).group(1))
t = [t for t in d["features"]["files"][0]["tokens"] if t["features"]][0]
print(t["features"][0]["feature"], " ".join(str(p["id"]) for p in t["features"][0]["promoted"]))' "$tmp/r.html")
"$FFN_BIN" transcoder inspect "$tmp/m" "$tmp/tc.st" --feature "${j%% *}" --promoted 6 --top 1 --json \
    > "$tmp/fj.json" || fail "inspect of the report's feature"
got=$(/usr/bin/python3 -c 'import json,sys; print(" ".join(str(p["token"]) for p in json.load(open(sys.argv[1]))["promoted"]))' "$tmp/fj.json")
[[ "$got" == "${j#* }" ]] || fail "the report's feature ${j%% *} promotes ${j#* }, inspect says $got"

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

# 6b. the report's measured tables: --purity (the JSON above) and --edit-compare
# (ffn edit --compare --json of batches of 1 and 3 edits on this model's facts)
printf '{"fact": 0, "target": "Varn"}\n' > "$tmp/b1.jsonl"
printf '{"fact": 0, "target": "Varn"}\n{"fact": 2, "target": "Telo"}\n{"fact": 5, "target": "pilot"}\n' \
    > "$tmp/b3.jsonl"
for n in 1 3; do
    "$FFN_BIN" edit "$tmp/m" --facts "$tmp/facts.jsonl" --batch "$tmp/b$n.jsonl" --compare \
        --layers 0-1 --layer 1 --json > "$tmp/ec$n.json" || fail "edit --compare ($n edits)"
done
"$FFN_BIN" report "$tmp/m" --purity "$tmp/pur.json" --edit-compare "$tmp/ec3.json" \
    --edit-compare "$tmp/ec1.json" --out "$tmp/rm.html" > /dev/null 2> "$tmp/err" ||
    { cat "$tmp/err"; fail "report --purity --edit-compare"; }
/usr/bin/python3 - "$tmp/rm.html" "$tmp/pur.json" "$tmp/ec3.json" "$tmp/ec1.json" <<'PY'
import json, re, sys
html = open(sys.argv[1], encoding="utf-8").read()
d = json.loads(re.search(r'<script type="application/json" id="ffn-data">\n(.*?)\n</script>', html, re.S).group(1))
pur, ecs = json.load(open(sys.argv[2])), [json.load(open(f)) for f in sys.argv[3:]]
close = lambda a, b: (a is None and b is None) or abs(a - b) <= 1e-6 * max(1, abs(b))
(p,) = d["purity"]
assert p["layer"] == 1 and p["samples"] == pur["samples"] and p["top"] == pur["top"], p
assert [u["name"] for u in p["units"]] == [u["name"] for u in pur["units"]], p
for u, w in zip(p["units"], pur["units"]):
    assert u["kind"] == w["kind"] and u["count"] == w["count"], (u, w)
    for a in ("relation", "object"):
        for k in ("purity", "chance", "scored", "units_needed"):
            assert close(u[a][k], w[a][k]), (u["name"], a, k, u[a][k], w[a][k])
        assert close(u[a]["best"], max(q["accuracy"] for q in w[a]["readout"])), (u[a], w[a])
        assert u[a]["largest"] == w[a]["readout"][-1]["units"], (u[a], w[a])
assert [e["n_edits"] for e in d["edit_compare"]] == [3, 1], d["edit_compare"]
for e, w in zip(d["edit_compare"], ecs):
    assert e["rome_layer"] == 1 and e["layers"] == [0, 1], e
    assert [m["method"] for m in e["methods"]] == ["rome", "ft", "memit"], e
    for k in ("efficacy", "generalisation", "specificity", "heldout_loss"):
        assert close(e["before"][k], w["before"][k]), (k, e["before"], w["before"])
        for m, wm in zip(e["methods"], w["methods"]):
            assert close(m["scores"][k], wm["scores"][k]), (m["method"], k, m, wm)
    for m, wm in zip(e["methods"], w["methods"]):
        assert close(m["heldout_change"], wm["heldout_change"]), (m, wm)
assert 'id="purity"' in html and 'id="editcmp"' in html and "DATA.edit_compare" in html
assert d["messages"]["report.purity_title"].startswith("Neurons vs features")
PY
"$FFN_BIN" report --help | grep -q -- "--edit-compare FILE" || fail "report --help: --edit-compare"
set +e
"$FFN_BIN" report "$tmp/m" --purity "$tmp/ec1.json" --out "$tmp/bad.html" > /dev/null 2> "$tmp/err"
st=$?
set -e
[[ $st == 1 ]] && grep -q "ec1.json: not the JSON that ffn transcoder purity --json writes" "$tmp/err" ||
    { cat "$tmp/err"; fail "report --purity of an edit JSON: exit $st"; }
[[ -e "$tmp/bad.html" ]] && fail "report wrote a page after a bad --purity file"

# 6c. --profile: the dense products counted exactly (n rows of D a step, Fp
# features: 2 n D Fp a forward; the first step of a new layer runs the
# encoder twice, to scale it; --skip adds 2 n D D forward and 2 n D D for
# its gradient), their time inside the step's, the FMA peak measured
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 3 --skip --profile --json \
    --out "$tmp/prof.st" > "$tmp/prof.json" 2> "$tmp/err" || { cat "$tmp/err"; fail "--profile"; }
"$FFN_BIN" transcoder train "$tmp/m" --layer 1 "${T[@]}" --steps 3 --skip --profile --force \
    --out "$tmp/prof.st" > /dev/null 2> "$tmp/err" || { cat "$tmp/err"; fail "--profile (table)"; }
grep -q "dense products (the encoder's x W_enc^T, the skip's .*GFLOP/s.*of the step time" "$tmp/err" ||
    { cat "$tmp/err"; fail "--profile: no products line on stderr"; }
/usr/bin/python3 - "$tmp/prof.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
p, n, D, Fp, S = r["profile"], 4 * 32, 32, 128, 3
want = 2 * n * D * (Fp + D) * (S + 1) + 2 * n * D * D * S
assert p["product_flops"] == want, (p, want)
assert 0 < p["product_seconds"] and 0 < p["product_share_of_step"] <= 1, p
assert abs(p["product_gflops"] - want / p["product_seconds"] * 1e-9) <= 0.01 * p["product_gflops"] + 0.01, p
if p["fma_peak_gflops"] is not None:
    assert p["fma_peak_gflops"] > 0 and abs(p["product_pct_peak"] - 100 * p["product_gflops"] / p["fma_peak_gflops"]) < 0.2, p
PY

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
bad 2 "the transcoder given twice" inspect "$tmp/m" "$tmp/tc.st" --transcoder "$tmp/tc.st" --feature 1
bad 2 "a transcoder file is required" inspect "$tmp/m" --feature 1
bad 1 "a transcoder of layer 0 (width 32); --layer is 1" purity "$tmp/m" --layer 1 --facts "$tmp/facts.jsonl" --file "$tmp/l0.st"
[[ -e "$tmp/x.st" ]] && fail "a refused run left --out"
echo "test_transcoder: ok"
