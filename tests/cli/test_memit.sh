#!/usr/bin/env bash
# test_memit.sh -- `ffn edit --method memit --batch FILE --layers A-B` on a
# small word-level facts model trained here (16 people and their cities):
#   1. the update of every layer against PyTorch float64: --dump writes each
#      layer's keys K, residuals R, C, lambda and the solved dW; torch's
#      R^T K (w C + lambda I + K^T K)^-1 agrees to 1e-9 relative, and
#      down_proj after = before + dW to float rounding;
#   2. N = 1 and N = 10 edits over layers 0-1: the JSON scores (efficacy,
#      generalisation, specificity, held-out loss) before and after, log p of
#      the new objects up, the residual |z - h| down, specificity kept;
#      only model.layers.{0,1}.mlp.down_proj.weight change, the input is
#      untouched;
#   2b. --compare (ROME one after another, FT-L, MEMIT) equals each method run
#      alone, FT-L keeps |dW| <= --ft-norm, the input model is untouched;
#   3. bad usage: memit without --batch or --layers, --layers without memit,
#      a malformed or reversed range, a layer past the model.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
export XDG_CACHE_HOME="$tmp/xdg"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export FFN_NUM_THREADS=2
LIB="${FFN_ROOT:-.}/tests/parity"

/usr/bin/python3 - "$tmp" <<'PY'
import json, random, sys
d = sys.argv[1]
names = ["Mira", "Tomas", "Lena", "Oskar", "Ines", "Pavel", "Rosa", "Kenji", "Ada", "Bruno",
         "Clara", "Dario", "Elif", "Farid", "Greta", "Hugo"]
cities = ["Osk", "Varn", "Telo", "Brisk", "Quell", "Dorn", "Amber", "Selk", "Lune", "Pira",
          "Cazo", "Mello", "Nuvo", "Rinth", "Tarsa", "Wend"]
jobs = ["baker", "pilot", "doctor", "farmer", "teacher", "sailor", "painter", "miner"]
rng = random.Random(3)
city = dict(zip(names, cities))
job = {n: jobs[rng.randrange(len(jobs))] for n in names}
with open(d + "/facts.jsonl", "w") as f:
    for i, n in enumerate(names):
        nb = [m for m in names if m != n]
        rng.shuffle(nb)
        f.write(json.dumps({"id": i, "subject": n, "relation": "lives_in",
                            "prompt": n + " lives in", "object": city[n],
                            "paraphrases": [n + " resides in", "The home of " + n + " is"],
                            "neighbours": [{"prompt": m + " lives in", "object": city[m]}
                                           for m in nb[:4]]}) + "\n")
for N in (1, 10):
    with open("%s/b%d.jsonl" % (d, N), "w") as f:
        for i in range(N):
            f.write(json.dumps({"fact": i, "target": cities[(i + 5) % 16]}) + "\n")
lines = []
for rep in range(60):
    for n in names:
        lines += [n + " lives in " + city[n] + ".", n + " resides in " + city[n] + ".",
                  "The home of " + n + " is " + city[n] + ".", n + " is a " + job[n] + "."]
rng.shuffle(lines)
open(d + "/text.txt", "w").write("\n".join(lines) + "\n")
PY
train_bin="$FFN_BIN"
[[ -x "${FFN_ROOT:-.}/build/ffn" ]] && train_bin="${FFN_ROOT:-.}/build/ffn"
"$train_bin" train --data "$tmp/text.txt" --tokenizer word --hidden-size 64 --intermediate-size 128 \
    --num-hidden-layers 3 --num-attention-heads 4 --num-key-value-heads 4 --seq-len 32 \
    --batch-size 16 --steps 600 --lr 5e-3 --eval-every 500 --out "$tmp/m" > "$tmp/train.log" 2>&1 ||
    { cat "$tmp/train.log"; fail "training the facts model"; }
sums() { (cd "$1" && sha256sum -- * | sort); }
sums "$tmp/m" > "$tmp/m.sums"
M=(edit "$tmp/m" --facts "$tmp/facts.jsonl" --method memit)

for N in 1 10; do
    "$FFN_BIN" "${M[@]}" --batch "$tmp/b$N.jsonl" --layers 0-1 --out "$tmp/e$N" \
        --dump "$tmp/d$N.st" --json > "$tmp/r$N.json" 2> "$tmp/err" ||
        { cat "$tmp/err"; fail "memit N=$N"; }
    # 1. the update against torch float64
    FFN_ROOT="${FFN_ROOT:-.}" /usr/bin/python3 - "$tmp/d$N.st" 100 <<'PY' || fail "memit N=$N: parity"
