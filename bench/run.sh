#!/usr/bin/env bash
# bench/run.sh -- `make bench`: ffn beside PyTorch and beside the roofline.
#
# One process run per peer and shape: `ffn bench layer --json` and
# `bench/torch_layer.py --json` (/usr/bin/python3, Debian's python3-torch),
# the same thread count for both.  The roofline comes from the same run:
# `ffn bench peak` (FMA GFLOP/s) and, per shape, `ffn bench bandwidth --mb
# M` with M the layer's weight bytes: the bandwidth is measured the way the
# layer reads -- the same number of bytes, read again and again, best of
# the passes, as the layer's timed repeats read its (by then warm) weights.
# (One 1 GiB buffer far beyond the caches measured DRAM instead, slower
# than a layer whose weights stay in the cache, and gave roofline shares
# above 100%.)  A shape's roofline time is max(FLOPs / peak, bytes /
# bandwidth) where bytes are the weights read once (forward) or, for
# forward+backward, read twice plus the weight gradients read and written
# (4x).
#
# Shapes: SwiGLU (D, F) = (1024, 2816) and (4096, 11008) at N = 1, 8, 64,
# 512, forward and forward+backward; GELU dense (1024, 4096) at the same N.
# Then every other bench/bench_*.sh (e.g. the MoE one), each named before
# it runs.  Two of them reach beyond this tree, and say so first:
# bench_llamacpp.sh installs node-llama-cpp (npm ci into build/npm-llamacpp,
# from its lock file) and runs llama.cpp's prebuilt CPU binary beside ffn;
# bench_tokenize.sh installs @lenml/tokenizers (npm ci into
# build/npm-tokenizers).  BENCH_SKIP="llamacpp tokenize" leaves them out.
#
# Environment:
#   BENCH_THREADS  threads for every peer (default 2)
#   BENCH_QUICK=1  skip the (4096, 11008) shape (full run: ~5 min on 2 cores)
#   BENCH_REPEATS  timed repeats per measurement (default: ~0.5 s worth, 3..50)
#   BENCH_OUT      also write the JSON lines here (default build/bench/layer.jsonl)
#   BENCH_SKIP     names of bench/bench_NAME.sh scripts not to run (e.g. "llamacpp tokenize")
# Run it on an otherwise idle machine: the numbers mean nothing under load.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
T=${BENCH_THREADS:-2}
OUT=${BENCH_OUT:-build/bench/layer.jsonl}
mkdir -p "$(dirname "$OUT")"
: >"$OUT"
rep=()
[[ -n "${BENCH_REPEATS:-}" ]] && rep=(--repeats "$BENCH_REPEATS")

src_bin=${FFN_BIN:-build/ffn}
[[ -x "$src_bin" ]] || { echo "bench/run.sh: $src_bin not built (run make)" >&2; exit 1; }
# run a private copy (statically linked to libffn), so that a rebuild
# during the run cannot pull the binary away
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src_bin" "$tmp/ffn"
FFN=$tmp/ffn
have_torch=1
$PY -c 'import torch' 2>/dev/null || { have_torch=0; echo "bench/run.sh: PyTorch not found; ffn only" >&2; }

echo "ffn $($FFN version | head -1 | cut -d' ' -f2), simd $($FFN version | sed -n 's/^simd //p'), $T threads, $(date -u +%FT%TZ)"
# what this run will do, before it does it
skip=" ${BENCH_SKIP:-} "
scripts=()
for b in bench/bench_*.sh; do
    n=$(basename "$b" .sh); n=${n#bench_}
    [[ "$skip" == *" $n "* ]] || scripts+=("$b")
done
echo "make bench: ffn bench layer beside PyTorch and the roofline, then ${#scripts[@]} scripts: ${scripts[*]}"
for b in "${scripts[@]}"; do
    case "$b" in
        *bench_llamacpp.sh) echo "  $b installs node-llama-cpp with npm (npm ci into build/npm-llamacpp) and runs llama.cpp beside ffn" ;;
        *bench_tokenize.sh) echo "  $b installs @lenml/tokenizers with npm (npm ci into build/npm-tokenizers)" ;;
    esac
done
echo "  (BENCH_SKIP=\"llamacpp tokenize\" leaves those out)"
uptime | sed 's/^/load: /'
# PyTorch from Debian takes its BLAS from the libblas.so.3 alternative: the
# reference BLAS (libblas3) is ~50x slower than OpenBLAS, so say which it is.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
echo "PyTorch's BLAS: $blas"
[[ "$blas" == */blas/libblas.so.3 ]] &&
    echo "  (the reference BLAS: install libopenblas0-pthread for a realistic PyTorch peer)"

