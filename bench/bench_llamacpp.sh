#!/usr/bin/env bash
# bench_llamacpp.sh -- ffn beside llama.cpp on the same GGUF files, the same
# token ids and the same thread counts, in one run: prompt tokens/s (one
# evaluation of P = 512 ids) and decode tokens/s (G single-id steps after a
# C = 128-id context), the ratio ffn / llama.cpp, and decode's effective
# read bandwidth (bytes read per token × tokens/s) against `ffn bench
# bandwidth` measured in the same run at the same thread count; prompt
# GFLOP/s (the weight products) against `ffn bench peak` (fp32 FMA for f32
# files, bf16 otherwise).
#
# Models (random weights, llama architecture, vocabulary 32000 byte/unused
# tokens, written by bench/gguf_random.c through ffn's GGUF writer):
#   dense  Llama-3.2-1B-shaped: D 2048, F 8192, 16 layers (BENCH_QUICK=1: 8,
#          the 0.62 B shape), 32 heads, 8 KV heads, tied head;
#   moe    Mixtral-shaped: D 1024, 8 experts top-2 of F 3584, 8 layers, 16
#          heads, 4 KV heads, untied head;
# each in f32 f16 bf16 q8_0 q4_0 q4_K (BENCH_TYPES overrides).  Files live in
# $BENCH_DIR (default build/bench, outside the tree) and are reused while
# their recipe hash (generator source, ffn's GGUF writer sources, shape,
# type) matches.
#
# What is timed on each side (the same ids: seeded, in [3, 256)):
#   ffn        `ffn bench model` (tools/cmd_bench_model.c): prompt =
#              ffn_model_prefill of P ids (logits of the last), best of R;
#              decode = C ids prefilled, then G ffn_model_step calls (logits
#              every step), G / their total time.
#   llama.cpp  bench/llamacpp_speed.mjs (node-llama-cpp 3.21.1's prebuilt CPU
#              binary): prompt = one controlledEvaluate of P ids as one batch
#              (batchSize = ubatch = P), the last id's logits sampled
#              greedily, best of R; decode = C ids evaluated, then G
#              single-id controlledEvaluate calls, each with its logits and a
#              greedy sample.  Wall clock around each call (node's own call
#              overhead included: ~0.5 ms a call, see the file).  KV cache
#              f16 (its default), flash attention off, weights mmapped.
# Bytes per decoded token are ffn's count (every weight once, the embedding
# one row unless tied, experts K of E, plus the KV rows read), used for both
# engines.
#
#   bash bench/bench_llamacpp.sh            (about 10 minutes once the files exist)
#   BENCH_QUICK=1 bash bench/bench_llamacpp.sh   (8-layer dense shape, shorter runs)
# BENCH_FFN_OLD=PATH also times another build of ffn (e.g. main before a
# change) right before this one on every file and thread count: its
# prompt and decode tokens/s and new / old, in the same run and load.
# Env: BENCH_TYPES, BENCH_THREADS (default "1 2"), BENCH_MODELS (default
# "dense moe"; tiny and tinymoe are small smoke-test shapes), BENCH_PROMPT
# (default 512), BENCH_GEN (default 32, quick 16), BENCH_DIR, FFN_NPM_DIR (default build/npm-llamacpp).
# Needs build/ffn and build/libffn.a (make all), node and npm.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FFN="${FFN_BIN:-$ROOT/build/ffn}"
OLD="${BENCH_FFN_OLD:-}"
PY=/usr/bin/python3
NPM_DIR="${FFN_NPM_DIR:-$ROOT/build/npm-llamacpp}"
DIR="${BENCH_DIR:-$ROOT/build/bench}"
QUICK="${BENCH_QUICK:-0}"
TYPES="${BENCH_TYPES:-f32 f16 bf16 q8_0 q4_0 q4_K}"
THREADS="${BENCH_THREADS:-1 2}"
MODELS="${BENCH_MODELS:-dense moe}"
P="${BENCH_PROMPT:-512}" C=128
if [[ $QUICK == 1 ]]; then G=16 R=1 DENSE_L=8; else G=32 R=1 DENSE_L=16; fi
G="${BENCH_GEN:-$G}"
mkdir -p "$DIR"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- llama.cpp: node-llama-cpp installed as tests/cli/test_llamacpp.sh does
command -v node >/dev/null || { echo "bench_llamacpp: node is not installed (scripts/setup.sh)"; exit 1; }
mkdir -p "$NPM_DIR"
if ! cmp -s "$ROOT/tests/llamacpp/package-lock.json" "$NPM_DIR/package-lock.json" ||
   [[ ! -d "$NPM_DIR/node_modules/node-llama-cpp" ]]; then
    cp "$ROOT/tests/llamacpp/package.json" "$ROOT/tests/llamacpp/package-lock.json" "$NPM_DIR/"
    echo "installing node-llama-cpp into $NPM_DIR" >&2
    (cd "$NPM_DIR" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --ignore-scripts --no-audit \
        --no-fund >"$tmp/npm.log" 2>&1) || { tail -n 20 "$tmp/npm.log"; exit 1; }
