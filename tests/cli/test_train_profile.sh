#!/usr/bin/env bash
# test_train_profile.sh -- `ffn train --profile`: the parts of the step
# (include/ffn/profile.h) appear in the stderr table and as "profile" in the
# --json summary, every part that runs is timed (> 0), the parts add up to
# the step time measured around each step (within 3%), which is the time
# behind tokens_per_s; the products' FLOPs are the count from the shapes
# (6·N per weight of the projections, the FFN or the routed experts and the
# head); and without the flag nothing of it is printed.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
FFN_SHARED="${FFN_SHARED:-../shared}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
head -c 40000 "$FFN_SHARED/data/tinyshakespeare.txt" > "$tmp/data.txt"

"$FFN_BIN" train --help > "$tmp/help"
grep -q -- "--profile" "$tmp/help" || fail "train --help does not list --profile"

# D 48, 2 layers, 4 heads (2 kv), T 32, B 4: a few steps
model=(--hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --num-key-value-heads 2
       --seq-len 32 --batch-size 4 --steps 6 --eval-every 3 --eval-batches 2 --threads 2)

# ---- without --profile: nothing of it ----
"$FFN_BIN" train --data "$tmp/data.txt" "${model[@]}" --intermediate-size 80 \
    --out "$tmp/plain" --json >"$tmp/plain.json" 2>"$tmp/plain.err"
! grep -q '"profile"' "$tmp/plain.json" || fail "--json without --profile has a profile"
! grep -qiE 'profile|ffn_forward|attn_core' "$tmp/plain.err" || { cat "$tmp/plain.err"; fail "stderr without --profile mentions the profile"; }
echo "ok: no profile without the flag"

# check JSON D F K E : the summary's profile against the shapes
check() {
    /usr/bin/python3 - "$@" <<'PYEOF'
import json, sys
path, D, F, K, E, V = sys.argv[1], *map(int, sys.argv[2:6]), None
s = json.load(open(path))
p = s.get("profile")
if not p:
    sys.exit(f"{path}: no profile object in the --json summary")
parts = ["ffn_forward", "ffn_backward", "attn_proj", "attn_core", "norm", "embed_head",
         "optimizer", "data", "other", "weight_pack"]
secs = p["seconds"]
if sorted(secs) != sorted(parts):
    sys.exit(f"parts {sorted(secs)}, expected {sorted(parts)}")
for k in parts:
    if secs[k] < 0:
        sys.exit(f"{k}: {secs[k]} s is negative")
for k in ["ffn_forward", "ffn_backward", "attn_proj", "attn_core", "norm", "embed_head", "optimizer"]:
    if not secs[k] > 0:
        sys.exit(f"{k}: {secs[k]} s: a part that runs every step was not timed")
total, step = sum(secs.values()), p["step_seconds"]
if abs(total - step) > 0.03 * step:
    sys.exit(f"the parts sum to {total:.6f} s, the steps took {step:.6f} s (more than 3% apart)")
if p["steps"] != s["steps_done"]:
    sys.exit(f"profile steps {p['steps']}, steps_done {s['steps_done']}")
B, T = 4, 32
tok_time = p["steps"] * B * T / s["tokens_per_s"]
if abs(tok_time - step) > 0.03 * step + 1e-3:
    sys.exit(f"step_seconds {step:.6f} but tokens/tokens_per_s gives {tok_time:.6f}")
if step > s["seconds"]:
    sys.exit(f"step_seconds {step} exceeds the run's {s['seconds']} s")
# the products' FLOPs from the shapes: vocab from params (tied head)
L, H, G, Dh = 2, 4, 2, D // 4
C = (H + 2 * G) * Dh
per_layer_attn = C * D + D * H * Dh
if E:
    ffn = E * D + K * 3 * F * D
    ffn_params = E * D + E * 3 * F * D
else:
    ffn = 3 * F * D
    ffn_params = 3 * F * D
norms = 2 * D
Vocab = (s["params"] - L * (per_layer_attn + ffn_params + norms) - D) // D
want = 6 * p["steps"] * B * T * (L * (per_layer_attn + ffn) + Vocab * D)
if abs(p["product_flops"] - want) > 1e-6 * want:
    sys.exit(f"product_flops {p['product_flops']:.6g}, expected {want:.6g} (V {Vocab})")
if not p["product_seconds"] > 0 or p["product_seconds"] > step:
    sys.exit(f"product_seconds {p['product_seconds']} outside (0, {step}]")
g = p["product_flops"] / p["product_seconds"] * 1e-9
if abs(g - p["product_gflops"]) > 0.01 * g + 0.01:
    sys.exit(f"product_gflops {p['product_gflops']}, flops/seconds gives {g:.2f}")
if p["fma_peak_gflops"] is not None and not p["fma_peak_gflops"] > 0:
    sys.exit(f"fma_peak_gflops {p['fma_peak_gflops']}")
print(f"ok: {path.split('/')[-1]}: parts {total:.4f} s of {step:.4f} s, "
      f"{p['product_flops']:.4g} product FLOPs, {p['product_gflops']} GFLOP/s")
PYEOF
}

# ---- dense SwiGLU ----
"$FFN_BIN" train --data "$tmp/data.txt" "${model[@]}" --intermediate-size 80 \
    --out "$tmp/dense" --json --profile >"$tmp/dense.json" 2>"$tmp/dense.err"
check "$tmp/dense.json" 48 80 0 0 || { cat "$tmp/dense.json"; fail "dense profile"; }
for part in ffn_forward ffn_backward attn_proj attn_core norm embed_head optimizer data other weight_pack sum; do
    grep -qE "^  $part +[0-9.]+ +[0-9.]+%" "$tmp/dense.err" || { cat "$tmp/dense.err"; fail "table: no row $part"; }
done
grep -q "GFLOP/s" "$tmp/dense.err" || fail "table: no GFLOP/s line"

# ---- MoE: top-2 of 4 experts of width 40 ----
"$FFN_BIN" train --data "$tmp/data.txt" "${model[@]}" --mlp-type moe --num-experts 4 \
    --num-experts-per-tok 2 --moe-intermediate-size 40 \
    --out "$tmp/moe" --json --profile >"$tmp/moe.json" 2>"$tmp/moe.err"
check "$tmp/moe.json" 48 40 2 4 || { cat "$tmp/moe.json"; fail "moe profile"; }

# ---- without --json: the table on stderr, stdout the one summary line ----
"$FFN_BIN" train --data "$tmp/data.txt" "${model[@]}" --intermediate-size 80 --quiet \
    --out "$tmp/text" --profile >"$tmp/text.out" 2>"$tmp/text.err"
[[ $(wc -l <"$tmp/text.out") -eq 1 ]] || { cat "$tmp/text.out"; fail "stdout is not one summary line"; }
grep -q "^ffn train: profile of 6 steps" "$tmp/text.err" || { cat "$tmp/text.err"; fail "no table on stderr"; }
echo "ok: table on stderr"
echo "all train --profile tests passed"