import sys, os
sys.path.insert(0, os.path.join(os.environ["FFN_ROOT"], "tests", "parity"))
from ffn_testlib import read_safetensors
import torch
d = read_safetensors(sys.argv[1], as_f32=False)
w = float(sys.argv[2])
layers = sorted({int(k.split(".")[0][1:]) for k in d})
assert layers == [0, 1], layers
for l in layers:
    g = lambda n: torch.from_numpy(d["L%d.%s" % (l, n)].astype("float64"))
    K, R, C, dW, lam = g("K"), g("R"), g("C"), g("dW"), float(g("lambda")[0])
    F = C.shape[0]
    A = w * C + lam * torch.eye(F, dtype=torch.float64) + K.T @ K
    ref = torch.linalg.solve(A, R.T @ K, left=False)  # R^T K A^-1
    err = ((dW - ref).abs().max() / ref.abs().max()).item()
    print("  layer %d: n %d F %d, max |dW| %.3g, max rel err vs torch float64 %.2e"
          % (l, K.shape[0], F, ref.abs().max().item(), err))
    assert ref.abs().max() > 0 and err < 1e-9, err
    Wb, Wa = g("W_before"), g("W_after")
    werr = (Wa - (Wb + ref)).abs().max().item()
    assert werr <= 1e-6 * max(1.0, Wa.abs().max().item()), werr
PY
    # 2. scores, and only the chosen layers' down_proj change
    /usr/bin/python3 - "$tmp/r$N.json" "$N" <<'PY' || fail "memit N=$N: scores"
import json, sys
r, N = json.load(open(sys.argv[1])), int(sys.argv[2])
b, a = r["before"], r["after"]
print("memit N=%d:" % N, json.dumps({k: r[k] for k in ("loss_first", "loss_last", "resid_first",
      "resid_last")}))
print("  before", b)
print("  after ", a)
assert r["cov_weight"] == 100, r  # the parity check above assumes it
assert r["method"] == "memit" and r["layers"] == [0, 1] and r["n_edits"] == N, r
assert b["n_edits"] == N and b["n_paraphrases"] == 2 * N and a["n_neighbours"] >= 3 * N, b
assert b["efficacy"] == 0.0, b  # the model knows where they live
assert a["logp_new"] > b["logp_new"] + 1.0, (b, a)
# the targets' distance must shrink; by how much depends on the model the
# test trains, which differs by SIMD level (seed 1, N = 1: to 0.37 of it at
# AVX2, to 0.79 at AVX-512); the edit's effect is asserted on logp_new above
assert r["resid_last"] < 0.95 * r["resid_first"], r
assert a["specificity"] >= 0.5, a
assert abs(a["heldout_loss"] - b["heldout_loss"]) < 0.3, (b, a)
PY
    /usr/bin/python3 - "$tmp/m/model.safetensors" "$tmp/e$N/model.safetensors" <<'PY' || fail "memit N=$N: changed tensors"
import sys, os
sys.path.insert(0, os.path.join(os.environ.get("FFN_ROOT", "."), "tests", "parity"))
from ffn_testlib import read_safetensors
import numpy as np
a, b = read_safetensors(sys.argv[1]), read_safetensors(sys.argv[2])
assert sorted(a) == sorted(b)
changed = sorted(k for k in a if not np.array_equal(a[k], b[k]))
assert changed == ["model.layers.0.mlp.down_proj.weight",
                   "model.layers.1.mlp.down_proj.weight"], changed
PY
done
sums "$tmp/m" | cmp -s - "$tmp/m.sums" || fail "the input model changed"
"$FFN_BIN" "${M[@]}" --batch "$tmp/b1.jsonl" --layers 0-1 --out "$tmp/e1" > /dev/null 2>&1 &&
    fail "an existing --out replaced without --force"
"$FFN_BIN" "${M[@]}" --batch "$tmp/b1.jsonl" --layers 1 --out "$tmp/e1" --force > "$tmp/t1" ||
    fail "--layers A (one layer), --force"
grep -q "memit: 1 edits over layers 1-1" "$tmp/t1" || { cat "$tmp/t1"; fail "the table"; }

# 2b. --compare: ROME one after another at layer 0, FT-L and MEMIT over 0-1, from the same
# weights: the same scores as each method run alone, the model untouched
"$FFN_BIN" edit "$tmp/m" --facts "$tmp/facts.jsonl" --batch "$tmp/b10.jsonl" --compare \
    --layers 0-1 --layer 0 --json > "$tmp/cmp.json" 2> "$tmp/err" || { cat "$tmp/err"; fail "--compare"; }
