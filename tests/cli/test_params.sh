#!/usr/bin/env bash
# test_params.sh -- `ffn params`: published totals through the CLI, --json
# fields parsed by python3, the readable report, --suggest-intermediate, and
# the exit codes for bad input and bad usage.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
CFG="$ROOT/tests/data/configs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# expect_exit CODE NEEDLE-IN-STDERR CMD...
expect_exit() {
    local want="$1" needle="$2"; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -ne $want ]]; then bad "exit $rc (want $want): $*"; cat "$tmp/err"; return; fi
    if [[ -n "$needle" ]] && ! grep -qF -- "$needle" "$tmp/err"; then
        bad "stderr lacks '$needle': $*"; cat "$tmp/err"; return
    fi
    ok "exit $want${needle:+ ($needle)}: ${*:2}"
}

# ---- --json: total_params / active_params, published figures ----------------
check_json() { # config total active
    "$FFN_BIN" params "$CFG/$1.json" --json >"$tmp/j.json"
    if /usr/bin/python3 - "$tmp/j.json" "$2" "$3" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
total, active = int(sys.argv[2]), int(sys.argv[3])
assert isinstance(d["total_params"], int) and isinstance(d["active_params"], int)
assert d["total_params"] == total, (d["total_params"], total)
assert d["active_params"] == active, (d["active_params"], active)
p, a = d["params"], d["active"]
keys = ["attention", "ffn_dense", "ffn_routed", "ffn_shared", "router", "norms",
        "embed_token", "embed_position", "embed_token_type", "head"]
assert sum(p[k] for k in keys) == p["total"] == total
assert sum(a[k] for k in keys) == a["total"] == active
assert len(d["layers"]) == d["num_layers"]
assert sum(l["params"]["total"] for l in d["layers"]) <= total
f = d["forward_flops_per_token"]
assert f["total"] == sum(v for k, v in f.items() if k != "total")
assert d["training_flops_per_token"] == 6 * active + 3 * (f["attention_qk"] + f["attention_av"])
assert d["conventions"]
print(sys.argv[1], "ok")
EOF
    then ok "json $1: total $2 active $3"; else bad "json $1"; fi
}
check_json gpt2 124439808 124439808
check_json bert-base-uncased 109482240 109482240
check_json Llama-2-7b-hf 6738415616 6738415616
check_json Meta-Llama-3-8B 8030261248 8030261248
check_json Mistral-7B-v0.1 7241732096 7241732096
check_json Mixtral-8x7B-v0.1 46702792704 12879925248
check_json Qwen2-7B 7615616512 7615616512
check_json Qwen1.5-MoE-A2.7B 14315784192 2689173504
check_json DeepSeek-V3 671026419200 37552297472

# --seq-len reaches the attention terms: QK^T at T=4096 is twice that at 2048
q1=$("$FFN_BIN" params "$CFG/Llama-2-7b-hf.json" --json --seq-len 2048 | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["forward_flops_per_token"]["attention_qk"])')
q2=$("$FFN_BIN" params "$CFG/Llama-2-7b-hf.json" --json --seq-len=4096 | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["forward_flops_per_token"]["attention_qk"])')
# 2·L·D·T = 2·32·4096·2048
[[ "$q1" == 536870912 && "$q2" == 1073741824 ]] && ok "--seq-len: QK^T $q1 -> $q2" || bad "--seq-len: $q1 $q2"

# ---- random small configs against an independent PyTorch structure ----------
# For each model type, seeded random (often odd) sizes; the reference builds
# the Hugging Face module tree with torch.nn modules on the meta device and
# counts parameters with numel(), per component and active per token.
cat >"$tmp/ref.py" <<'PYEOF'
import json, random, subprocess, sys
import torch
import torch.nn as nn
FFN, TMP = sys.argv[1], sys.argv[2]
M = "meta"
def n(*mods): return sum(p.numel() for m in mods for p in m.parameters())
def lin(i, o, bias): return nn.Linear(i, o, bias=bias, device=M)
def ln(d): return nn.LayerNorm(d, device=M)                 # weight + bias
def rms(d): return torch.empty(d, device=M).numel()        # RMSNorm: weight only
def emb(v, d): return nn.Embedding(v, d, device=M)

