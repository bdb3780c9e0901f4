#!/usr/bin/env bash
# bench_mem.sh -- peak RSS (KiB, /usr/bin/time %M) and the state bytes
# ffn train --json reports, per rank, for one process and the layouts
# --pp 2, --zero 2 --dp 2, --pp 2 --dp 2 (--zero 1), --ep 2, --ep 4, beside
# ffn plan's per-rank bytes (state_bytes etc. are rank 0's, the writer's).
# usage: bench/bench_mem.sh [FFN] (run from anywhere; prints one line a run)
# BENCH_MEM_ONLY="moe1 ep2 ep4": those runs and plans only (a plan needs
# its one-process run: one for the dense layouts, moe1 for the MoE ones).
set -uo pipefail
FFN="${1:-build/ffn}"; FFN="$(cd "$(dirname "$FFN")" && pwd)/$(basename "$FFN")"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; cd "$tmp" || exit 1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
D=(--seq-len 32 --hidden-size 256 --num-hidden-layers 4 --num-attention-heads 4 --intermediate-size 1024
   --tie-word-embeddings 0 --corpus en --steps 2 --eval-every 0 --eval-batches 1 --batch-size 2
   --grad-accum 2 --threads 1 --quiet --json)
M=("${D[@]}" --mlp-type moe --num-experts 8 --intermediate-size 512)
only() { [[ -z "${BENCH_MEM_ONLY:-}" || " $BENCH_MEM_ONLY " == *" $1 "* ]]; }
run() { # name np args...
    local name=$1 np=$2; shift 2
    only "$name" || return 0
    rm -f rss.*
    if ((np == 1)); then /usr/bin/time -f "%M" -o rss.0 "$FFN" train "$@" --out "o_$name" >"$name.json" 2>err
    else timeout 300 mpirun --oversubscribe -np "$np" sh -c 'exec /usr/bin/time -f "%M" -o "rss.$OMPI_COMM_WORLD_RANK" "$@"' \
        sh "$FFN" train "$@" --out "o_$name" >"$name.json" 2>err; fi || { echo "$name: FAILED $(tail -2 err)"; return; }
    local r="" k; for k in $(ls rss.* | sort -t. -k2 -n); do r="$r $(tail -1 "$k")"; done
    /usr/bin/python3 -c '
import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l); print("%-10s state %d grad %d opt %d | peak RSS KiB per rank:%s" % (sys.argv[2], j["state_bytes"], j.get("grad_bytes", j["state_bytes"]//4), j["optimizer_bytes"], sys.argv[3])); break' "$name.json" "$name" "$r"
}
plan() { # name args...
    local name=$1; shift
    only "$name" || return 0
    "$FFN" plan "$cfg" --seq-len 32 --batch-size 2 --grad-accum 2 --json "$@" 2>/dev/null | /usr/bin/python3 -c '
import json,sys; j=json.load(sys.stdin); m=j["memory_bytes"]
print("%-10s plan %s" % (sys.argv[1], " ".join("%s %d" % (k, v) for k, v in m.items())))' "$name"
}
run one 1 "${D[@]}"; cfg=o_one/config.json
run pp2 2 "${D[@]}" --pp 2
run zero2 2 "${D[@]}" --dp 2 --zero 2
run pp2dp2 4 "${D[@]}" --pp 2 --dp 2
run pp2dp2z1 4 "${D[@]}" --pp 2 --dp 2 --zero 1
plan one; plan pp2 --pp 2; plan zero2 --dp 2 --zero 2; plan pp2dp2 --pp 2 --dp 2; plan pp2dp2z1 --pp 2 --dp 2 --zero 1
run moe1 1 "${M[@]}"; cfg=o_moe1/config.json
run ep2 2 "${M[@]}" --dp 2 --ep 2
run ep4 4 "${M[@]}" --dp 4 --ep 4
plan moe1; plan ep2 --dp 2 --ep 2; plan ep4 --dp 4 --ep 4