"$FFN_BIN" edit "$tmp/m" --facts "$tmp/facts.jsonl" --batch "$tmp/b10.jsonl" --method ft \
    --layers 0-1 --json > "$tmp/ft.json" 2> "$tmp/err" || { cat "$tmp/err"; fail "--method ft --layers"; }
"$FFN_BIN" edit "$tmp/m" --facts "$tmp/facts.jsonl" --batch "$tmp/b10.jsonl" --compare \
    --layers 0-1 --layer 0 > "$tmp/cmp.txt" || fail "--compare (table)"
cat "$tmp/cmp.txt"
FFN_ROOT="${FFN_ROOT:-.}" /usr/bin/python3 - "$tmp/cmp.json" "$tmp/ft.json" "$tmp/r10.json" "$tmp/m/model.safetensors" <<'PY' || fail "--compare: scores"
import json, math, os, sys
sys.path.insert(0, os.path.join(os.environ["FFN_ROOT"], "tests", "parity"))
from ffn_testlib import read_safetensors
c, ft, me = (json.load(open(p)) for p in sys.argv[1:4])
w = read_safetensors(sys.argv[4])
big = max(float(abs(w["model.layers.%d.mlp.down_proj.weight" % l]).max()) for l in (0, 1)) + ft["ft_norm"]
half_ulp = 2.0 ** (math.frexp(big)[1] - 25)  # W0 + a change within ft_norm, rounded to float32
assert [m["method"] for m in c["methods"]] == ["rome", "ft", "memit"], c
assert c["n_edits"] == 10 and c["rome_layer"] == 0 and c["layers"] == [0, 1], c
by = {m["method"]: m for m in c["methods"]}
for k in ("efficacy", "generalisation", "specificity", "logp_new", "heldout_loss"):
    assert by["ft"]["scores"][k] == ft["after"][k], (k, by["ft"], ft["after"])
    assert by["memit"]["scores"][k] == me["after"][k], (k, by["memit"], me["after"])
assert c["before"] == me["before"], (c["before"], me["before"])
assert ft["max_change"] <= ft["ft_norm"] + half_ulp and ft["steps_run"] > 0, (ft, half_ulp)
assert by["ft"]["scores"]["logp_new"] > c["before"]["logp_new"], (by["ft"], c["before"])
print("  --compare N=10:", {m["method"]: (m["scores"]["efficacy"], m["scores"]["specificity"],
      round(m["heldout_change"], 4)) for m in c["methods"]})
PY
grep -q "^memit " "$tmp/cmp.txt" && grep -q "^ft " "$tmp/cmp.txt" && grep -q "^rome " "$tmp/cmp.txt" ||
    fail "--compare table rows"
sums "$tmp/m" | cmp -s - "$tmp/m.sums" || fail "--compare changed the input model"

# 3. bad usage
bad() { # expected-message args...
    local want="$1"; shift
    if "$FFN_BIN" "$@" > "$tmp/o" 2> "$tmp/e"; then fail "accepted: $*"; fi
    grep -q -- "$want" "$tmp/e" || { cat "$tmp/e"; fail "no '$want' for: $*"; }
}
bad "edits a --batch FILE" "${M[@]}" --fact 0 --target Osk --layers 0-1 --out "$tmp/x"
bad "needs --layers A-B" "${M[@]}" --batch "$tmp/b1.jsonl" --out "$tmp/x"
bad "is for --method memit" edit "$tmp/m" --facts "$tmp/facts.jsonl" --batch "$tmp/b1.jsonl" --layers 0-1
bad "expected A-B" "${M[@]}" --batch "$tmp/b1.jsonl" --layers 2-1 --out "$tmp/x"
bad "expected A-B" "${M[@]}" --batch "$tmp/b1.jsonl" --layers 0-x --out "$tmp/x"
bad "out of range" "${M[@]}" --batch "$tmp/b1.jsonl" --layers 0-3 --out "$tmp/x"
bad "edits a --batch FILE" edit "$tmp/m" --facts "$tmp/facts.jsonl" --fact 0 --target Osk --method ft --layers 0-1 --out "$tmp/x"
bad "\-\-compare edits a --batch FILE over --layers" edit "$tmp/m" --facts "$tmp/facts.jsonl" --batch "$tmp/b1.jsonl" --compare
bad "\-\-compare runs the three methods" edit "$tmp/m" --facts "$tmp/facts.jsonl" --batch "$tmp/b1.jsonl" --compare --layers 0-1 --method ft
[[ ! -e "$tmp/x" ]] || fail "a refused edit wrote its --out"
echo "PASS test_memit"
