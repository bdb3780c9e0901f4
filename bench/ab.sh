#!/usr/bin/env bash
# bench/ab.sh OLD_FFN NEW_FFN -- the same benchmarks on two builds of ffn in
# one run, interleaved (old, new, old, new, ...), so that both see the same
# machine and the same load; prints new / old time ratios.
#
#   layer  `ffn bench layer` forward and forward+backward, SwiGLU 1024x2816
#          and 4096x11008 at N = 1, 8, 64, 512 (median over repeats)
#   moe    `ffn bench moe` 8 experts top-2, D 1024, Fe 1408, N = 1, 512
#   train  `ffn train` tokens/s on the built-in corpus (D 128, 4 layers)
#
# Build the old one with e.g.
#   git worktree add /tmp/ffn-old HEAD~1 && make -C /tmp/ffn-old -j2 build/ffn
# Environment: AB_ROUNDS (default 3) rounds of each pair; AB_QUICK=1 skips
# the 4096x11008 shape; BENCH_THREADS (default 2).
# Medians (new/old) and fastest runs (min/min); an even AB_ROUNDS gives
# each side as many first places. A ratio of 1.00 is no change; within +-5% is the noise of this machine
# kind on a quiet machine (measured by running the same binary as both).
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: bench/ab.sh OLD_FFN NEW_FFN" >&2; exit 2; }
cd "$(dirname "$0")/.."
T=${BENCH_THREADS:-2}
R=${AB_ROUNDS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$1" "$tmp/old"; cp "$2" "$tmp/new" # private copies: a rebuild cannot pull them away
out=$tmp/ab.jsonl
: >"$out"
echo "ab: old $1, new $2, $T threads, $R rounds, $(date -u +%FT%TZ)"
uptime | sed 's/^/load: /'

one() { # which, label, command...
    local which=$1 label=$2; shift 2
    "$tmp/$which" "$@" --threads "$T" --json 2>/dev/null | tr -d '\n' |
        sed "s/^{/{\"which\": \"$which\", \"label\": \"$label\", /; s/\$/\n/" >>"$out"
}

shapes=("1024 2816")
[[ "${AB_QUICK:-0}" == 1 ]] || shapes+=("4096 11008")
for ((r = 0; r < R; r++)); do
    # old first in even rounds, new first in odd ones: neither always runs
    # on the other's warm caches and pages
    pair="old new"; ((r % 2)) && pair="new old"
    for s in "${shapes[@]}"; do
        read -r D F <<<"$s"
        for N in 1 8 64 512; do
            for w in $pair; do
                one "$w" "layer swiglu ${D}x$F N=$N" bench layer --type swiglu --hidden "$D" \
                    --intermediate "$F" --tokens "$N"
            done
        done
    done
    for N in 1 512; do
        for w in $pair; do
            one "$w" "moe 8x top-2 1024x1408 N=$N" bench moe --experts 8 --top-k 2 \
                --hidden 1024 --intermediate 1408 --tokens "$N"
        done
    done
    for w in $pair; do
        d=$tmp/run-$w
        "$tmp/$w" train --corpus en --corpus-sentences 2000 --steps 60 --hidden-size 128 --num-hidden-layers 4 \
            --seq-len 64 --batch-size 16 --eval-every 0 --threads "$T" --out "$d" --force \
            --quiet --json >"$tmp/train-$w.json" 2>/dev/null || true
        /usr/bin/python3 - "$tmp/train-$w.json" "$w" >>"$out" <<'PYEOF'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
tps = s.get("tokens_per_s") or s.get("train_tokens_per_s")
if tps:
    print(json.dumps({"which": sys.argv[2], "label": "train D128 L4 T64 B16",
                      "train": {"median_ms": 1e6 / tps}}))
PYEOF
    done
done

/usr/bin/python3 - "$out" <<'PYEOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    src = r.get("moe", r)  # ffn bench moe nests its times (in s) under "moe"
    for part in ("forward", "forward_backward", "train"):
        p = src.get(part)
        if not p:
            continue
        ms = p.get("median_ms", p["median_s"] * 1e3 if "median_s" in p else None)
        if ms is not None:
            by.setdefault((r["label"], part), {}).setdefault(r["which"], []).append(ms)
print(f"\n{'benchmark':<34}{'pass':<18}{'old ms':>10}{'new ms':>10}{'new/old':>9}{'min/min':>9}")
ratios = []
for (label, part), d in by.items():
    if "old" not in d or "new" not in d:
        continue
    o, n = statistics.median(d["old"]), statistics.median(d["new"])
    unit = "ms/ktok" if part == "train" else "ms"
    ratios.append(n / o)
    print(f"{label:<34}{part:<18}{o:>10.3f}{n:>10.3f}{n / o:>9.3f}{min(d['new']) / min(d['old']):>9.3f}" +
          ("  (ms per 1000 tokens)" if part == "train" else ""))
if ratios:
    g = statistics.geometric_mean(ratios)
    print(f"\ngeometric mean new/old over {len(ratios)} measurements: {g:.3f}; "
          f"range {min(ratios):.3f} .. {max(ratios):.3f}")
PYEOF
