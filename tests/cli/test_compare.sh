#!/usr/bin/env bash
# test_compare.sh -- `ffn compare` and `ffn demo` from the command line, on
# tiny models (D 16, one layer, T 16) so the whole file takes seconds:
#   - --help of both (exit 0, the flags and variants they document);
#   - compare --json: one object per variant with the documented fields;
#     equal-parameter rules (swiglu total = gelu total within 1%, moe active
#     = swiglu active within 2% and its total larger, none smallest); the
#     std over 2 seeds is >= 0 everywhere and > 0 somewhere; compare.json
#     equals the printed JSON; val_loss.svg is well-formed XML with one
#     polyline per variant and each variant named; a checkpoint per
#     (variant, seed);
#   - the text table names every variant;
#   - demo (tiny): the table, the per-row explanations, generated sentences,
#     and its output directory;
#   - bad usage exits 2 (unknown or duplicate variant, top-k > experts,
#     an empty list, an unknown option); failures exit 1 (a missing --data,
#     an --out under a regular file), each with a message naming the culprit.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE PATTERN cmd... : exit code CODE and stderr matching PATTERN
expect() {
    local code=$1 pat=$2; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [[ $rc -eq $code ]] || { cat "$tmp/err"; fail "$* : exit $rc, expected $code"; }
    grep -qE -- "$pat" "$tmp/err" || { cat "$tmp/err"; fail "$* : stderr does not match '$pat'"; }
    echo "ok ($code) $(head -1 "$tmp/err" | head -c 160)"
}

tiny=(--hidden-size 16 --num-hidden-layers 1 --seq-len 16 --batch-size 2 --sentences 300
      --threads 2)

# ---- help ----
"$FFN_BIN" compare --help >"$tmp/help"
grep -q "usage: ffn compare" "$tmp/help" || fail "compare --help: no usage line"
for w in --data --variants --steps --seeds --seed --out --json --threads --hidden-size \
         --num-experts --num-experts-per-tok swiglu geglu reglu bilinear moe none linear; do
    grep -q -- "$w" "$tmp/help" || fail "compare --help does not mention $w"
done
"$FFN_BIN" demo --help >"$tmp/help"
grep -q "usage: ffn demo" "$tmp/help" || fail "demo --help: no usage line"
for w in --out --steps --lang --threads --json none linear gelu swiglu moe; do
    grep -q -- "$w" "$tmp/help" || fail "demo --help does not mention $w"
done
echo "ok help"

# ---- a tiny comparison, JSON ----
variants=none,linear,gelu,swiglu,moe
"$FFN_BIN" compare --variants "$variants" --steps 6 --seeds 2 "${tiny[@]}" \
    --out "$tmp/cmp" --json >"$tmp/cmp.json" 2>"$tmp/cmp.err" ||
    { cat "$tmp/cmp.err"; fail "compare --json failed"; }
$PY - "$tmp/cmp.json" "$tmp/cmp" "$variants" 2 <<'PYEOF' || fail "compare JSON / SVG / checkpoints"
import json, math, os, sys
import xml.etree.ElementTree as ET

path, out, variants, seeds = sys.argv[1], sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
bad = []
def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        bad.append(what)

doc = json.load(open(path))
rows = doc["variants"] if isinstance(doc, dict) else doc
check(isinstance(rows, list), "the JSON holds a list of variants")
by = {r.get("variant"): r for r in rows}
check([r.get("variant") for r in rows] == variants,
      f"one object per variant in order: {[r.get('variant') for r in rows]}")
