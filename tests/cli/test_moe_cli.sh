#!/usr/bin/env bash
# test_moe_cli.sh -- `ffn layer` on Mixture-of-Experts configs as a user
# meets it: a good run writes exactly the contract's tensors; bad configs
# (k = 0, k > E, unknown scoring_func, negative capacity_factor, disagreeing
# E aliases), a missing expert tensor, shapes that disagree with the config,
# tensors the config does not know, and bad inputs each fail with exit 1 and
# a message naming the file and the field or tensor.  Also `ffn bench moe
# --help` and a bad bench flag (exit 2).
set -euo pipefail
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
FFN="${FFN_BIN:-$ROOT/build/ffn}"
PY=/usr/bin/python3
export PYTHONPATH="$ROOT/tests/parity${PYTHONPATH:+:$PYTHONPATH}"
T=$(mktemp -d)
trap '[[ -n "${KEEP_TMP:-}" ]] || rm -rf "$T"' EXIT
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
        ok "exit $code, '$frag'"
    fi
}

# ---- files: a good MoE (E = 3, k = 2, D = 6, F = 5, gated) and broken variants ----
$PY - "$T" <<'EOF'
import sys, json, numpy as np, ffn_testlib as T
d = sys.argv[1]
rng = np.random.default_rng(3)
D, F, E = 6, 5, 3
def r(*s): return rng.standard_normal(s).astype(np.float32)
W = {"gate.weight": r(E, D)}
for e in range(E):
    W["experts.%d.gate_proj.weight" % e] = r(F, D)
    W["experts.%d.up_proj.weight" % e] = r(F, D)
    W["experts.%d.down_proj.weight" % e] = r(D, F)
T.write_safetensors(d + "/w.safetensors", W)
missing = {k: v for k, v in W.items() if k != "experts.2.down_proj.weight"}
T.write_safetensors(d + "/missing.safetensors", missing)
T.write_safetensors(d + "/transposed.safetensors", dict(W, **{"experts.1.up_proj.weight": r(D, F)}))
T.write_safetensors(d + "/router.safetensors", dict(W, **{"gate.weight": r(E + 1, D)}))
T.write_safetensors(d + "/extra.safetensors", dict(W, **{"experts.3.up_proj.weight": r(F, D)}))
T.write_safetensors(d + "/in.safetensors", {"x": r(7, D), "dy": r(7, D)})
T.write_safetensors(d + "/in_badd.safetensors", {"x": r(7, D + 1), "dy": r(7, D + 1)})
T.write_safetensors(d + "/in_nody.safetensors", {"x": r(7, D)})
base = {"hidden_size": D, "num_experts": E, "num_experts_per_tok": 2, "moe_intermediate_size": F,
        "hidden_act": "silu", "norm_topk_prob": True}
def cfg(name, **kw):
    c = dict(base); c.update(kw)
    with open(d + "/" + name + ".json", "w") as f: json.dump(c, f)
cfg("good")
cfg("k0", num_experts_per_tok=0)
cfg("kbig", num_experts_per_tok=4)
cfg("scoring", scoring_func="softermax")
cfg("capacity", capacity_factor=-0.5)
cfg("aliases", n_routed_experts=5)
cfg("dense", mlp_type="dense")
EOF

L() { "$FFN" layer --config "$T/$1.json" --weights "$T/$2.safetensors" --input "$T/${3:-in}.safetensors" \
      --output "$T/out.safetensors" --backward --threads 2; }

# ---- a good run: exactly the contract's tensors, with the contract's dtypes ----
if L good w >"$T/stdout" 2>"$T/stderr"; then ok "good MoE run exits 0"; else bad "good run failed: $(cat "$T/stderr")"; fi
$PY - "$T" <<'EOF' || fails=$((fails + 1))
import sys, ffn_testlib as T
h = T.read_header(sys.argv[1] + "/out.safetensors")
want = {"y": ("F32", [7, 6]), "router_logits": ("F32", [7, 3]), "topk_ids": ("I32", [7, 2]),
        "topk_weights": ("F32", [7, 2]), "tokens_per_expert": ("I32", [3]), "aux_loss": ("F32", [1]),
        "z_loss": ("F32", [1]), "dx": ("F32", [7, 6]), "grad.gate.weight": ("F32", [3, 6])}
for e in range(3):
    for p, s in [("gate_proj", [5, 6]), ("up_proj", [5, 6]), ("down_proj", [6, 5])]:
        want["grad.experts.%d.%s.weight" % (e, p)] = ("F32", s)
got = {k: (v["dtype"], v["shape"]) for k, v in h.items() if k != "__metadata__"}
if got != want:
    print("FAIL output tensors: %s\n  expected %s" % (sorted(got.items()), sorted(want.items())))
    sys.exit(1)
print("ok   output tensors and dtypes are the contract's")
EOF

# ---- bad configs: each names its field ----
expect 1 "num_experts_per_tok: must be >= 1, got 0" -- L k0 w
expect 1 "num_experts_per_tok: must be <= num_experts (3), got 4" -- L kbig w
expect 1 "scoring_func: unknown value 'softermax'" -- L scoring w
expect 1 "capacity_factor: must be a finite number >= 0" -- L capacity w
expect 1 "n_routed_experts (5) disagrees with num_experts (3)" -- L aliases w
expect 1 "k0.json" -- L k0 w

# ---- weights that disagree with the config ----
expect 1 "experts.2.down_proj.weight: missing" -- L good missing
expect 1 "missing.safetensors" -- L good missing
expect 1 "experts.1.up_proj.weight" -- L good transposed
expect 1 "expected shape [5, 6]" -- L good transposed
expect 1 "gate.weight" -- L good router
expect 1 "expected shape [3, 6]" -- L good router
expect 1 "experts.3.up_proj.weight: unexpected tensor" -- L good extra
expect 1 "experts.0.gate_proj.weight: unexpected tensor" -- L dense w

# ---- inputs ----
expect 1 "x: expected shape [N, 6]" -- L good w in_badd
expect 1 "dy" -- L good w in_nody

# ---- the benchmark's command line ----
if "$FFN" bench moe --help >"$T/help" 2>&1 && grep -qF -- "--experts" "$T/help" && grep -qF -- "--json" "$T/help"; then
    ok "ffn bench moe --help"
else
    bad "ffn bench moe --help: $(head -c 300 "$T/help")"
fi
expect 2 "--top-k" -- "$FFN" bench moe --top-k 0
expect 2 "--top-k: must be <= --experts" -- "$FFN" bench moe --experts 2 --top-k 3

echo "$fails failed"
((fails == 0))