$FFN bench peak --threads "$T" --json | tee -a "$OUT"
$FFN bench bandwidth --threads "$T" --json | tee -a "$OUT"

shapes=("swiglu 1024 2816" "gelu 1024 4096")
[[ "${BENCH_QUICK:-0}" == 1 ]] || shapes+=("swiglu 4096 11008")
for shape in "${shapes[@]}"; do
    read -r type D F <<<"$shape"
    # the bandwidth of reading this layer's weights, as the layer reads them
    wb=$($FFN bench layer --type "$type" --hidden "$D" --intermediate "$F" --tokens 1 --repeats 1 \
        --threads "$T" --json | $PY -c 'import json,sys; print(json.load(sys.stdin)["weight_bytes"])')
    mb=$(( (wb + 1048575) / 1048576 ))
    $FFN bench bandwidth --mb "$mb" --threads "$T" --json |
        sed "s/^{/{\"shape\": \"$type $D $F\", /" | tee -a "$OUT"
    for N in 1 8 64 512; do
        echo "== $type D=$D F=$F N=$N" >&2
        $FFN bench layer --type "$type" --hidden "$D" --intermediate "$F" --tokens "$N" \
            --threads "$T" "${rep[@]}" --json | sed 's/^{/{"peer": "ffn", /' >>"$OUT"
        if ((have_torch)); then
            $PY bench/torch_layer.py --type "$type" --hidden "$D" --intermediate "$F" \
                --tokens "$N" --threads "$T" "${rep[@]}" --json >>"$OUT"
        fi
    done
done

$PY - "$OUT" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
peak = next(r["gflops"] for r in rows if r.get("bench") == "peak")
bw_dram = next(r["gbps"] for r in rows if r.get("bench") == "bandwidth" and "shape" not in r)
bw_shape = {r["shape"]: r["gbps"] for r in rows if r.get("bench") == "bandwidth" and "shape" in r}
layers = [r for r in rows if r.get("bench") == "layer"]
print(f"\nroofline: FMA peak {peak:.1f} GFLOP/s; read bandwidth {bw_dram:.1f} GB/s from DRAM (1 GiB), and per "
      "shape reading a buffer the size of its weights: " +
      ", ".join(f"{k} {v:.1f} GB/s" for k, v in bw_shape.items()))
print("times are the minimum over repeats (ms); speedup = PyTorch / ffn; "
      "roofline% = roofline time / ffn time")
hdr = (f"{'layer':<8}{'D':>6}{'F':>7}{'N':>5}  {'pass':<8}{'ffn ms':>10}{'GFLOP/s':>9}"
       f"{'torch ms':>10}{'speedup':>9}{'roof ms':>9}{'roofline%':>10}  bound")
print(hdr)
print("-" * len(hdr))
key = lambda r: (r["type"], r["hidden"], r["intermediate"], r["tokens"])
torch_by = {key(r): r for r in layers if r.get("peer") == "pytorch"}
over = False
for r in layers:
    if r.get("peer") != "ffn":
        continue
    t = torch_by.get(key(r))
    for p, mult in (("forward", 1), ("forward_backward", 4)):
        ms = r[p]["min_ms"]
        flops = r["flops_forward"] * (1 if p == "forward" else 3)
        t_flop = flops / (peak * 1e9) * 1e3
        bw = bw_shape.get(f"{r['type']} {r['hidden']} {r['intermediate']}", bw_dram)
        t_mem = mult * r["weight_bytes"] / (bw * 1e9) * 1e3
        roof = max(t_flop, t_mem)
        tm = t[p]["min_ms"] if t else float("nan")
        print(f"{r['type']:<8}{r['hidden']:>6}{r['intermediate']:>7}{r['tokens']:>5}  "
              f"{'fwd' if p == 'forward' else 'fwd+bwd':<8}{ms:>10.3f}{r[p]['gflops']:>9.1f}"
              f"{tm:>10.3f}{tm / ms:>9.2f}{roof:>9.3f}{100 * roof / ms:>9.1f}%  "
              f"{'memory' if t_mem > t_flop else 'compute'}{'  (!)' if roof > ms else ''}")
        over = over or roof > ms
if over:
    print("(!) faster than its roofline: the peak or the bandwidth measured lower than what the layer "
          "reached -- another job on the machine during their measurement?")
PYEOF

export FFN_BIN="$FFN"   # the private copy, for the other scripts too
for b in "${scripts[@]}"; do
    [[ -f "$b" ]] || continue
    echo
    echo "== $b"
    bash "$b"
done
