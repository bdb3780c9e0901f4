#!/usr/bin/env bash
# test_edit.sh -- `ffn edit` (ROME and the fine-tuning baseline) on a small
# word-level model trained here on a facts file written here (16 people,
# where they live and what they do; paraphrases and neighbours per fact):
#   1. one ROME edit at layer 1: the JSON report, down_proj(k*) = v* to
#      float rounding, log p(new) rises by more than 1 nat on the prompt,
#      specificity stays >= 0.75, held-out loss within 0.05; the output
#      directory is complete and loads (`ffn generate`), differs from the
#      input only in model.layers.1.mlp.down_proj.weight, and the input is
#      untouched (checksums);
#   2. C is cached in $XDG_CACHE_HOME/ffn (named by layer, samples and the
#      weights' hash), never in the working directory or beside the model,
#      and read back on the next run; --cache DIR puts it in DIR;
#   3. --force: an existing --out is refused without it and replaced with
#      it; --out MODEL itself and a directory that is not a model are
#      refused either way;
#   4. --method ft reaches efficacy 1 and costs more held-out loss than ROME;
#      --sweep-layers --json has one row per layer and method; --batch
#      reports after 1, 2 and 3 edits; --prompt/--subject alone report
#      efficacy (generalisation and specificity are null);
#   5. bad input: a subject not in the prompt, a layer out of range, a
#      target the vocabulary lacks, an unknown fact id, a malformed facts
#      file, --fact without --facts: each a clear message and a non-zero exit;
#   6. a Hugging Face directory as MODEL (--data required) gives one as --out;
#   7. v* is fitted through the update (--fit update, the default): with one
#      prompt (--prefixes 1) the edited model's -log p(new) on it equals the
#      fit's last loss; --sweep-layers --batch pools every edit alone, one
#      row per layer of --method, and its single-edit rows are the edits';
#   8. an edit that takes says nothing more; one that does not (--steps 0:
#      v* is the old value) warns "the edit did not take" with p(target)
#      before and after, on stderr, text and --json alike.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
export XDG_CACHE_HOME="$tmp/xdg" # C's cache: never the user's own
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export FFN_NUM_THREADS=2

/usr/bin/python3 - "$tmp/facts.jsonl" "$tmp/text.txt" <<'PY'
import json, random, sys
names = ["Mira", "Tomas", "Lena", "Oskar", "Ines", "Pavel", "Rosa", "Kenji", "Ada", "Bruno",
         "Clara", "Dario", "Elif", "Farid", "Greta", "Hugo"]
cities = ["Osk", "Varn", "Telo", "Brisk", "Quell", "Dorn", "Amber", "Selk", "Lune", "Pira",
          "Cazo", "Mello", "Nuvo", "Rinth", "Tarsa", "Wend"]
jobs = ["baker", "pilot", "doctor", "farmer", "teacher", "sailor", "painter", "miner"]
rng = random.Random(7)
city = dict(zip(names, cities))
job = {n: jobs[rng.randrange(len(jobs))] for n in names}
lines = []
with open(sys.argv[1], "w") as f:
    for i, n in enumerate(names):
        nb = [m for m in names if m != n]
        rng.shuffle(nb)
        f.write(json.dumps({"id": i, "subject": n, "relation": "lives_in",
                            "prompt": n + " lives in", "object": city[n],
                            "paraphrases": [n + " resides in", "The home of " + n + " is"],
                            "neighbours": [{"prompt": m + " lives in", "object": city[m]}
                                           for m in nb[:4]]}) + "\n")
for rep in range(60):
    for n in names:
        lines += [n + " lives in " + city[n] + ".", n + " resides in " + city[n] + ".",
                  "The home of " + n + " is " + city[n] + ".", n + " works as a " + job[n] + ".",
                  n + " is a " + job[n] + "."]
