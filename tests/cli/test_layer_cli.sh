#!/usr/bin/env bash
# test_layer_cli.sh -- the `ffn layer` and `ffn collapse` commands as a user
# meets them: --help, N = 0, the collapse of a linear layer (and its refusal
# for gelu and for a gated layer), and bad flags (exit 2, flag named).
set -euo pipefail
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
FFN="${FFN_BIN:-$ROOT/build/ffn}"
PY=/usr/bin/python3
export PYTHONPATH="$ROOT/tests/parity${PYTHONPATH:+:$PYTHONPATH}"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

# expect CODE FRAGMENT -- cmd...: exit code CODE and FRAGMENT in stderr
expect() {
    local code="$1" frag="$2"; shift 3
    local rc=0
    "$@" >"$T/stdout" 2>"$T/stderr" || rc=$?
    if [[ $rc -ne $code ]]; then
        bad "$*: exit $rc, expected $code; stderr: $(head -c 400 "$T/stderr")"
    elif ! grep -qF -- "$frag" "$T/stderr"; then
        bad "$*: stderr lacks '$frag': $(head -c 400 "$T/stderr")"
    else
        ok "$* -> exit $code, '$frag'"
    fi
}

# ---- --help on both commands: exit 0, on stdout, explains the contract ----
for cmd in layer collapse; do
    if "$FFN" $cmd --help >"$T/help" 2>"$T/err"; then ok "ffn $cmd --help exits 0"
    else bad "ffn $cmd --help exit non-zero"; fi
    for word in --config --weights --output up_proj.weight down_proj.weight; do
        grep -qF -- "$word" "$T/help" || bad "ffn $cmd --help does not mention $word"
    done
done
for word in --input --backward --threads --recompute gate_proj.weight 'grad.' dy; do
    grep -qF -- "$word" <("$FFN" layer --help) || bad "ffn layer --help does not mention $word"
done

# ---- files: a dense linear layer with biases, a gelu one, a gated one, N = 0 input ----
$PY - "$T" <<'EOF'
import sys, numpy as np, ffn_testlib as T
d = sys.argv[1]
rng = np.random.default_rng(7)
D, F = 12, 31
def w(shape, fan): return (rng.standard_normal(shape) / np.sqrt(fan)).astype(np.float32)
dense = {"up_proj.weight": w((F, D), D), "up_proj.bias": w((F,), 1),
         "down_proj.weight": w((D, F), F), "down_proj.bias": w((D,), 1)}
T.write_safetensors(d + "/dense.safetensors", dense)
gated = dict(dense, **{"gate_proj.weight": w((F, D), D), "gate_proj.bias": w((F,), 1)})
T.write_safetensors(d + "/gated.safetensors", gated)
for name, act in [("linear", "linear"), ("gelu", "gelu")]:
    T.write_config(d + "/%s.json" % name, hidden_size=D, intermediate_size=F,
                   hidden_act=act, mlp_bias=True)
T.write_config(d + "/bilinear.json", hidden_size=D, intermediate_size=F,
               hidden_act="linear", mlp_bias=True, mlp_type="gated")
T.write_safetensors(d + "/empty.safetensors", {"x": np.zeros((0, D), np.float32),
                                               "dy": np.zeros((0, D), np.float32)})
T.write_safetensors(d + "/in.safetensors", {"x": rng.standard_normal((4, D)).astype(np.float32),
                                            "dy": rng.standard_normal((4, D)).astype(np.float32)})
EOF

# ---- N = 0: an empty y (and empty dx, zero gradients) ----
"$FFN" layer --config "$T/gelu.json" --weights "$T/dense.safetensors" --input "$T/empty.safetensors" \
    --output "$T/empty_out.safetensors" --backward
$PY - "$T" <<'EOF' && ok "N = 0 gives y [0, 12], dx [0, 12] and zero gradients" || bad "N = 0 output"
import sys, numpy as np, ffn_testlib as T
o = T.read_safetensors(sys.argv[1] + "/empty_out.safetensors")
assert o["y"].shape == (0, 12), o["y"].shape
assert o["dx"].shape == (0, 12), o["dx"].shape
assert o["grad.up_proj.weight"].shape == (31, 12)
for k, v in o.items():
    assert v.dtype == np.float32, (k, v.dtype)
    if k.startswith("grad."): assert not v.any(), k
EOF

# ---- collapse of a linear layer: small difference, weight (D, D) and bias (D) ----
"$FFN" collapse --config "$T/linear.json" --weights "$T/dense.safetensors" \
    --output "$T/merged.safetensors" --samples 32 --seed 3 --json >"$T/collapse.json"