class Count:
    def __init__(s): s.c = {}; s.act = {}
    def add(s, cat, numel, active=None):
        s.c[cat] = s.c.get(cat, 0) + numel
        s.act[cat] = s.act.get(cat, 0) + (numel if active is None else active)

def glu(d, f, bias=False): return n(lin(d, f, bias), lin(d, f, bias), lin(f, d, bias))

def ref_llama(c, kind):
    D, L, V, H = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["num_attention_heads"]
    Hkv = c.get("num_key_value_heads") or H
    hd = c.get("head_dim") or D // H
    qkvb = kind in ("qwen2", "qwen2_moe") or (kind == "llama" and c.get("attention_bias", False))
    ob = kind == "llama" and c.get("attention_bias", False)
    mb = kind == "llama" and c.get("mlp_bias", False)
    k = Count()
    k.add("embed_token", n(emb(V, D)))
    for i in range(L):
        k.add("attention", n(lin(D, H * hd, qkvb), lin(D, Hkv * hd, qkvb), lin(D, Hkv * hd, qkvb), lin(H * hd, D, ob)))
        k.add("norms", rms(D) + rms(D))
        if kind == "mixtral":
            E, K, F = c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"]
            one = n(lin(D, F, False), lin(F, D, False), lin(D, F, False))   # w1, w2, w3
            k.add("ffn_routed", E * one, K * one); k.add("router", n(lin(D, E, False)))
        elif kind == "qwen2_moe" and i not in (c.get("mlp_only_layers") or []) and c["num_experts"] > 0 \
                and (i + 1) % c.get("decoder_sparse_step", 1) == 0:
            E, K = c["num_experts"], c["num_experts_per_tok"]
            one = glu(D, c["moe_intermediate_size"])
            k.add("ffn_routed", E * one, K * one); k.add("router", n(lin(D, E, False)))
            k.add("ffn_shared", glu(D, c["shared_expert_intermediate_size"]) + n(lin(D, 1, False)))
        else:
            k.add("ffn_dense", glu(D, c["intermediate_size"], mb))
    k.add("norms", rms(D))
    if not c.get("tie_word_embeddings", False): k.add("head", n(lin(D, V, False)))
    return k

def ref_gpt2(c):
    D, L, V, P = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]
    F = c.get("n_inner") or 4 * D
    k = Count()
    k.add("embed_token", n(emb(V, D))); k.add("embed_position", n(emb(P, D)))
    for _ in range(L):   # Conv1D(nf, nx): weight (nx, nf) + bias (nf), the size of a Linear
        k.add("attention", n(lin(D, 3 * D, True), lin(D, D, True)))
        k.add("ffn_dense", n(lin(D, F, True), lin(F, D, True)))
        k.add("norms", n(ln(D), ln(D)))
    k.add("norms", n(ln(D)))
    return k

def ref_bert(c):
    D, L, V, P, F = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["max_position_embeddings"], c["intermediate_size"]
    hd = D // c["num_attention_heads"]
    k = Count()
    k.add("embed_token", n(emb(V, D))); k.add("embed_position", n(emb(P, D)))
    k.add("embed_token_type", n(emb(c.get("type_vocab_size", 2), D))); k.add("norms", n(ln(D)))
    for _ in range(L):
        k.add("attention", n(lin(D, D, True), lin(D, D, True), lin(D, D, True), lin(D, D, True)))
        if c.get("position_embedding_type", "absolute") != "absolute": k.add("attention", n(emb(2 * P - 1, hd)))
        k.add("norms", n(ln(D), ln(D)))
        k.add("ffn_dense", n(lin(D, F, True), lin(F, D, True)))
    k.add("head", n(lin(D, D, True)))   # pooler
    return k