rng.shuffle(lines)
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
PY
# The fixture is trained by the plain build when there is one: the rerun
# under ASan (asan-cli/test_edit) sanitizes `ffn edit`, not the trainer.
train_bin="$FFN_BIN"
[[ -x "${FFN_ROOT:-.}/build/ffn" ]] && train_bin="${FFN_ROOT:-.}/build/ffn"
"$train_bin" train --data "$tmp/text.txt" --tokenizer word --hidden-size 64 --intermediate-size 128 \
    --num-hidden-layers 4 --num-attention-heads 4 --num-key-value-heads 4 --seq-len 32 \
    --batch-size 16 --steps 1000 --lr 5e-3 --eval-every 500 --out "$tmp/m" > "$tmp/train.log" 2>&1 ||
    { cat "$tmp/train.log"; fail "training the facts model"; }
sums() { (cd "$1" && sha256sum -- * | sort); }
sums "$tmp/m" > "$tmp/m.sums"
F=(--facts "$tmp/facts.jsonl")

# 1. one ROME edit
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --out "$tmp/e" --json \
    > "$tmp/rome.json" 2> "$tmp/err" || { cat "$tmp/err"; fail "ffn edit (rome)"; }
/usr/bin/python3 - "$tmp/rome.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
b, a = r["before"], r["after"]
print("rome layer 1:", json.dumps({k: r[k] for k in ("steps", "loss_first", "loss_last", "kl_last",
      "lambda", "max_abs_down_kstar_minus_vstar")}))
print("  before", b)
print("  after ", a)
assert r["method"] == "rome" and r["layer"] == 1 and r["old"] == "Osk", r
assert r["max_abs_down_kstar_minus_vstar"] < 1e-4, r
assert b["efficacy"] == 0.0, b  # the model knows Mira lives in Osk
assert a["logp_new"] > b["logp_new"] + 1.0, (b, a)
assert a["specificity"] >= 0.75, a
assert abs(a["heldout_loss"] - b["heldout_loss"]) < 0.05, (b, a)
assert r["cov_samples"] == 2000 and r["cov_cached"] is False, r
PY
for f in config.json model.safetensors tokenizer.txt; do [[ -s "$tmp/e/$f" ]] || fail "e/$f missing"; done
"$FFN_BIN" generate "$tmp/e" --prompt "Mira lives in" --steps 2 --temperature 0 > "$tmp/gen" 2>&1 ||
    { cat "$tmp/gen"; fail "the edited model does not load"; }
cmp -s "$tmp/m/config.json" "$tmp/e/config.json" || fail "config.json changed"
/usr/bin/python3 - "$tmp/m/model.safetensors" "$tmp/e/model.safetensors" <<'PY'
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("FFN_ROOT", "."), "tests", "parity"))
from ffn_testlib import read_safetensors
import numpy as np
a, b = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2])
assert sorted(a) == sorted(b)
changed = [k for k in a if not np.array_equal(a[k], b[k])]
assert changed == ["model.layers.1.mlp.down_proj.weight"], changed
PY
sums "$tmp/m" | cmp -s - "$tmp/m.sums" || fail "the input model changed"

# 2. the cache of C, in $XDG_CACHE_HOME/ffn
ls "$tmp"/xdg/ffn/ffn-cov-L1-n2000-*.bin > /dev/null 2>&1 || fail "no cache file of C in \$XDG_CACHE_HOME/ffn"
! ls "$tmp"/ffn-cov-* ./ffn-cov-* > /dev/null 2>&1 || fail "a cache file of C beside the model or in the working directory"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --out "$tmp/e" --force \
    --cache "$tmp" --samples 500 > /dev/null 2>&1 || fail "edit --cache DIR"
ls "$tmp"/ffn-cov-L1-n500-*.bin > /dev/null 2>&1 || fail "--cache DIR: no cache file in DIR"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --out "$tmp/e" --force --json \
    > "$tmp/rome2.json"
/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['cov_cached'] is True, r" \
    "$tmp/rome2.json" || fail "C was not read from the cache"

