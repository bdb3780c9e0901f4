#!/usr/bin/env bash
# test_cli_messages.sh -- smaller contracts of issue 24: a --layer beyond the
# model is one message and exit 2 in every command (inspect, inspect keys,
# edit), with no internal function name in it; `inspect keys --top T` prints
# T examples per neuron and lists neurons by selectivity (their largest
# activation, descending); `compare` refusing another experiment in --out
# names the settings that differ, not its internal key; the MoE `inspect`
# ends each MoE layer with its expert load (counts summing to tokens x K).
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/xdg"
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok   $*"; }
"$FFN" train --corpus en --corpus-sentences 2000 --tokenizer word --steps 20 --hidden-size 64 \
    --intermediate-size 96 --num-hidden-layers 2 --num-attention-heads 4 --seq-len 32 --batch-size 4 \
    --out "$tmp/m" --quiet >/dev/null 2>&1 || fail "train"
"$FFN" corpus --sentences 200 --seed 5 >"$tmp/t.txt"
for c in "inspect|$tmp/m|--prompt|Mary gave John the|--layer|4" "inspect|keys|$tmp/m|--data|$tmp/t.txt|--layer|4" \
         "edit|$tmp/m|--prompt|Mary gave John the|--subject|Mary|--target|John|--layer|4|--out|$tmp/x"; do
    IFS='|' read -r -a a <<<"$c"
    set +e; "$FFN" "${a[@]}" >/dev/null 2>"$tmp/err"; rc=$?; set -e
    [[ $rc -eq 2 ]] || fail "${a[0]} --layer 4: exit $rc, expected 2: $(cat "$tmp/err")"
    grep -q -- "--layer 4 out of range: the model has 2 layers (0..1)" "$tmp/err" || fail "${a[0]}: $(cat "$tmp/err")"
    ! grep -q "ffn_[a-z_]*:" "$tmp/err" || fail "${a[0]}: an internal function name: $(cat "$tmp/err")"
done
ok "--layer out of range: one message, exit 2, in inspect, inspect keys and edit"
"$FFN" inspect keys "$tmp/m" --data "$tmp/t.txt" --layer 0 --top 5 --neurons 4 2>/dev/null >"$tmp/keys"
/usr/bin/python3 - "$tmp/keys" <<'PY' || fail "inspect keys --top 5 table: $(head -20 "$tmp/keys")"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
neurons, cur = [], None
for l in lines:
    if l.startswith("neuron "):
        cur = []; neurons.append(cur)
    elif cur is not None and re.match(r"^\s+-?\d+\.\d+\s+\.\.\.", l):
        cur.append(float(l.split()[0]))
    elif not l.strip():
        cur = None
assert len(neurons) == 4, neurons
assert all(len(n) == 5 for n in neurons), [len(n) for n in neurons]
tops = [n[0] for n in neurons]
assert tops == sorted(tops, reverse=True), tops
PY
ok "inspect keys --top 5: 5 examples per neuron, neurons by largest activation"
C=(--sentences 300 --hidden-size 32 --num-attention-heads 2 --batch-size 2 --seq-len 16 --eval-every 1
   --eval-batches 1 --out "$tmp/cmp")
"$FFN" compare --variants relu --steps 2 "${C[@]}" >/dev/null 2>&1 || fail "compare"
if "$FFN" compare --variants relu,swiglu --steps 3 "${C[@]}" >/dev/null 2>"$tmp/err"; then fail "compare over another experiment"; fi
grep -q "holds another experiment (steps 2 there, 3 here; variants relu there, relu,swiglu here)" "$tmp/err" ||
    fail "compare's refusal: $(cat "$tmp/err")"
(( $(wc -c <"$tmp/err") < 300 )) || fail "compare's refusal is $(wc -c <"$tmp/err") bytes: $(cat "$tmp/err")"
ok "compare names the settings that differ from the experiment in --out"
"$FFN" train --corpus en --corpus-sentences 1000 --tokenizer word --mlp-type moe --steps 2 --hidden-size 64 \
    --intermediate-size 96 --num-hidden-layers 2 --num-attention-heads 4 --seq-len 32 --batch-size 2 \
    --out "$tmp/moe" --quiet >/dev/null 2>&1 || fail "train moe"
"$FFN" inspect "$tmp/moe" --prompt "Mary gave John the apple" 2>/dev/null >"$tmp/moe.txt"
/usr/bin/python3 - "$tmp/moe.txt" <<'PY' || fail "MoE expert load: $(grep -A3 'expert load' "$tmp/moe.txt")"
import re, sys
t = open(sys.argv[1]).read()
loads = re.findall(r"layer (\d+) expert load \((\d+) tokens x (\d+) experts each = (\d+) slots\):\n((?:  .*\n)+)", t)
assert len(loads) == 2, loads
for layer, n, k, slots, body in loads:
    counts = [int(c) for c in re.findall(r"e\d+ (\d+) \(w", body)]
    assert sum(counts) == int(slots) == int(n) * int(k), (counts, n, k, slots)
    assert "busiest" in body
PY
ok "MoE inspect: per-layer expert load, counts summing to tokens x K"
echo "test_cli_messages: ok"