def ref_deepseek(c, v3):
    D, L, V, H = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["num_attention_heads"]
    ql, kvl, nope, rope, vd = c.get("q_lora_rank"), c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    ab = c.get("attention_bias", False)
    k = Count()
    k.add("embed_token", n(emb(V, D)))
    for i in range(L):
        if ql is None: k.add("attention", n(lin(D, H * (nope + rope), False)))
        else: k.add("attention", n(lin(D, ql, ab), lin(ql, H * (nope + rope), False))); k.add("norms", rms(ql))
        k.add("attention", n(lin(D, kvl + rope, ab), lin(kvl, H * (nope + vd), False), lin(H * vd, D, ab)))
        k.add("norms", rms(kvl) + rms(D) + rms(D))
        E = c.get("n_routed_experts")
        if E is not None and i >= c.get("first_k_dense_replace", 0) and i % c.get("moe_layer_freq", 1) == 0:
            K, Fm = c["num_experts_per_tok"], c["moe_intermediate_size"]
            one = glu(D, Fm)
            k.add("ffn_routed", E * one, K * one)
            noaux = c.get("topk_method", "noaux_tc" if v3 else "greedy") == "noaux_tc"
            k.add("router", n(lin(D, E, False)) + (E if noaux else 0))
            if c.get("n_shared_experts"): k.add("ffn_shared", glu(D, Fm * c["n_shared_experts"]))
        else:
            k.add("ffn_dense", glu(D, c["intermediate_size"]))
    k.add("norms", rms(D))
    if not c.get("tie_word_embeddings", False): k.add("head", n(lin(D, V, False)))
    return k

rng = random.Random(20261129)
def r(lo, hi): return rng.randint(lo, hi)
def sample(kind):
    H = r(1, 6); hd = r(1, 9)
    if kind == "gpt2":
        return {"model_type": "gpt2", "n_embd": H * hd, "n_head": H, "n_layer": r(1, 5), "vocab_size": r(5, 99),
                "n_positions": r(3, 40), "n_inner": rng.choice([None, r(3, 77)])}
    if kind == "bert":
        return {"model_type": "bert", "hidden_size": H * hd, "num_attention_heads": H, "num_hidden_layers": r(1, 5),
                "vocab_size": r(5, 99), "max_position_embeddings": r(3, 40), "intermediate_size": r(3, 77),
                "type_vocab_size": r(0, 3), "position_embedding_type": rng.choice(["absolute", "relative_key"])}
    if kind.startswith("deepseek"):
        L = r(1, 6)
        c = {"model_type": kind, "hidden_size": r(3, 50), "num_attention_heads": H, "num_hidden_layers": L,
             "vocab_size": r(5, 99), "intermediate_size": r(3, 77), "moe_intermediate_size": r(2, 30),
             "n_routed_experts": r(1, 9), "n_shared_experts": rng.choice([None, 0, 1, 2]),
             "first_k_dense_replace": r(0, L), "moe_layer_freq": r(1, 3), "q_lora_rank": rng.choice([None, r(2, 20)]),
             "kv_lora_rank": r(2, 20), "qk_nope_head_dim": r(1, 9), "qk_rope_head_dim": r(1, 9), "v_head_dim": r(1, 9),
             "attention_bias": rng.random() < 0.3, "tie_word_embeddings": rng.random() < 0.3,
             "topk_method": rng.choice(["greedy", "noaux_tc", "group_limited_greedy"])}
        c["num_experts_per_tok"] = r(1, c["n_routed_experts"])
        return c
    Hkv = rng.choice([d for d in range(1, H + 1) if H % d == 0])
    c = {"model_type": kind, "hidden_size": H * hd, "num_attention_heads": H, "num_key_value_heads": Hkv,
         "num_hidden_layers": r(1, 6), "vocab_size": r(5, 99), "intermediate_size": r(3, 77),
         "tie_word_embeddings": rng.random() < 0.4}
    if kind == "llama":
        c.update(attention_bias=rng.random() < 0.5, mlp_bias=rng.random() < 0.5)
        if rng.random() < 0.3: c["head_dim"] = r(1, 11)
    if kind == "mixtral":
        c["num_local_experts"] = r(1, 9); c["num_experts_per_tok"] = r(1, c["num_local_experts"])
    if kind == "qwen2_moe":
        c.update(num_experts=r(1, 9), moe_intermediate_size=r(2, 30), shared_expert_intermediate_size=r(2, 40),
                 decoder_sparse_step=r(1, 3), mlp_only_layers=sorted(rng.sample(range(c["num_hidden_layers"]), r(0, 1))))
        c["num_experts_per_tok"] = r(1, c["num_experts"])
    return c