# 3. --force
if "$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --out "$tmp/e" \
    > /dev/null 2> "$tmp/err"; then fail "an existing --out replaced without --force"; fi
grep -q "exists; pass --force" "$tmp/err" || { cat "$tmp/err"; fail "message for an existing --out"; }
if "$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --out "$tmp/m" --force \
    > /dev/null 2> "$tmp/err"; then fail "--out MODEL accepted"; fi
grep -q "the output is the input model itself" "$tmp/err" || { cat "$tmp/err"; fail "--out MODEL message"; }
mkdir "$tmp/notes" && echo hi > "$tmp/notes/mine.txt"
if "$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --out "$tmp/notes" --force \
    > /dev/null 2> "$tmp/err"; then fail "a user's directory replaced"; fi
[[ -f "$tmp/notes/mine.txt" ]] || fail "a user's file was removed"
sums "$tmp/m" | cmp -s - "$tmp/m.sums" || fail "the input model changed"

# 4. the baseline, the sweep, a batch, a bare prompt
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --method ft --out "$tmp/ft" \
    --json > "$tmp/ft.json"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --sweep-layers --json > "$tmp/sweep.json"
printf '{"fact": 0, "target": "Varn"}\n{"fact": 5, "target": "Osk"}\n{"prompt": "Hugo lives in", "subject": "Hugo", "target": "Telo", "object": "Wend"}\n' \
    > "$tmp/batch.jsonl"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --batch "$tmp/batch.jsonl" --layer 1 --json > "$tmp/batch.json"
"$FFN_BIN" edit "$tmp/m" --prompt "Mira lives in" --subject Mira --target Varn --layer 1 \
    --out "$tmp/bare" --json > "$tmp/bare.json"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --sweep-layers | tee "$tmp/sweep.txt"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
ft, rome = json.load(open(t + "/ft.json")), json.load(open(t + "/rome.json"))
assert ft["method"] == "ft" and ft["after"]["efficacy"] == 1.0, ft
dr = rome["after"]["heldout_loss"] - rome["before"]["heldout_loss"]
df = ft["after"]["heldout_loss"] - ft["before"]["heldout_loss"]
print("held-out loss change: rome %+.4f, ft %+.4f" % (dr, df))
assert df > dr, (dr, df)
sw = json.load(open(t + "/sweep.json"))
assert [(r["layer"], r["method"]) for r in sw["rows"]] == \
    [(l, m) for l in range(4) for m in ("rome", "ft")], sw
for r in sw["rows"]:
    s = r["scores"]
    assert all(0 <= s[k] <= 1 for k in ("efficacy", "generalisation", "specificity")), r
assert [r for r in sw["rows"] if r["layer"] == 1 and r["method"] == "rome"][0]["scores"] == \
    {k: v for k, v in rome["after"].items()}, "the sweep's layer 1 differs from the single edit"
b = json.load(open(t + "/batch.json"))
assert [r["edits"] for r in b["rows"]] == [1, 2, 3], b
assert b["rows"][-1]["scores"]["n_edits"] == 3 and b["rows"][-1]["scores"]["n_paraphrases"] == 4, b
bare = json.load(open(t + "/bare.json"))["after"]
assert bare["generalisation"] is None and bare["specificity"] is None and bare["n_edits"] == 1, bare
PY

