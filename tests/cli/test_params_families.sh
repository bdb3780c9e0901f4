#!/usr/bin/env bash
# test_params_families.sh -- `ffn params` on the families beyond Llama:
# published totals and active counts (tests/data/configs, each number's
# source in include/ffn/params.h), and the memory estimates of text and
# --json recomputed here from the printed counts and the architecture:
# weight bytes per format (ggml bytes per block), the KV cache per token
# (GQA / MQA through num_key_value_heads), the decode bound for
# --bandwidth, and bad --bandwidth values.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
CFG="$ROOT/tests/data/configs"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# check CONFIG TOTAL ACTIVE SEQ BANDWIDTH: counts and every memory field
check() {
    if ! "$FFN_BIN" params "$CFG/$1.json" --json --seq-len "$4" --bandwidth "$5" >"$tmp/j.json"; then
        bad "$1: ffn params failed"; return
    fi
    if /usr/bin/python3 - "$tmp/j.json" "$CFG/$1.json" "$2" "$3" "$4" "$5" <<'PY'
import json, math, sys
r, c = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
total, active, T, bw = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
errs = []
if r["total_params"] != total or r["active_params"] != active:
    errs.append(f"total {r['total_params']} active {r['active_params']}, published {total} {active}")
mt = c["model_type"]
D, L, H = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
G = c.get("num_key_value_heads", H)
hd = c.get("head_dim") or {"gemma": 256, "qwen3": 128}.get(mt) or D // H
m = r["memory"]
kv = L * G * 2 * hd
if m["kv_elements_per_token"] != kv or m["kv_bytes_per_token_f16"] != 2 * kv or \
        m["kv_bytes_per_token_f32"] != 4 * kv or m["kv_bytes_f16_at_seq_len"] != 2 * kv * T:
    errs.append(f"kv cache {m}")
block = {"f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "q8_0": (32, 34), "q4_0": (32, 18),
         "q4_K": (256, 144), "q6_K": (256, 210), "q4_1": (32, 20), "q5_0": (32, 22),
         "q5_1": (32, 24), "iq4_nl": (32, 18), "q2_K": (256, 84), "q3_K": (256, 110),
         "q5_K": (256, 176), "iq4_xs": (256, 136)}
p, a = r["params"], r["active"]
read = a["total"] - a["embed_token"] - a["embed_position"] - a["embed_token_type"]
if c.get("tie_word_embeddings", mt == "gemma"):
    read += a["embed_token"]
if sorted(f["format"] for f in m["formats"]) != sorted(block):
    errs.append("formats " + str([f["format"] for f in m["formats"]]))
for f in m["formats"]:
    n, b = block[f["format"]]
    per, nb = b / n, (4.0 if n > 1 else b / n)
    wb = math.ceil((p["total"] - p["norms"]) * per + p["norms"] * nb)
    rb = math.ceil((read - a["norms"]) * per + a["norms"] * nb) + 2 * kv * T
    tps = bw * 1e9 / rb
    if f["weight_bytes"] != wb or f["read_bytes_per_token"] != rb or \
            abs(f["decode_tokens_per_s"] - tps) > 1e-9 * tps or abs(f["bits_per_weight"] - 8 * per) > 1e-12:
        errs.append(f"{f['format']}: {f} expected weight {wb} read {rb} tok/s {tps:.6g}")
if m["bandwidth_gbs"] != bw:
    errs.append(f"bandwidth {m['bandwidth_gbs']}")
print("\n".join(errs))
sys.exit(1 if errs else 0)
PY
    then ok "$1: total $2, active $3, memory estimates at T=$4, $5 GB/s"
    else bad "$1: see above"; fi
}

check gemma-2b 2506172416 2506172416 8192 20
check phi-3-mini 3821079552 3821079552 4096 51.2
check qwen3-0.6b 596049920 596049920 2048 20
check olmoe-1b-7b 6919161856 1282017280 4096 100

# the default bandwidth is 20 GB/s, and the text report has the same table
"$FFN_BIN" params "$CFG/qwen3-0.6b.json" --json >"$tmp/d.json"
if /usr/bin/python3 -c "import json,sys; sys.exit(json.load(open('$tmp/d.json'))['memory']['bandwidth_gbs'] != 20)"; then
    ok "default --bandwidth 20 GB/s"
else bad "default --bandwidth"; fi
"$FFN_BIN" params "$CFG/olmoe-1b-7b.json" --bandwidth 40 >"$tmp/t.txt"
if grep -q "memory (estimates; KV cache f16, 40 GB/s" "$tmp/t.txt" && grep -qE "^  q4_K +4.5 " "$tmp/t.txt" &&
   grep -q "KV cache per token 131,072 bytes" "$tmp/t.txt"; then
    ok "text report: memory table (q4_K 4.5 bits, OLMoE KV 16 layers x 16 heads x 2 x 128 x 2 bytes)"
else bad "text report memory table"; cat "$tmp/t.txt"; fi

# bad --bandwidth: usage errors, exit 2, nothing on stdout
for v in 0 -5 abc; do
    rc=0
    "$FFN_BIN" params "$CFG/qwen3-0.6b.json" --bandwidth "$v" >"$tmp/o" 2>"$tmp/e" || rc=$?
    if [[ $rc -eq 2 && ! -s "$tmp/o" ]] && grep -q -- "--bandwidth" "$tmp/e"; then ok "--bandwidth $v refused (exit 2)"
    else bad "--bandwidth $v: exit $rc"; cat "$tmp/e"; fi
done
exit $fail