def reference(c):
    t = c["model_type"]
    if t == "gpt2": return ref_gpt2(c)
    if t == "bert": return ref_bert(c)
    if t.startswith("deepseek"): return ref_deepseek(c, t == "deepseek_v3")
    return ref_llama(c, t)

kinds = ["llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gpt2", "bert", "deepseek_v2", "deepseek_v3"]
failures = checked = 0
for trial in range(12):
    for kind in kinds:
        c = sample(kind)
        path = f"{TMP}/rand_{kind}_{trial}.json"
        json.dump(c, open(path, "w"))
        out = subprocess.run([FFN, "params", path, "--json"], capture_output=True, text=True)
        if out.returncode != 0:
            print("FAIL", json.dumps(c), out.stderr.strip()); failures += 1; continue
        got = json.loads(out.stdout)
        k = reference(c)
        want_total, want_active = sum(k.c.values()), sum(k.act.values())
        bad = []
        if got["total_params"] != want_total: bad.append(f"total {got['total_params']} != {want_total}")
        if got["active_params"] != want_active: bad.append(f"active {got['active_params']} != {want_active}")
        for cat, v in k.c.items():
            if got["params"][cat] != v: bad.append(f"{cat} {got['params'][cat]} != {v}")
        checked += 1
        if bad:
            failures += 1; print("FAIL", json.dumps(c), "; ".join(bad))
print(f"random configs: {checked} checked against the torch.nn structure, {failures} failed")
sys.exit(1 if failures else 0)
PYEOF
if /usr/bin/python3 "$tmp/ref.py" "$FFN_BIN" "$tmp"; then ok "random configs match the torch.nn reference"; else bad "random configs"; fi

# ---- the readable report -----------------------------------------------------
"$FFN_BIN" params "$CFG/Mixtral-8x7B-v0.1.json" >"$tmp/mix.txt"
for needle in "46,702,792,704" "12,879,925,248" "FFN routed experts" "FFN share" \
              "moe_intermediate_size/hidden_size = 14336/4096 = 3.5" "training FLOPs per token" \
              "QK^T" "conventions:"; do
    grep -qF -- "$needle" "$tmp/mix.txt" && ok "report has '$needle'" || bad "report lacks '$needle'"
done
# the conventions block: once, on request (--conventions), not in every report
"$FFN_BIN" params --conventions >"$tmp/conv.txt"
for needle in "conventions:" "tied input/output embedding is counted once" \
              "embeddings (token, position, token type) are counted in the totals"; do
    grep -qF -- "$needle" "$tmp/conv.txt" && ok "--conventions has '$needle'" || bad "--conventions lacks '$needle'"
done
! grep -qF "tied input/output embedding is counted once" "$tmp/mix.txt" \
    && ok "the report does not repeat the conventions" || bad "the report repeats the conventions"
"$FFN_BIN" params "$CFG/Llama-2-7b-hf.json" >"$tmp/l.txt"
grep -qF "intermediate_size/hidden_size = 11008/4096 = 2.688" "$tmp/l.txt" && ok "expansion ratio" || bad "expansion ratio"
"$FFN_BIN" params "$CFG/DeepSeek-V3.json" --per-layer >"$tmp/ds.txt"
rows=$(grep -cE '^ +[0-9]+ (dense|moe) ' "$tmp/ds.txt" || true)
[[ "$rows" == 61 ]] && ok "--per-layer: 61 rows" || bad "--per-layer rows: $rows"
[[ $(grep -cE '^ +[0-9]+ dense ' "$tmp/ds.txt") == 3 ]] && ok "first_k_dense_replace 3" || bad "dense rows"
grep -qF "MTP module (not in the totals)" "$tmp/ds.txt" && ok "MTP stated" || bad "MTP line"

