#!/usr/bin/env bash
# test_bf16.sh -- --precision bf16 from the command line (mixed precision:
# bf16 products, fp32 accumulation, fp32 master weights):
#   - ffn train --precision bf16 resumes bit-identically (S steps straight ==
#     S/2 with --stop-at + --resume: the same model.safetensors bytes and
#     losses), dense SwiGLU and MoE; the resumed run keeps bf16 from the
#     checkpoint (train_state records it) and a resume asking for fp32 is
#     refused, naming the flag;
#   - the master weights stay fp32: model.safetensors holds F32 tensors whose
#     values are not all bf16-representable (low 16 bits non-zero);
#   - bf16 is really used: its losses differ from the fp32 run's, and stay
#     within 2% of them over these few steps;
#   - ffn bench layer --precision bf16 --json says so; ffn run --precision
#     bf16 gives logits near the fp32 ones (within 2e-2 relative, not equal);
#   - refusals: --precision fp16 (exit 2, the accepted names), bf16 where the
#     SIMD level has no AVX512_BF16 (FFN_SIMD=avx2: exit 1, a message naming
#     it, no run directory written).
# On a CPU without AVX512_BF16 (its /proc/cpuinfo flags, capped by FFN_SIMD;
# lib_cpu.sh) the refusals instead: ffn bench layer, ffn train and ffn run
# with --precision bf16 each exit 1 with a message naming AVX512_BF16 and
# bf16 and write nothing; the "note:" line says which was tested.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
FFN_SHARED="${FFN_SHARED:-../shared}"
. "$(dirname "$0")/lib_cpu.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
head -c 60000 "$FFN_SHARED/data/tinyshakespeare.txt" > "$tmp/data.txt"

small=(--data "$tmp/data.txt" --hidden-size 32 --intermediate-size 48 --num-hidden-layers 2
       --num-attention-heads 4 --num-key-value-heads 2 --seq-len 32 --batch-size 4
       --eval-every 4 --eval-batches 2 --quiet --threads 1)

# refused: exit 1, the instruction set and the type named, PATH not written,
# nothing on stdout
refused() { # what, path that must not appear, command...
    local what="$1" path="$2" rc=0; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    [[ ! -s "$tmp/out" ]] || fail "$what without AVX512_BF16 printed $(head -c 200 "$tmp/out")"
    [[ $rc -eq 1 ]] && grep -q "AVX512_BF16" "$tmp/err" && grep -q "bf16" "$tmp/err" ||
        fail "$what without AVX512_BF16: exit $rc, $(cat "$tmp/err")"
    [[ ! -e "$path" ]] || fail "$what without AVX512_BF16 wrote $path"
    echo "ok $what refused: exit 1, nothing written, $(head -c 200 "$tmp/err")"
}

if ! cpu_has avx512_bf16; then
    refused "bench layer --precision bf16" "$tmp/none" "$FFN_BIN" bench layer --hidden 16 --intermediate 16 --tokens 8 --repeats 1 --precision bf16 --json
    refused "train --precision bf16" "$tmp/t" "$FFN_BIN" train "${small[@]}" --precision bf16 --steps 2 --out "$tmp/t"
    "$FFN_BIN" train "${small[@]}" --steps 2 --out "$tmp/f" >/dev/null
    refused "run --precision bf16" "$tmp/l.safetensors" "$FFN_BIN" run "$tmp/f" --ids "1 2 3" --steps 2 \
        --temperature 0 --threads 1 --precision bf16 --dump-logits "$tmp/l.safetensors"
    note "no AVX512_BF16 (/proc/cpuinfo, FFN_SIMD=${FFN_SIMD:-unset}): tested the refusal of bench layer, train and run --precision bf16"
    exit 0
fi
note "AVX512_BF16 present: bf16 training, resume, run and bench tested"
"$FFN_BIN" bench layer --hidden 16 --intermediate 16 --tokens 8 --repeats 1 \
    --precision bf16 --json > "$tmp/bench.json" 2> "$tmp/bench.err" ||
    fail "bench layer --precision bf16 on a CPU with AVX512_BF16: $(cat "$tmp/bench.err")"
python3 - "$tmp/bench.json" <<'EOF' || fail "bench layer --json does not report precision bf16"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["precision"] == "bf16" and o["refresh_ms"] >= 0, o
EOF
echo "ok bench layer --precision bf16 --json reports precision and the weight refresh"

losses() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    print(o["step"], repr(o["loss"]))' "$1"; }

# ---- resume bit-identical, dense and MoE ----
for kind in dense moe; do
    extra=()
    [[ $kind == moe ]] && extra=(--num-experts 4 --num-experts-per-tok 2 --moe-intermediate-size 24)
    "$FFN_BIN" train "${small[@]}" "${extra[@]}" --precision bf16 --steps 10 \
        --out "$tmp/a_$kind" --log "$tmp/a_$kind.jsonl" >/dev/null
    "$FFN_BIN" train "${small[@]}" "${extra[@]}" --precision bf16 --steps 10 --stop-at 5 \
        --out "$tmp/b_$kind" --log "$tmp/b_$kind.jsonl" >/dev/null
    "$FFN_BIN" train --resume "$tmp/b_$kind" --log "$tmp/b_$kind.jsonl" --quiet --threads 1 >/dev/null
    cmp "$tmp/a_$kind/model.safetensors" "$tmp/b_$kind/model.safetensors" ||
        fail "$kind: bf16 resume: model.safetensors differ"
    diff <(losses "$tmp/a_$kind.jsonl") <(losses "$tmp/b_$kind.jsonl") ||
        fail "$kind: bf16 resume: losses differ"
    echo "ok $kind: bf16 run of 10 steps == 5 + resume to 10 (identical weights and losses)"