fields = ("variant", "total_params", "active_params", "val_loss_mean", "val_loss_std", "tokens_per_s")
for r in rows:
    missing = [f for f in fields if f not in r]
    check(not missing, f"{r.get('variant')}: has {', '.join(fields)} (missing {missing})")
    check(isinstance(r.get("total_params"), int) and r["total_params"] > 0
          and isinstance(r.get("active_params"), int) and 0 < r["active_params"] <= r["total_params"],
          f"{r.get('variant')}: 0 < active {r.get('active_params')} <= total {r.get('total_params')}")
    v, s = r.get("val_loss_mean"), r.get("val_loss_std")
    check(isinstance(v, (int, float)) and 0 < v < 20, f"{r.get('variant')}: val_loss_mean {v} finite, positive")
    check(isinstance(s, (int, float)) and s >= 0, f"{r.get('variant')}: val_loss_std {s} >= 0")
    check(isinstance(r.get("tokens_per_s"), (int, float)) and r["tokens_per_s"] > 0,
          f"{r.get('variant')}: tokens_per_s {r.get('tokens_per_s')} > 0")
    if "runs" in r:
        check(r["runs"] == seeds, f"{r['variant']}: runs {r['runs']} == seeds {seeds}")
check(any(r.get("val_loss_std", 0) > 0 for r in rows), "std > 0 for some variant with 2 seeds")

g, sw, moe, none, lin = by["gelu"], by["swiglu"], by["moe"], by["none"], by["linear"]
rel = lambda a, b: abs(a - b) / b
check(rel(sw["total_params"], g["total_params"]) <= 0.01,
      f"swiglu total {sw['total_params']} = gelu total {g['total_params']} within 1%")
check(lin["total_params"] == g["total_params"], f"linear total {lin['total_params']} = gelu total")
check(rel(moe["active_params"], sw["active_params"]) <= 0.02,
      f"moe active {moe['active_params']} = swiglu active {sw['active_params']} within 2%")
check(moe["total_params"] > moe["active_params"],
      f"moe total {moe['total_params']} > active {moe['active_params']}")
for r in rows:
    if r is not none:
        check(none["total_params"] < r["total_params"],
              f"none {none['total_params']} has fewer parameters than {r['variant']} {r['total_params']}")
        check(r["active_params"] == r["total_params"] or r is moe, f"{r['variant']}: dense, active = total")

# compare.json is the same table
cj = json.load(open(os.path.join(out, "compare.json")))
crow = cj["variants"] if isinstance(cj, dict) else cj
check([(r["variant"], r["total_params"], r["val_loss_mean"]) for r in crow] ==
      [(r["variant"], r["total_params"], r["val_loss_mean"]) for r in rows],
      "DIR/compare.json parses and holds the printed table")

# the SVG: well-formed, one polyline per variant, each variant named
svg = os.path.join(out, "val_loss.svg")
root = ET.parse(svg).getroot()
check(root.tag.endswith("svg"), "val_loss.svg: the root element is <svg>")
lines = [e for e in root.iter() if e.tag.split("}")[-1] == "polyline"]
check(len(lines) == len(variants), f"val_loss.svg: {len(lines)} polylines for {len(variants)} variants")
for e in lines:
    pts = e.get("points", "").split()
    check(len(pts) >= 2 and all(len(p.split(",")) == 2 for p in pts),
          f"a polyline of {len(pts)} x,y points")
text = " ".join("".join(e.itertext()) for e in root.iter() if e.tag.split("}")[-1] == "text")
for v in variants:
    check(v in text, f"val_loss.svg names {v}")
check("validation loss" in text, "val_loss.svg: the y axis is labelled")
yt = [float(e.text) for e in root.iter() if e.tag.split("}")[-1] == "text" and e.get("text-anchor") == "end"]
gaps = [b - a for a, b in zip(yt, yt[1:])]
step = gaps[0] if gaps else 0
mant = step / 10 ** math.floor(math.log10(step)) if step > 0 else 0
check(len(yt) >= 3 and all(abs(g - step) < 1e-9 + 1e-6 * step for g in gaps) and
      any(abs(mant - m) < 1e-6 for m in (1, 2, 5)) and all(abs(t / step - round(t / step)) < 1e-6 for t in yt),
      f"val_loss.svg: round y ticks {yt}")