fi
cp "$ROOT/bench/llamacpp_speed.mjs" "$NPM_DIR/llamacpp_speed.mjs"

# ---- the files
cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" "$ROOT/bench/gguf_random.c" \
   "$ROOT/build/libffn.a" -ldnnl -fopenmp -lm -lpthread -lpcre2-8 -o "$tmp/gguf_random"
recipe_src=$(cat "$ROOT/bench/gguf_random.c" "$ROOT/src/load/gguf_model.c" "$ROOT/src/format/gguf.c" \
             "$ROOT/src/kernels/quant.c" | sha256sum | cut -c1-16)
# shape NAME -> "D F L H G V E K TIED"
shape() {
    case "$1" in
    dense) echo "2048 8192 $DENSE_L 32 8 32000 0 0 1" ;;
    moe) echo "1024 3584 8 16 4 32000 8 2 0" ;;
    tiny) echo "256 512 2 4 2 1000 0 0 1" ;;        # smoke tests of this script
    tinymoe) echo "256 256 2 4 2 1000 4 2 0" ;;
    *) echo "bench_llamacpp: unknown model $1 (dense, moe, tiny, tinymoe)" >&2; exit 2 ;;
    esac
}
# ensure NAME TYPE -> prints the file, writing it unless its recipe matches
ensure() {
    local s; s=$(shape "$1")
    local f="$DIR/$1_L$(echo "$s" | cut -d' ' -f3)_$2.gguf"
    local key; key=$(echo "$recipe_src $s $2 seed 1" | sha256sum | cut -c1-32)
    if [[ -f "$f" && -f "$f.recipe" && "$(cat "$f.recipe")" == "$key $(stat -c %s "$f")" ]]; then
        echo "$f"; return
    fi
    echo "writing $f ($s $2)" >&2
    rm -f "$f.recipe"
    # shellcheck disable=SC2086
    "$tmp/gguf_random" "$f" "$2" $s 1 >&2
    echo "$key $(stat -c %s "$f")" > "$f.recipe"
    echo "$f"
}

ids=$("$PY" -c "import random; r = random.Random(7); print(' '.join(str(r.randrange(3, 256)) for _ in range(max($P, $C + $G))))")
results="$DIR/llamacpp_results.jsonl"
: > "$results"
j() { "$PY" -c 'import json,sys; print(json.loads(sys.argv[2])[sys.argv[1]])' "$1" "$2"; }

echo "ffn vs llama.cpp (node-llama-cpp 3.21.1), same GGUF, same ids; prompt $P ids, decode $G steps after $C"
echo "($(date -u +%FT%TZ), $(nproc) cores; BENCH_QUICK=$QUICK)"
for T in $THREADS; do
    bw=$(j gbps "$(FFN_NUM_THREADS=$T "$FFN" bench bandwidth --threads "$T" --json)")
    pk=$(FFN_NUM_THREADS=$T "$FFN" bench peak --threads "$T" --json)
    fma=$(j gflops "$pk"); bf16=$(j bf16_gflops "$pk")
    [[ $bf16 == None ]] && bf16=n/a # a CPU without AVX512_BF16: no bf16 peak, no %peak against it
    echo
    echo "threads $T: read bandwidth $bw GB/s, fp32 FMA peak $fma GFLOP/s, bf16 peak $bf16$([[ $bf16 == n/a ]] || echo " GFLOP/s")"
    printf '%-12s %-5s | %9s %9s %6s %6s | %8s %8s %6s | %7s %5s %7s %5s\n' model type \
        "pp ffn" "pp llama" ratio "%peak" "tg ffn" "tg llama" ratio "GB/s" "%bw" "llamaGB" "%bw"
    [[ -z $OLD ]] || printf '%-12s %-5s | %9s %9s %6s | %8s %8s %6s\n' "" "" "pp old" "pp new" new/old \
        "tg old" "tg new" new/old
    for name in $MODELS; do
        for ty in $TYPES; do
            f=$(ensure "$name" "$ty")
            o='{}'
            [[ -z $OLD ]] || o=$(FFN_NUM_THREADS=$T "$OLD" bench model "$f" --prompt-tokens $P --context $C \
                --gen $G --repeats $R --threads "$T" --ids "$ids" --json)
            a=$(FFN_NUM_THREADS=$T "$FFN" bench model "$f" --prompt-tokens $P --context $C --gen $G \
                --repeats $R --threads "$T" --ids "$ids" --json)
            b=$(cd "$NPM_DIR" && node llamacpp_speed.mjs "$f" "$T" $P $C $G $R "$ids")
            # shellcheck disable=SC2086
            "$PY" - "$a" "$b" "$bw" "$fma" "$bf16" "$name" "$ty" "$T" $(shape "$name") "$o" >>"$results" <<'EOF'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