done
python3 - "$tmp/b_dense/train_state.safetensors" <<'PY' || fail "train_state does not record precision bf16"
import json, struct, sys
f = open(sys.argv[1], "rb")
meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
assert meta.get("opt.precision") == "1", meta.get("opt.precision")  # FFN_PRECISION_BF16
PY
echo "ok train_state records the precision (opt.precision = 1, bf16)"

# a resume must not change the precision
rc=0
"$FFN_BIN" train --resume "$tmp/b_dense" --precision fp32 --steps 12 --quiet --threads 1 \
    >/dev/null 2>"$tmp/err" || rc=$?
[[ $rc -ne 0 ]] && grep -q -- "--precision" "$tmp/err" ||
    fail "resume of a bf16 run with --precision fp32: exit $rc, $(cat "$tmp/err")"
echo "ok resuming a bf16 run with --precision fp32 is refused: $(head -c 160 "$tmp/err")"

# ---- fp32 master weights; bf16 visible in the losses ----
"$FFN_BIN" train "${small[@]}" --precision fp32 --steps 10 --out "$tmp/f" --log "$tmp/f.jsonl" >/dev/null
/usr/bin/python3 - "$tmp/a_dense/model.safetensors" "$tmp/a_dense.jsonl" "$tmp/f.jsonl" <<'EOF' || fail "master weights / losses"
import json, struct, sys
import numpy as np
path, log_bf, log_fp = sys.argv[1:4]
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    data = f.read()
types = {v["dtype"] for k, v in hdr.items() if k != "__metadata__"}
assert types == {"F32"}, "tensor types %s (expected F32 only)" % types
lo = 0
total = 0
for k, v in hdr.items():
    if k == "__metadata__":
        continue
    b, e = v["data_offsets"]
    u = np.frombuffer(data[b:e], dtype="<u4")
    lo += int(np.count_nonzero(u & 0xFFFF))
    total += u.size
assert lo > total // 2, "only %d of %d weights have low 16 bits set: rounded to bf16?" % (lo, total)
print("ok master weights: F32, %d of %d values not bf16-representable" % (lo, total))
def read(p):
    return [json.loads(l)["loss"] for l in open(p)]
bf, fp = read(log_bf), read(log_fp)
assert len(bf) == len(fp) == 10
assert bf != fp, "bf16 and fp32 losses are identical: bf16 not used?"
worst = max(abs(a - b) / b for a, b in zip(bf, fp))
assert worst < 0.02, "bf16 losses differ from fp32 by %.3g (relative)" % worst
print("ok bf16 losses differ from fp32 (max relative %.2e < 2e-2)" % worst)
EOF

# ---- ffn run --precision bf16: the same model, logits near fp32's, not equal ----
"$FFN_BIN" run "$tmp/f" --ids "1 2 3 4" --steps 4 --temperature 0 --threads 1 --precision bf16 \
    --dump-logits "$tmp/lb.safetensors" >/dev/null
"$FFN_BIN" run "$tmp/f" --ids "1 2 3 4" --steps 4 --temperature 0 --threads 1 \
    --dump-logits "$tmp/lf.safetensors" >/dev/null
/usr/bin/python3 - "$tmp/lb.safetensors" "$tmp/lf.safetensors" <<'PY' || fail "ffn run --precision bf16 logits"
import json, struct, sys
import numpy as np
def logits(p):
    f = open(p, "rb")
    h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    b, e = h["logits"]["data_offsets"]
    return np.frombuffer(f.read()[b:e], dtype="<f4")
a, b = logits(sys.argv[1]), logits(sys.argv[2])
rel = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
assert 0 < rel < 2e-2, "bf16 logits vs fp32: max rel %.3g (expected in (0, 2e-2))" % rel
print("ok ffn run --precision bf16: logits within %.2e (relative) of fp32's, not equal" % rel)
PY

# ---- refusals ----
rc=0
"$FFN_BIN" train "${small[@]}" --precision fp16 --steps 2 --out "$tmp/x" >/dev/null 2>"$tmp/err" || rc=$?
[[ $rc -eq 2 ]] && grep -q "expected fp32 or bf16, got 'fp16'" "$tmp/err" ||
    fail "--precision fp16: exit $rc, $(cat "$tmp/err")"
echo "ok --precision fp16: exit 2, $(cat "$tmp/err")"
refused "train --precision bf16 under FFN_SIMD=avx2" "$tmp/y" \
    env FFN_SIMD=avx2 "$FFN_BIN" train "${small[@]}" --precision bf16 --steps 2 --out "$tmp/y"
echo "all bf16 CLI tests passed"
