#!/usr/bin/env bash
# bench_transcoder.sh -- transcoder training steps per second, ffn against
# PyTorch (bench/torch_transcoder.py: the same objective, float32, autograd,
# torch.optim.Adam) on the same rows and weights, the same threads,
# alternating the two ROUNDS times (a loaded machine: read the ratios).
# Shapes: the facts model's layer (D 128, F 344): Fp = 4F = 1376, k 16,
# n = 1024 rows a step (B 8 x T 128); override with N D FP K.
# Each ffn round runs with --profile: the dense products (the encoder's
# x W_enc^T, n·Fp·D multiply-adds a step) in GFLOP/s, their share of the
# fp32 FMA peak measured in the same process after the steps (the code of
# `ffn bench peak`, printed once before the rounds as well) and of the step
# time (the rest is TopK and the sparse decoder and gradients, O(n·k·D)).
# Usage: bench/bench_transcoder.sh [threads] [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
FFN_BIN="${FFN_BIN:-build/ffn}"
threads="${1:-2}" steps="${2:-50}" rounds="${ROUNDS:-3}"
N="${N:-1024}" D="${D:-128}" FP="${FP:-1376}" K="${K:-16}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 bench/torch_transcoder.py make "$tmp/in.st" "$N" "$D" "$FP" "$K"
echo "n $N, D $D, Fp $FP, k $K; $steps steps; $threads threads"
uptime | sed 's/^/load before: /'
"$FFN_BIN" bench peak --threads "$threads"
for r in $(seq "$rounds"); do
    c=$("$FFN_BIN" transcoder step "$tmp/in.st" "$tmp/out.st" --steps "$steps" --threads "$threads" --profile)
    t=$(/usr/bin/python3 bench/torch_transcoder.py run "$tmp/in.st" "$steps" "$threads")
    /usr/bin/python3 - "$c" "$t" <<'PY'
import json, sys
c, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
p = c["profile"]
print("ffn %9.0f rows/s   torch %9.0f rows/s   ratio %.2fx   products %6.1f GFLOP/s = %4.1f%% "
      "of the %.1f GFLOP/s FMA peak, %4.1f%% of the step"
      % (c["rows_per_s"], t["rows_per_s"], c["rows_per_s"] / t["rows_per_s"], p["product_gflops"],
         p["product_pct_peak"] or float("nan"), p["fma_peak_gflops"] or float("nan"),
         100 * p["product_share_of_step"]))
PY
done
uptime | sed 's/^/load after: /'