# 5. bad input
bad() { # expected message, args...
    local want="$1"; shift
    if "$FFN_BIN" edit "$@" > /dev/null 2> "$tmp/err"; then fail "accepted: $*"; fi
    grep -q -- "$want" "$tmp/err" || { cat "$tmp/err"; fail "message for $*: expected '$want'"; }
}
bad "is not in --prompt" "$tmp/m" --prompt "Mira lives in" --subject Hugo --target Varn --out "$tmp/x"
bad "out of range" "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 4 --out "$tmp/x"
bad "not in the model's vocabulary" "$tmp/m" "${F[@]}" --fact 0 --target Atlantis --out "$tmp/x"
bad "no fact has id 99" "$tmp/m" "${F[@]}" --fact 99 --target Varn --out "$tmp/x"
bad "\-\-fact needs --facts" "$tmp/m" --fact 0 --target Varn --out "$tmp/x"
bad "\-\-out DIR missing" "$tmp/m" "${F[@]}" --fact 0 --target Varn
printf '{"id": 1, "subject": "Ada", "relation": "r", "prompt": "Bo is", "object": "X", "paraphrases": [], "neighbours": []}\n' > "$tmp/bad.jsonl"
bad 'line 1: the prompt "Bo is" does not contain the subject "Ada"' "$tmp/m" --facts "$tmp/bad.jsonl" --fact 1 --target Varn --out "$tmp/x"
printf '{"id": 1, "subject": "Ada", "prompt": "Ada is", "object": "X", "paraphrases": [], "neighbours": []}\n' > "$tmp/bad2.jsonl"
bad "line 1: field \"relation\" is missing" "$tmp/m" --facts "$tmp/bad2.jsonl" --fact 1 --target Varn --out "$tmp/x"
[[ ! -e "$tmp/x" ]] || fail "a failed edit left $tmp/x"

# 6. a Hugging Face directory in, one out (its text must be given)
"$FFN_BIN" export "$tmp/m" --out "$tmp/hf" --format hf > /dev/null
bad "give --data FILE" "$tmp/hf" "${F[@]}" --fact 0 --target Varn --layer 1 --out "$tmp/x"
"$FFN_BIN" edit "$tmp/hf" "${F[@]}" --fact 0 --target Varn --layer 1 --data "$tmp/text.txt" \
    --out "$tmp/ehf" > /dev/null
for f in config.json model.safetensors tokenizer.txt; do [[ -s "$tmp/ehf/$f" ]] || fail "ehf/$f missing"; done
"$FFN_BIN" run "$tmp/ehf" --prompt "Mira lives in" --steps 2 --temperature 0 > "$tmp/gen" 2>&1 ||
    { cat "$tmp/gen"; fail "the edited Hugging Face directory does not load"; }
sums "$tmp/m" | cmp -s - "$tmp/m.sums" || fail "the input model changed"

# 7. the fit, the pooled sweep
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --prefixes 1 --out "$tmp/f1" \
    --json > "$tmp/fit.json"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --prefixes 1 --fit subject \
    --out "$tmp/f2" --json > "$tmp/fit_subject.json"
printf '{"fact": 0, "target": "Varn"}\n{"fact": 5, "target": "Osk"}\n' > "$tmp/two.jsonl"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --batch "$tmp/two.jsonl" --sweep-layers --method rome --json \
    > "$tmp/sweep2.json"
"$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 5 --target Osk --sweep-layers --json > "$tmp/sweep5.json"
/usr/bin/python3 - "$tmp" <<'PY'
import json, sys
t = sys.argv[1]
f, g = json.load(open(t + "/fit.json")), json.load(open(t + "/fit_subject.json"))
print("fit update: loss_last %.6g, -log p(new) after %.6g; fit subject: %.6g, %.6g" % (
    f["loss_last"], -f["after"]["logp_new"], g["loss_last"], -g["after"]["logp_new"]))