bw, fma = map(float, sys.argv[3:5])
bf16 = None if sys.argv[5] == "n/a" else float(sys.argv[5])  # n/a: no AVX512_BF16
name, ty, T = sys.argv[6], sys.argv[7], int(sys.argv[8])
D, F, L, H, G, V, E, K, tied = map(int, sys.argv[9:18])
old = json.loads(sys.argv[18])
Dh = D // H
per_layer = 2 * D * H * Dh + 2 * D * G * Dh + 3 * D * F * (K if E else 1) + (D * E if E else 0)
flops_tok = 2 * (L * per_layer)  # the last token's head is one row: not counted
# without AVX512_BF16 the products of every type run in fp32 (the AVX2 panels)
peak = fma if ty == "f32" or bf16 is None else bf16
pp_gflops = flops_tok * a["prompt_tokens"] / a["prompt_s"] * 1e-9 if a["prompt_s"] else 0
bpt = a["bytes_per_token"]
r = dict(model=name, type=ty, threads=T, bandwidth_gbps=bw, peak_gflops=peak,
         ffn_prompt_tok_s=a["prompt_tok_s"], llama_prompt_tok_s=b["prompt_tok_s"],
         prompt_ratio=a["prompt_tok_s"] / b["prompt_tok_s"] if b["prompt_tok_s"] else 0,
         ffn_prompt_gflops=pp_gflops, prompt_pct_peak=100 * pp_gflops / peak if peak else None,
         ffn_decode_tok_s=a["decode_tok_s"], llama_decode_tok_s=b["decode_tok_s"],
         decode_ratio=a["decode_tok_s"] / b["decode_tok_s"] if b["decode_tok_s"] else 0,
         bytes_per_token=bpt, ffn_decode_gbps=bpt * a["decode_tok_s"] * 1e-9,
         llama_decode_gbps=bpt * b["decode_tok_s"] * 1e-9,
         file_bytes=a["file_bytes"], ffn_peak_rss_bytes=a["peak_rss_bytes"])
r["ffn_pct_bw"] = 100 * r["ffn_decode_gbps"] / bw
r["llama_pct_bw"] = 100 * r["llama_decode_gbps"] / bw
if old:
    r["old_prompt_tok_s"], r["old_decode_tok_s"] = old["prompt_tok_s"], old["decode_tok_s"]
    r["prompt_new_old"] = a["prompt_tok_s"] / old["prompt_tok_s"] if old["prompt_tok_s"] else 0
    r["decode_new_old"] = a["decode_tok_s"] / old["decode_tok_s"] if old["decode_tok_s"] else 0
print(json.dumps(r))
EOF
            "$PY" -c '
import json, sys
r = json.loads(sys.argv[1])
pct = "%5.0f%%" % r["prompt_pct_peak"] if r["prompt_pct_peak"] is not None else "   n/a"
print("%-12s %-5s | %9.1f %9.1f %5.2fx %s | %8.2f %8.2f %5.2fx | %7.1f %4.0f%% %7.1f %4.0f%%" % (
    "%s L%s" % (r["model"], sys.argv[2]), r["type"], r["ffn_prompt_tok_s"], r["llama_prompt_tok_s"],
    r["prompt_ratio"], pct, r["ffn_decode_tok_s"], r["llama_decode_tok_s"],
    r["decode_ratio"], r["ffn_decode_gbps"], r["ffn_pct_bw"], r["llama_decode_gbps"],
    r["llama_pct_bw"]))
if "old_prompt_tok_s" in r:
    print("%-12s %-5s | %9.1f %9.1f %5.2fx | %8.2f %8.2f %5.2fx" % ("", "", r["old_prompt_tok_s"],
        r["ffn_prompt_tok_s"], r["prompt_new_old"], r["old_decode_tok_s"], r["ffn_decode_tok_s"],
        r["decode_new_old"]))' "$(tail -n 1 "$results")" "$(shape "$name" | cut -d' ' -f3)"
        done
    done
done
echo
echo "pp: prompt tokens/s; tg: decode tokens/s; ratio ffn / llama.cpp; %peak: ffn's prompt"
echo "GFLOP/s (weight products) / the peak above (bf16 where the CPU has AVX512_BF16, else fp32 FMA) (n/a where the CPU gives no such peak); GB/s: bytes per token × tokens/s, %bw of the"
echo "read bandwidth above.  One JSON object per row: $results"