# ---- --suggest-intermediate ---------------------------------------------------
suggest_json() { "$FFN_BIN" params --suggest-intermediate "$@" --json | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["intermediate_size"], d["dense_params"], d["gated_two_thirds_params"])'; }
read -r f dense gated <<<"$(suggest_json --hidden 4096 --multiple-of 256)"
[[ "$f" == 11008 ]] && ok "4096/256 -> 11008" || bad "4096/256 -> $f"
[[ "$dense" == 134217728 && "$gated" == 134217728 ]] && ok "Shazeer: dense 4D == gated 2/3·4D ($dense)" || bad "Shazeer $dense $gated"
read -r f _ _ <<<"$(suggest_json --hidden 4096 --multiple-of 1024 --ffn-dim-multiplier 1.3)"
[[ "$f" == 14336 ]] && ok "4096/1024 x1.3 -> 14336" || bad "4096/1024 x1.3 -> $f"
read -r f _ _ <<<"$(suggest_json --hidden 8192 --multiple-of 4096 --ffn-dim-multiplier 1.3)"
[[ "$f" == 28672 ]] && ok "8192/4096 x1.3 -> 28672 (Llama-2-70B)" || bad "70B -> $f"
out=$("$FFN_BIN" params --suggest-intermediate --hidden 4096 --multiple-of 256)
grep -qF "intermediate_size = 11008" <<<"$out" && grep -qF "134,217,728" <<<"$out" \
    && ok "readable suggest shows F and both parameter counts" || bad "readable suggest: $out"

# ---- --help --------------------------------------------------------------------
"$FFN_BIN" params --help >"$tmp/help.txt"
for needle in "usage: ffn params" "--seq-len" "--per-layer" "--json" "--suggest-intermediate" \
              "active" "counted once" "2 per multiply-add" "Shazeer"; do
    grep -qF -- "$needle" "$tmp/help.txt" && ok "help has '$needle'" || bad "help lacks '$needle'"
done

# ---- bad input: exit 1 with the field named; bad usage: exit 2 ----------------
echo '{"model_type": "gptj", "n_embd": 8}' >"$tmp/unknown.json"
expect_exit 1 "model_type: unknown value 'gptj'" "$FFN_BIN" params "$tmp/unknown.json"
echo '{"model_type": "llama", "num_hidden_layers": 2}' >"$tmp/missing.json"
expect_exit 1 "hidden_size: required field is missing" "$FFN_BIN" params "$tmp/missing.json"
echo '{"model_type": "llama", "hidden_size": -4096, "num_hidden_layers": 2}' >"$tmp/neg.json"
expect_exit 1 "found -4096" "$FFN_BIN" params "$tmp/neg.json"
echo '{"model_type": "llama", "hidden_size": 1099511627776, "num_hidden_layers": 2, "num_attention_heads": 1, "vocab_size": 1099511627776, "intermediate_size": 8}' >"$tmp/ovf.json"
expect_exit 1 "overflows 64 bits" "$FFN_BIN" params "$tmp/ovf.json"
printf '{"model_type": "llama", ' >"$tmp/trunc.json"
expect_exit 1 "trunc.json" "$FFN_BIN" params "$tmp/trunc.json"
expect_exit 1 "nonexistent" "$FFN_BIN" params "$tmp/nonexistent.json"
expect_exit 2 "expected CONFIG.json" "$FFN_BIN" params
expect_exit 2 "unknown option" "$FFN_BIN" params "$CFG/gpt2.json" --bogus
expect_exit 2 "--seq-len" "$FFN_BIN" params "$CFG/gpt2.json" --seq-len 0
expect_exit 2 "--seq-len" "$FFN_BIN" params "$CFG/gpt2.json" --seq-len abc
expect_exit 2 "needs --hidden" "$FFN_BIN" params --suggest-intermediate
expect_exit 2 "--hidden" "$FFN_BIN" params --suggest-intermediate --hidden -3
expect_exit 2 "--multiple-of" "$FFN_BIN" params --suggest-intermediate --hidden 4096 --multiple-of 0
expect_exit 2 "go with --suggest-intermediate" "$FFN_BIN" params "$CFG/gpt2.json" --hidden 4096

exit $fail