assert abs(f["loss_last"] + f["after"]["logp_new"]) <= 1e-4 * (1 + f["loss_last"]), f
sw2 = json.load(open(t + "/sweep2.json"))
assert sw2["n_edits"] == 2 and [(r["layer"], r["method"]) for r in sw2["rows"]] == [(l, "rome") for l in range(4)], sw2
s0 = {r["layer"]: r["scores"] for r in json.load(open(t + "/sweep.json"))["rows"] if r["method"] == "rome"}
s5 = {r["layer"]: r["scores"] for r in json.load(open(t + "/sweep5.json"))["rows"] if r["method"] == "rome"}
for r in sw2["rows"]:
    a, b, p = s0[r["layer"]], s5[r["layer"]], r["scores"]
    assert abs(p["efficacy"] - (a["efficacy"] + b["efficacy"]) / 2) < 1e-9, (p, a, b)
    assert abs(p["logp_new"] - (a["logp_new"] + b["logp_new"]) / 2) < 1e-5, (p, a, b)
    assert p["n_paraphrases"] == a["n_paraphrases"] + b["n_paraphrases"], (p, a, b)
    gen = (a["generalisation"] * a["n_paraphrases"] + b["generalisation"] * b["n_paraphrases"]) / p["n_paraphrases"]
    assert abs(p["generalisation"] - gen) < 1e-5, (p, a, b)
PY
# 8. the edit that did not take
grep -q "did not take" "$tmp/err" && fail "the layer-1 edit took but warned: $(cat "$tmp/err")"
for fmt in text json; do
    extra=(); [[ $fmt == json ]] && extra=(--json)
    "$FFN_BIN" edit "$tmp/m" "${F[@]}" --fact 0 --target Varn --layer 1 --steps 0 --out "$tmp/nil-$fmt" "${extra[@]}" \
        > "$tmp/nil.out" 2> "$tmp/nil.err" || { cat "$tmp/nil.err"; fail "ffn edit --steps 0 ($fmt)"; }
    grep -qE "warning: the edit did not take: p\(target\) [0-9.e-]+ -> [0-9.e-]+" "$tmp/nil.err" ||
        fail "--steps 0 ($fmt): no 'did not take' warning: $(cat "$tmp/nil.err")"
    grep -q "did not take" "$tmp/nil.out" && fail "the warning went to stdout ($fmt)"
done
echo "ok 8. the nil edit warns"
# 9. a language without word spaces (a char model of the Chinese corpus):
# the target is taken as typed (no space before it), a character the
# vocabulary lacks is refused naming "a character", in edit and in trace
# (never a silent <unk>), and ffn_vocab_word_space's rule holds
"$FFN_BIN" train --corpus zh --corpus-sentences 3000 --tokenizer char --steps 2 --hidden-size 64 \
    --intermediate-size 96 --num-hidden-layers 1 --num-attention-heads 4 --seq-len 32 --batch-size 2 \
    --out "$tmp/zh" --quiet > /dev/null 2>&1 || fail "train zh"
"$FFN_BIN" edit "$tmp/zh" --prompt "小明把苹果递给了" --subject 小明 --target 王 --layer 0 \
    --samples 200 --out "$tmp/zh-ed" --json > "$tmp/zh.json" 2> "$tmp/err" ||
    { cat "$tmp/err"; fail "edit of a Chinese char model with target 王"; }
/usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['target'] == '王', r" \
    "$tmp/zh.json" || fail "the edit's target is not '王' as typed"
"$FFN_BIN" trace "$tmp/zh" --prompt "小明把苹果递给了" --subject 小明 --target 王 > "$tmp/trace" 2>&1 ||
    { cat "$tmp/trace"; fail "trace of a Chinese char model with target 王"; }
grep -q "^trace of p('王' | " "$tmp/trace" || fail "trace: the target is not 王: $(cat "$tmp/trace")"
bad "'𠀀': a character is not in the model's vocabulary" "$tmp/zh" --prompt "小明把苹果递给了" \
    --subject 小明 --target 𠀀 --layer 0 --out "$tmp/x"
if "$FFN_BIN" trace "$tmp/zh" --prompt "小明把苹果递给了" --subject 小明 --target 𠀀 > "$tmp/out" 2> "$tmp/err"; then
    fail "trace of a target the vocabulary lacks succeeded (a silent <unk>)"
fi
grep -q "target '𠀀': a character is not in the model's vocabulary" "$tmp/err" || { cat "$tmp/err"; fail "trace: message for a missing character"; }
echo "ok 9. the target as typed in a Chinese model"
echo "test_edit: ok"
