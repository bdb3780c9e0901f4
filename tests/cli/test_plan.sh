#!/usr/bin/env bash
# test_plan.sh -- `ffn plan`: per-rank memory, traffic and time of a
# parallel layout.  The figures are recomputed here in Python from the
# config alone, by the rules include/ffn/plan.h states (an independent
# second implementation of the same arithmetic), and compared exactly
# (integers) or to 1e-9 relative; every refused layout names its numbers.
set -uo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
CFG="$ROOT/tests/data/configs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
expect() {
    local code=$1 pat=$2; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -eq $code ]] && grep -qE -- "$pat" "$tmp/err"; then ok "($code) ${*:2}"
    else bad "$* : exit $rc (expected $code), stderr: $(head -c 300 "$tmp/err")"; fi
}

"$FFN" plan --help >"$tmp/h" 2>&1 && grep -q "^usage: ffn plan" "$tmp/h" &&
    [[ $(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$tmp/h") -le 80 ]] &&
    ok "plan --help" || bad "plan --help"

# check NAME CONFIG ARGS... : ffn plan --json against the Python model
check() {
    local name=$1 cfg=$2; shift 2
    if ! "$FFN" plan "$CFG/$cfg" "$@" --json >"$tmp/$name.json" 2>"$tmp/err"; then
        bad "$name: ffn plan failed: $(head -c 300 "$tmp/err")"; return
    fi
    if /usr/bin/python3 - "$CFG/$cfg" "$tmp/$name.json" "$@" >"$tmp/py" 2>&1 <<'PY'
import json, math, sys
cfg = json.load(open(sys.argv[1])); got = json.load(open(sys.argv[2]))
args = sys.argv[3:]
def arg(flag, d, f=int):
    return f(args[args.index(flag) + 1]) if flag in args else d
tp, ep, dp, pp = arg("--tp", 1), arg("--ep", 1), arg("--dp", 1), arg("--pp", 1)
B, A, T = arg("--batch-size", 1), arg("--grad-accum", 1), arg("--seq-len", 2048)
ab = {"f32": 4, "bf16": 2, "f16": 2}[arg("--act-type", "f32", str)]
wb = {"f32": 4, "bf16": 2, "f16": 2}[arg("--weight-type", "f32", str)]
link, lat = arg("--link-gbps", 10.0, float) * 1e9, arg("--latency-us", 2.0, float) * 1e-6
peak = arg("--peak-gflops", 115.0, float) * 1e9
zero1 = arg("--zero", 0) == 1
D, L, V = cfg["hidden_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
H = cfg["num_attention_heads"]; G = cfg.get("num_key_value_heads", H); dh = D // H
F = cfg["intermediate_size"]
E = cfg.get("num_local_experts", 0); K = cfg.get("num_experts_per_tok", 0)
tied = cfg.get("tie_word_embeddings", False)
cd = lambda a, b: -(-a // b)
attn = (2 * H * dh * D + 2 * G * dh * D) // tp          # q, o + k, v (no biases here)
norms = 2 * D
if E:
    ffn_held = cd(E, ep) * 3 * D * cd(F, tp); router = E * D; expert = ffn_held
    ffn_read = min(K, cd(E, ep)) * 3 * D * cd(F, tp)
else:
    ffn_held = 3 * D * cd(F, tp); router = 0; expert = 0; ffn_read = ffn_held
lps = cd(L, pp)
layer = attn + ffn_held + router + norms
def stage(s):
    n = min(L, (s + 1) * lps) - s * lps
    p = n * layer + (V * D if s == 0 else 0)
    if s == pp - 1: p += (0 if tied else V * D) + D + (V * D if tied and pp > 1 else 0)
    return n, p, n * expert
n0, p0, e0 = max((stage(s) for s in range(pp)), key=lambda x: x[1])
assert got["rank"]["params"] == p0, (got["rank"]["params"], p0)
assert got["rank"]["params_experts"] == e0
assert got["memory_bytes"]["weights"] == p0 * wb
opt_pp = 8 + (4 if wb < 4 else 0)
optim = (p0 - e0) * opt_pp / (dp if zero1 else 1) + e0 * opt_pp / ((dp // ep) if zero1 else 1)
assert abs(got["memory_bytes"]["optimizer"] - optim) <= 1e-9 * optim + 1
tok = B * T
sent_tp = 4 * n0 * A * 2 * (tp - 1) / tp * tok * D * ab
sent_ep = 4 * n0 * A * (ep - 1) / ep * tok * K * (D * ab + 16) if E else 0
rep = dp // ep
sent_dp = 2 * (dp - 1) / dp * (p0 - e0) * wb + (2 * (rep - 1) / rep * e0 * wb if rep > 1 else 0)
sent_pp = 2 * A * tok * D * ab if pp > 1 else 0
for k, v in (("tp", sent_tp), ("ep", sent_ep), ("dp", sent_dp), ("pp", sent_pp)):
    assert abs(got["sent_bytes_step"][k] - v) <= 1e-9 * v + 1, (k, got["sent_bytes_step"][k], v)
msgs = (4 * n0 * A * 2 * (tp - 1) + (4 * n0 * A * (ep - 1) if E else 0) +
        2 * (dp - 1) * (n0 + 1) + (2 * A if pp > 1 else 0))
assert got["messages_step"] == msgs, (got["messages_step"], msgs)
comm = (sent_tp + sent_ep + sent_dp + sent_pp) / link + msgs * lat
assert abs(got["time_s"]["comm"] - comm) <= 1e-9 * comm + 1e-15
# compute: 3 x forward FLOPs per token of the stage's layers / tp (+ head on the last)
fl_attn = 2 * D * (2 * H * dh + 2 * G * dh) + 2 * 2 * H * dh * T
fl_ffn = 2 * 3 * D * F * (K if E else 1) + (2 * E * D if E else 0)
fl = 3 * n0 * (fl_attn + fl_ffn) / tp + (3 * 2 * V * D if pp == 1 else 0)
comp = fl * tok * A / peak
assert abs(got["time_s"]["compute"] - comp) <= 1e-9 * comp, (got["time_s"]["compute"], comp)
print("ok", got["rank"]["params"], got["sent_bytes_step"]["total"])
PY
    then ok "$name: $(cat "$tmp/py")"; else bad "$name: $(cat "$tmp/py")"; fi
}

check llama7b_tp8 Llama-2-7b-hf.json --tp 8 --batch-size 1 --seq-len 4096 --act-type bf16 --weight-type bf16
check llama7b_dp4_zero1 Llama-2-7b-hf.json --dp 4 --zero 1 --batch-size 2 --grad-accum 3 --seq-len 1024
check llama7b_tp2_dp2 Llama-2-7b-hf.json --tp 2 --dp 2 --seq-len 512 --link-gbps 25 --latency-us 5
check mixtral_ep8 Mixtral-8x7B-v0.1.json --dp 8 --ep 8 --zero 1 --seq-len 2048
check mixtral_tp2_ep2 Mixtral-8x7B-v0.1.json --tp 2 --dp 4 --ep 2 --seq-len 256 --act-type bf16
check mistral_tp4 Mistral-7B-v0.1.json --tp 4 --seq-len 333

# the layout alone decides the figures: tp 1 dp 1 sends nothing
"$FFN" plan "$CFG/Llama-2-7b-hf.json" --json | /usr/bin/python3 -c '
import json, sys; j = json.load(sys.stdin)
assert j["sent_bytes_step"]["total"] == 0 and j["rank"]["params"] == j["total_params"]' &&
    ok "one rank: all parameters, nothing sent" || bad "one rank"

# decode: weights of a token / bandwidth; q4_0 reads 18/32 bytes a weight
"$FFN" plan "$CFG/Llama-2-7b-hf.json" --weight-type q4_0 --mem-gbps 33.5 --json | /usr/bin/python3 -c '
import json, sys; j = json.load(sys.stdin); d = j["decode"]
want = (6738415616 - 32000 * 4096) * 18 / 32
assert abs(d["bytes_rank"] - want) < 1, (d["bytes_rank"], want)
assert abs(d["token_s"] - want / 33.5e9) < 1e-12' && ok "decode estimate q4_0" || bad "decode estimate q4_0"

# refused layouts: every rank-count conflict names both numbers
expect 1 "--tp 3 does not divide the 32 attention heads" "$FFN" plan "$CFG/Llama-2-7b-hf.json" --tp 3
expect 1 "--tp 16 does not divide the 8 key/value heads" "$FFN" plan "$CFG/Mistral-7B-v0.1.json" --tp 16
expect 1 "--ep 16 is larger than the 8 experts" "$FFN" plan "$CFG/Mixtral-8x7B-v0.1.json" --ep 16 --dp 16
expect 1 "--ep 4 does not divide --dp 2" "$FFN" plan "$CFG/Mixtral-8x7B-v0.1.json" --ep 4 --dp 2
expect 1 "--ep 2: the model has no MoE layer" "$FFN" plan "$CFG/Llama-2-7b-hf.json" --ep 2 --dp 2
expect 1 "--pp 64 is larger than the 32 layers" "$FFN" plan "$CFG/Llama-2-7b-hf.json" --pp 64
expect 2 "--weight-type 'q5_9'" "$FFN" plan "$CFG/Llama-2-7b-hf.json" --weight-type q5_9
expect 2 "--tp: expected an integer" "$FFN" plan "$CFG/Llama-2-7b-hf.json" --tp 0
expect 1 "nope.json" "$FFN" plan "$tmp/nope.json"

# ---- the measured link (--link-json), cores shared (--host-cores), overlap ----
echo '{"bench": "link", "ranks": 2, "link_gbps": 2.5, "allreduce_1_us": 1.5, "latency_us": 0.75}' >"$tmp/link.json"
L7="$CFG/Llama-2-7b-hf.json"
pj() { "$FFN" plan "$L7" --seq-len 256 --json "$@"; }
if pj --dp 4 --link-json "$tmp/link.json" >"$tmp/a.json" 2>"$tmp/err" &&
   pj --dp 4 --link-gbps 2.5 --latency-us 0.75 >"$tmp/b.json" 2>>"$tmp/err" &&
   pj --dp 4 --link-gbps 2.5 --latency-us 0.75 --host-cores 2 --threads 1 >"$tmp/c.json" 2>>"$tmp/err" &&
   pj --dp 4 --link-gbps 2.5 --latency-us 0.75 --overlap 1 >"$tmp/d.json" 2>>"$tmp/err" &&
   /usr/bin/python3 - "$tmp" "$tmp/link.json" <<'PY' >"$tmp/py" 2>&1
import json, sys
a, b, c, d = (json.load(open("%s/%s.json" % (sys.argv[1], n))) for n in "abcd")
A = a["assumptions"]
assert A["link_gbps"] == 2.5 and A["latency_us"] == 0.75 and A["link_from"] == sys.argv[2], A
assert a["time_s"] == b["time_s"], (a["time_s"], b["time_s"])
assert b["time_s"]["step"] == b["time_s"]["step_serial"] and b["assumptions"]["overlap"] == 0
# 4 ranks of 1 thread on 2 cores: half the rate
assert c["assumptions"]["core_share"] == 0.5 and abs(c["time_s"]["compute"] / b["time_s"]["compute"] - 2) < 1e-12
t = d["time_s"]; bwd = 2 * t["compute"] / 3
want = t["compute"] - bwd + max(bwd, t["comm_dp"]) + t["comm"] - t["comm_dp"]
assert abs(t["step"] - want) <= 1e-12 * want and t["step"] < t["step_serial"], t
assert t["step_overlap"] <= t["step"]
print("link from the file, cores shared 2 of 4, overlap step %.4g s < serial %.4g s" % (t["step"], t["step_serial"]))
PY
then ok "$(cat "$tmp/py")"; else bad "link/cores/overlap: $(cat "$tmp/err" "$tmp/py" 2>/dev/null | head -c 600)"; fi
"$FFN" plan "$L7" --link-json "$tmp/link.json" --dp 2 | grep -q "link 2.500 GB/s, latency 0.75 us from $tmp/link.json" &&
    ok "the text says the link it used and where from" || bad "text: the link used"
echo '{"bench": "link", "ranks": 1, "link_gbps": 0, "latency_us": 0}' >"$tmp/one.json"
expect 1 "link_gbps 0: expected > 0" "$FFN" plan "$L7" --link-json "$tmp/one.json"
echo '{"bench": "peak"}' >"$tmp/peak.json"
expect 1 "no number \"link_gbps\"" "$FFN" plan "$L7" --link-json "$tmp/peak.json"
expect 1 "--link-json $tmp/nope.json: cannot read it" "$FFN" plan "$L7" --link-json "$tmp/nope.json"
expect 2 "--overlap" "$FFN" plan "$L7" --overlap 2
exit $fail
