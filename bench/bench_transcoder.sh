#!/usr/bin/env bash
# bench_transcoder.sh -- transcoder training steps per second, ffn against
# PyTorch (bench/torch_transcoder.py: the same objective, float32, autograd,
# torch.optim.Adam) on the same rows and weights, the same threads,
# alternating the two ROUNDS times (a loaded machine: read the ratios).
# Shapes: the facts model's layer (D 128, F 344): Fp = 4F = 1376, k 16,
# n = 1024 rows a step (B 8 x T 128); override with N D FP K.
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
for r in $(seq "$rounds"); do
    c=$("$FFN_BIN" transcoder step "$tmp/in.st" "$tmp/out.st" --steps "$steps" --threads "$threads")
    t=$(/usr/bin/python3 bench/torch_transcoder.py run "$tmp/in.st" "$steps" "$threads")
    /usr/bin/python3 - "$c" "$t" <<'PY'
import json, sys
c, t = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("ffn %9.0f rows/s   torch %9.0f rows/s   ratio %.2fx"
      % (c["rows_per_s"], t["rows_per_s"], c["rows_per_s"] / t["rows_per_s"]))
PY
done
