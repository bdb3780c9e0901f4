#!/usr/bin/env bash
# test_eval.sh -- `ffn eval`: perplexity in strided windows, and KL / top-1
# against a reference, checked against an independent computation in
# numpy (float64) from the logits `ffn run --dump-logits` gives for each
# window: the window starts, which positions each window scores, the mean
# nll, KL(reference || model) mean / 99th percentile / max and the top-1
# agreement, to 1e-9 relative.  Odd window and stride, a stride equal to
# the window, a GGUF model with the reference's vocabulary; usage errors.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$PWD}"
SHARED="${FFN_SHARED:-../shared}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
expect_fail() {
    local code="$1" pat="$2"; shift 2
    local rc=0
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [[ $rc -eq $code ]] && grep -Eq -- "$pat" "$tmp/err"; then ok "exit $rc, '$(head -c 160 "$tmp/err")'"
    else bad "expected exit $code and /$pat/ from: $*; got exit $rc: $(cat "$tmp/err")"; fi
}

"$FFN" eval --help >"$tmp/h" && grep -q -- "--reference" "$tmp/h" && grep -q "stride" "$tmp/h" &&
    ok "eval --help" || bad "eval --help"
head -c 20000 "$SHARED/data/tinyshakespeare.txt" >"$tmp/train.txt"
"$FFN" train --data "$tmp/train.txt" --steps 20 --hidden-size 64 --intermediate-size 96 --num-hidden-layers 2 \
    --num-attention-heads 4 --seq-len 32 --batch-size 2 --tokenizer char --out "$tmp/run" --quiet >/dev/null 2>&1 || bad "train"
"$FFN" quantize "$tmp/run" --dtype q4_0 --out "$tmp/q4.gguf" 2>/dev/null || bad "quantize"
head -c 241 "$tmp/train.txt" >"$tmp/data.txt"

expect_fail 2 "--data FILE is required" "$FFN" eval "$tmp/run"
expect_fail 2 "--stride 9 is larger than --window 8" "$FFN" eval "$tmp/run" --data "$tmp/data.txt" --window 8 --stride 9
expect_fail 2 "--window 33 is longer than the context of 32" "$FFN" eval "$tmp/run" --data "$tmp/data.txt" --window 33
# a GGUF ffn wrote holds its vocabulary: eval reads it (issue 24: one opener)
if "$FFN" eval "$tmp/q4.gguf" --data "$tmp/data.txt" >"$tmp/q4.out" 2>&1 && grep -q "perplexity" "$tmp/q4.out"; then
    echo "ok   eval reads the GGUF's own vocabulary"
else bad "eval on q4.gguf: $(cat "$tmp/q4.out")"; fi
expect_fail 1 "--data .*/nope.txt: No such file" "$FFN" eval "$tmp/run" --data "$tmp/nope.txt"

"$FFN" eval "$tmp/run" --data "$tmp/data.txt" --window 20 --stride 7 --json >"$tmp/e1.json" || bad "eval run"
"$FFN" eval "$tmp/q4.gguf" --data "$tmp/data.txt" --reference "$tmp/run" --window 20 --stride 7 --json >"$tmp/e2.json" || bad "eval q4 vs run"
"$FFN" eval "$tmp/q4.gguf" --data "$tmp/data.txt" --reference "$tmp/run" --window 16 --stride 16 --json >"$tmp/e3.json" || bad "eval chunks"
"$FFN" eval "$tmp/q4.gguf" --data "$tmp/data.txt" --reference "$tmp/run" --window 16 --stride 16 >"$tmp/e3.txt" &&
    grep -q "KL(reference || model): mean" "$tmp/e3.txt" && ok "text output" || bad "text output: $(cat "$tmp/e3.txt")"

FFN_BIN="$FFN" "$PY" - "$tmp" <<'PY' && ok "ffn eval = numpy over the same windows (3 cases)" || bad "eval differs from the numpy reference"
import json, os, subprocess, sys
sys.path.insert(0, "tests/parity")
import numpy as np, ffn_testlib as tl
t = sys.argv[1]
text = open(os.path.join(t, "data.txt")).read()
ids = []
for i in range(0, len(text), 25):  # char vocabulary: ids of the chunks concatenate
    p = tl.run_ffn(["run", os.path.join(t, "run"), "--prompt", text[i:i + 25], "--no-bos", "--info", "--steps", "0"])
    line = [l for l in p.stderr.splitlines() if "prompt ids" in l][0]
    ids += [int(x) for x in line.split("): ", 1)[1].split()]
n = len(ids)
assert n == len(text), (n, len(text))
cache = {}
def logits(model, start, W):
    key = (model, start)
    if key not in cache:
        out = os.path.join(t, "w.safetensors")
        tl.run_ffn(["run", model, "--ids", " ".join(map(str, ids[start:start + W])), "--steps", "0", "--dump-logits", out])
        z = tl.read_safetensors(out)["logits"].astype(np.float64)
        cache[key] = z - np.log(np.exp(z - z.max(1, keepdims=True)).sum(1, keepdims=True)) - z.max(1, keepdims=True)
    return cache[key]
def reference(model, ref, W, S):
    starts, s = [0], 0
    while starts[-1] + W < n:
        s += S
        starts.append(min(s, n - W))
    nll, rnll, kls, agree, nxt = [], [], [], 0, 0
    for st in starts:
        lm = logits(model, st, W)
        lr = logits(ref, st, W) if ref else None
        for p in range(max(nxt, st), st + W - 1):
            y = ids[p + 1]
            nll.append(-lm[p - st, y])
            if ref:
                rnll.append(-lr[p - st, y])
                kls.append(max(0.0, float((np.exp(lr[p - st]) * (lr[p - st] - lm[p - st])).sum())))
                agree += lm[p - st].argmax() == lr[p - st].argmax()
        nxt = st + W - 1
    r = {"tokens": n, "scored": len(nll), "windows": len(starts), "nll": float(np.mean(nll))}
    r["ppl"] = float(np.exp(r["nll"]))
    if ref:
        k = np.sort(kls)
        r.update(ref_nll=float(np.mean(rnll)), kl_mean=float(np.mean(kls)),
                 kl_p99=float(k[int(np.ceil(0.99 * len(k))) - 1]), kl_max=float(k[-1]),
                 top1_agree=agree / len(kls))
    return r
cases = [("e1.json", "run", None, 20, 7), ("e2.json", "q4.gguf", "run", 20, 7), ("e3.json", "q4.gguf", "run", 16, 16)]
bad = 0
for f, m, ref, W, S in cases:
    got = json.load(open(os.path.join(t, f)))
    want = reference(os.path.join(t, m), os.path.join(t, ref) if ref else None, W, S)
    for k, v in want.items():
        g = got[k]
        good = g == v if isinstance(v, int) else abs(g - v) <= 1e-9 * max(abs(v), 1e-12) + 1e-15
        if not good:
            bad += 1
            print("FAIL %s %s: ffn %r, numpy %r" % (f, k, g, v))
    print("%s: W %d S %d, %d windows, %d scored, ppl %.4f%s" % (f, W, S, want["windows"], want["scored"], want["ppl"],
          ", KL mean %.3e p99 %.3e, top-1 %.3f" % (want["kl_mean"], want["kl_p99"], want["top1_agree"]) if ref else ""))
    assert S == W or want["scored"] == n - 1, want["scored"]
sys.exit(1 if bad else 0)
PY
echo "test_eval: $fail failure(s)"
((fail == 0))
