#!/usr/bin/env bash
# test_cost_bounds.sh -- hostile files cost little before they are refused,
# and what a run allocates follows what it uses:
#   - a tokenizer.json whose pre-tokenizer regex rescans the rest of the
#     text on every match (quadratic before: 40 KB took 26 s) splits 40 KB
#     in well under 2 s (the split's work is bounded per input, src/data/bpe.c);
#     a pattern of that kind on text without a cut point still gives every
#     byte exactly once;
#   - a block count of 2^31 in a GGUF or a config.json is refused at once,
#     naming the key;
#   - a GGUF declaring millions of tiny metadata entries is refused at its
#     header, in little memory;
#   - a GGUF declaring a context of 2^31 generates 2 tokens in a small
#     address space (the history and cache are sized by prompt + steps).
# Time bounds are loose (the machine may be loaded; ASan is slower).
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
SHARED="${FFN_SHARED:-../shared}"
PY=/usr/bin/python3
M="$SHARED/models/stories260K.bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
# a sanitized build maps terabytes of shadow: it cannot start in 2 GB of address space
asan=0
(ulimit -v 2000000; exec "$FFN" --version) >/dev/null 2>&1 || asan=1
slack=1; ((asan)) && slack=4 # ASan+UBSan builds are slower

# within SECS CMD...: CMD finishes (any exit) in SECS seconds; its exit in $rc
within() {
    local secs="$1"; shift
    local t0 t1
    t0=$(date +%s.%N)
    rc=0
    timeout 120 "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    t1=$(date +%s.%N)
    elapsed=$("$PY" -c "print('%.2f' % ($t1 - $t0))")
    "$PY" -c "import sys; sys.exit(0 if $t1 - $t0 < $secs * $slack else 1)"
}

# expect_refusal NAME SECS PATTERN CMD...: exit 1 within SECS, stderr matching the ERE
expect_refusal() {
    local name="$1" secs="$2" pat="$3"; shift 3
    if ! within "$secs" "$@"; then bad "$name: took ${elapsed}s (bound ${secs}s x $slack)"; return; fi
    if [[ $rc -eq 1 ]] && grep -Eq -- "$pat" "$tmp/err"; then
        ok "$name in ${elapsed}s: $(head -c 200 "$tmp/err" | tr '\n' ' ')"
    else
        bad "$name: expected exit 1 and /$pat/, got exit $rc: $(head -c 400 "$tmp/err")"
    fi
}

# ---- (a) a pre-tokenizer regex that rescans the rest of the text ----
"$PY" - "$tmp" <<'PY'
import json, os, sys
t = sys.argv[1]
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
vocab = {chr(c): i for i, c in enumerate(cs)}
def tok(pattern):
    return {"version": "1.0", "added_tokens": [], "normalizer": None,
            "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False},
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": vocab, "merges": []}}
# every match looks for a NUL byte somewhere after it: there is none
json.dump(tok("\\S(?=[\\s\\S]*\\x00)|\\s"), open(os.path.join(t, "rescan.json"), "w"))
open(os.path.join(t, "40k.txt"), "w").write(("abcd efgh " * 4000)[:40000])
PY
if within 2 "$FFN" tokenize --tokenizer "$tmp/rescan.json" --file "$tmp/40k.txt" --ids-only; then
    ok "a rescanning regex splits 40 KB in ${elapsed}s (bound 2 s x $slack)"
else
    bad "a rescanning regex on 40 KB took ${elapsed}s (exit $rc)"
fi
# no byte lost or doubled: one id per byte (the vocabulary has no merges)
n=$(wc -w <"$tmp/out")
[[ $rc -eq 0 && $n -eq 40000 ]] && ok "40000 bytes -> $n ids" || bad "40000 bytes -> $n ids (exit $rc): $(head -c 300 "$tmp/err")"
"$FFN" detokenize --tokenizer "$tmp/rescan.json" --ids "$(tr '\n' ' ' <"$tmp/out")" >"$tmp/back" 2>"$tmp/err" &&
    cmp -s "$tmp/back" "$tmp/40k.txt" && ok "and decode back to the text" || bad "decode differs: $(head -c 300 "$tmp/err")"

# ---- (b) a block count of 2^31 ----
"$FFN" export "$M" --format gguf --out "$tmp/s.gguf" 2>/dev/null || bad "export gguf"
"$PY" tests/cli/gguf_edit.py "$tmp/s.gguf" "$tmp/layers.gguf" set-u32 llama.block_count 2147483648
expect_refusal "GGUF block_count 2^31" 0.5 "layers.gguf: llama.block_count 2147483648, but the file holds only [0-9]+ tensors" \
    "$FFN" run "$tmp/layers.gguf" --ids "1 2" --steps 1
"$FFN" export "$M" --out "$tmp/hf" 2>/dev/null || bad "export hf"
"$PY" - "$tmp/hf/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 2 ** 31
json.dump(c, open(sys.argv[1], "w"))
PY
expect_refusal "config.json num_hidden_layers 2^31" 0.5 "num_hidden_layers" "$FFN" run "$tmp/hf" --ids "1 2" --steps 1
expect_refusal "params on it" 0.5 "num_hidden_layers" "$FFN" params "$tmp/hf/config.json"

# ---- (c) millions of tiny metadata entries ----
"$PY" - "$tmp/kv.gguf" <<'PY'
import struct, sys
n = 600000  # 14 bytes each: 8.4 MB
with open(sys.argv[1], "wb") as f:
    f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, n))
    one = struct.pack("<Q", 1)
    for i in range(n):
        f.write(one + bytes([65 + i % 26]) + struct.pack("<I", 0) + b"\x01")