# a checkpoint per run
for v in variants:
    for k in range(1, seeds + 1):
        d = os.path.join(out, f"{v}-seed{k}")
        for f in ("config.json", "model.safetensors", "tokenizer.txt"):
            check(os.path.isfile(os.path.join(d, f)), f"{v}-seed{k}/{f} exists")
        cfg = json.load(open(os.path.join(d, "config.json")))
        check(cfg.get("hidden_size") == 16, f"{v}-seed{k}/config.json: hidden_size 16")
print(f"{len(bad)} failed")
sys.exit(1 if bad else 0)
PYEOF
echo "ok compare --json"

# ---- the text table ----
"$FFN_BIN" compare --variants none,geglu --steps 2 --seeds 1 "${tiny[@]}" --out "$tmp/cmp2" \
    >"$tmp/table" 2>"$tmp/table.err" || { cat "$tmp/table.err"; fail "compare (table) failed"; }
for v in none geglu; do
    grep -qE "^ *$v[[:space:]]" "$tmp/table" || { cat "$tmp/table"; fail "the table has no row for $v"; }
done
[[ -f "$tmp/cmp2/val_loss.svg" && -d "$tmp/cmp2/geglu-seed1" ]] || fail "compare (table): outputs missing"
echo "ok compare table"

# ---- a tiny demo (model flags beyond --help are the shared experiment flags) ----
"$FFN_BIN" demo --steps 4 "${tiny[@]}" --out "$tmp/demo" >"$tmp/demo.out" 2>"$tmp/demo.err" ||
    { cat "$tmp/demo.err"; fail "demo failed"; }
for v in none linear gelu swiglu moe; do
    grep -qE "^ *$v[[:space:]]" "$tmp/demo.out" || { cat "$tmp/demo.out"; fail "demo: no row for $v"; }
    [[ -f "$tmp/demo/$v-seed1/model.safetensors" ]] || fail "demo: no checkpoint for $v"
done
grep -q "sentences from the best model" "$tmp/demo.out" || fail "demo: no generated sentences"
grep -q "$tmp/demo" "$tmp/demo.out" "$tmp/demo.err" || fail "demo does not name its output directory"
$PY -c 'import sys, xml.etree.ElementTree as E, json; E.parse(sys.argv[1]); json.load(open(sys.argv[2]))' \
    "$tmp/demo/val_loss.svg" "$tmp/demo/compare.json" || fail "demo: SVG or compare.json malformed"
echo "ok demo"

# ---- bad usage (2) and failures (1) ----
small=(--steps 2 --seeds 1 "${tiny[@]}")
expect 2 "bogus" "$FFN_BIN" compare --variants none,bogus "${small[@]}" --out "$tmp/x1"
[[ ! -e "$tmp/x1" ]] || fail "an unknown variant still created the output directory"
expect 2 "gelu" "$FFN_BIN" compare --variants gelu,swiglu,gelu "${small[@]}" --out "$tmp/x2"
expect 2 "num-experts" "$FFN_BIN" compare --variants moe --num-experts 2 --num-experts-per-tok 3 \
    "${small[@]}" --out "$tmp/x3"
expect 2 "variants" "$FFN_BIN" compare --variants "" "${small[@]}" --out "$tmp/x4"
expect 2 "--bogus" "$FFN_BIN" compare --bogus
expect 2 "--bogus" "$FFN_BIN" demo --bogus
expect 2 "steps" "$FFN_BIN" demo --steps 0
expect 1 "$tmp/missing.txt" "$FFN_BIN" compare --variants gelu --data "$tmp/missing.txt" \
    "${small[@]}" --out "$tmp/x5"
touch "$tmp/regular"
expect 1 "$tmp/regular" "$FFN_BIN" compare --variants gelu "${small[@]}" --out "$tmp/regular/sub"
[[ -f "$tmp/regular" && ! -s "$tmp/regular" ]] || fail "the regular file under --out was changed"
echo "all compare/demo CLI checks passed"