cat "$T/collapse.json"
$PY - "$T" <<'EOF' && ok "collapse: max diff < 1e-4, weight [12, 12], bias [12], equals W_down W_up" || bad "collapse output"
import sys, json, numpy as np, ffn_testlib as T
d = sys.argv[1]
r = json.load(open(d + "/collapse.json"))
assert r["max_abs_diff"] < 1e-4, r
assert r["max_rel_diff"] < 1e-4, r
assert r["params_before"] == 2 * 12 * 31 + 31 + 12 and r["params_after"] == 12 * 12 + 12, r
m = T.read_safetensors(d + "/merged.safetensors")
w = T.read_safetensors(d + "/dense.safetensors")
assert m["weight"].shape == (12, 12) and m["bias"].shape == (12,)
W = w["down_proj.weight"].astype(np.float64) @ w["up_proj.weight"]
b = w["down_proj.weight"].astype(np.float64) @ w["up_proj.bias"] + w["down_proj.bias"]
assert np.abs(m["weight"] - W).max() < 1e-5, np.abs(m["weight"] - W).max()
assert np.abs(m["bias"] - b).max() < 1e-5
EOF
# without biases: weight only, and F16 weights are read too
$PY - "$T" <<'EOF2'
import sys, numpy as np, ffn_testlib as T
d = sys.argv[1]
w = T.read_safetensors(d + "/dense.safetensors")
T.write_safetensors(d + "/nobias.safetensors", {k: v for k, v in w.items() if k.endswith("weight")},
                    dtype="F16")
T.write_config(d + "/linear_nobias.json", hidden_size=12, intermediate_size=31, hidden_act="linear")
EOF2
"$FFN" collapse --config "$T/linear_nobias.json" --weights "$T/nobias.safetensors" \
    --output "$T/merged_nb.safetensors" --json >"$T/collapse_nb.json"
$PY - "$T" <<'EOF2' && ok "collapse without bias: weight only, params 744 -> 144" || bad "collapse without bias"
import sys, json, numpy as np, ffn_testlib as T
d = sys.argv[1]
r = json.load(open(d + "/collapse_nb.json"))
assert r["max_rel_diff"] < 1e-4 and r["params_before"] == 744 and r["params_after"] == 144, r
m = T.read_safetensors(d + "/merged_nb.safetensors")
assert sorted(m) == ["weight"], sorted(m)
w = T.read_safetensors(d + "/nobias.safetensors")
W = w["down_proj.weight"].astype(np.float64) @ w["up_proj.weight"]
assert np.abs(m["weight"] - W).max() < 1e-5
EOF2
# the human-readable report names the numbers too
"$FFN" collapse --config "$T/linear.json" --weights "$T/dense.safetensors" \
    --output "$T/merged2.safetensors" >"$T/collapse.txt"
grep -q "max abs" "$T/collapse.txt" && ok "collapse text report" || bad "collapse text report: $(cat "$T/collapse.txt")"

# ---- collapse refuses a nonlinear activation and a gated layer, with the reason ----
expect 1 "not linear in x" -- "$FFN" collapse --config "$T/gelu.json" --weights "$T/dense.safetensors" \
    --output "$T/no.safetensors"
[[ ! -e "$T/no.safetensors" ]] && ok "collapse gelu wrote nothing" || bad "collapse gelu left a file"
expect 1 "quadratic" -- "$FFN" collapse --config "$T/bilinear.json" --weights "$T/gated.safetensors" \
    --output "$T/no.safetensors"
expect 1 "quadratic" -- "$FFN" collapse --config "$T/linear.json" --weights "$T/gated.safetensors" \
    --output "$T/no.safetensors"

# ---- bad flags: exit 2, the flag named ----
L=(layer --config "$T/gelu.json" --weights "$T/dense.safetensors" --input "$T/in.safetensors"
   --output "$T/out.safetensors")
expect 2 "--threads" -- "$FFN" "${L[@]}" --threads abc
expect 2 "--threads" -- "$FFN" "${L[@]}" --threads -3
expect 2 "--frobnicate" -- "$FFN" "${L[@]}" --frobnicate
expect 2 "--config" -- "$FFN" layer --weights "$T/dense.safetensors" --input "$T/in.safetensors" \
    --output "$T/out.safetensors"
expect 2 "--output" -- "$FFN" layer --config "$T/gelu.json" --weights "$T/dense.safetensors" \
    --input "$T/in.safetensors" --output
expect 2 "stray" -- "$FFN" "${L[@]}" stray
expect 2 "--samples" -- "$FFN" collapse --config "$T/linear.json" --weights "$T/dense.safetensors" \
    --output "$T/m.safetensors" --samples 0
expect 2 "--seed" -- "$FFN" collapse --config "$T/linear.json" --weights "$T/dense.safetensors" \
    --output "$T/m.safetensors" --seed x
expect 2 "--weights" -- "$FFN" collapse --config "$T/linear.json" --output "$T/m.safetensors"
[[ ! -e "$T/out.safetensors" ]] && ok "bad flags wrote nothing" || bad "a bad-flag run left out.safetensors"

# ---- a good run with FFN_NUM_THREADS and --threads both work ----
FFN_NUM_THREADS=1 "$FFN" "${L[@]}" --backward && ok "FFN_NUM_THREADS=1 run" || bad "FFN_NUM_THREADS=1 run"
"$FFN" "${L[@]}" --backward --threads 2 --recompute && ok "--threads 2 --recompute run" || bad "--threads 2 run"

if ((fails)); then echo "$fails failed"; exit 1; fi
echo "all passed"