PY
if within 0.5 "$FFN" run "$tmp/kv.gguf" --ids "1" --steps 1 && [[ $rc -eq 1 ]] &&
    grep -q "kv.gguf: metadata count: expected at most 65536 entries, found 600000" "$tmp/err"; then
    ok "600000 metadata entries refused at the header in ${elapsed}s"
else
    bad "metadata entries: exit $rc in ${elapsed}s: $(head -c 300 "$tmp/err")"
fi
if ((!asan)); then
    /usr/bin/time -f "%M" -o "$tmp/rss" "$FFN" run "$tmp/kv.gguf" --ids "1" --steps 1 >/dev/null 2>&1 || true
    kb=$(tail -1 "$tmp/rss")
    ((kb < 100000)) && ok "in $((kb / 1024)) MB peak" || bad "the refusal took $((kb / 1024)) MB"
fi

# ---- (d) a declared context of 2^31 ----
"$PY" tests/cli/gguf_edit.py "$tmp/s.gguf" "$tmp/ctx.gguf" set-u32 llama.context_length 2147483648
for cmd in run generate; do
    if [[ $cmd == run ]]; then args=(--ids "1 403" --steps 2 --temperature 0)
    else args=(--prompt "a" --steps 2 --temperature 0); fi
    # 2 GB of address space (ASan maps terabytes of shadow: there only the run itself)
    if ((asan)); then "$FFN" $cmd "$tmp/ctx.gguf" "${args[@]}" >"$tmp/out" 2>"$tmp/err" && r=0 || r=$?
    else (ulimit -v 2000000; "$FFN" $cmd "$tmp/ctx.gguf" "${args[@]}") >"$tmp/out" 2>"$tmp/err" && r=0 || r=$?; fi
    [[ $r -eq 0 ]] && ok "$cmd: context_length 2^31, 2 steps in 2 GB of address space" ||
        bad "$cmd on a context of 2^31: exit $r: $(head -c 300 "$tmp/err")"
done
# the same tokens as the file with its real context
"$FFN" run "$tmp/s.gguf" --ids "1 403" --steps 2 --temperature 0 >"$tmp/a" 2>/dev/null
"$FFN" run "$tmp/ctx.gguf" --ids "1 403" --steps 2 --temperature 0 >"$tmp/b" 2>/dev/null
cmp -s "$tmp/a" "$tmp/b" && ok "run: the same tokens as with the file's real context" || bad "tokens differ"

if ((fail)); then echo "$fail failed"; exit 1; fi
echo "all passed"
