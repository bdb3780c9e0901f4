#!/usr/bin/env bash
# test_bench_qgemm.sh -- `ffn bench qgemm` and the dot-product peaks of
# `ffn bench peak` as a script reads them:
#   - --help explains (usage line, the roofline wording, at most 80 columns);
#   - bad --type, --cols not a multiple of the block, --n 0: exit 2, a
#     message naming the flag;
#   - a small run per type prints one JSON object with the fields the
#     benchmark scripts read, times > 0 and GFLOP/s consistent with the time;
#   - `ffn bench peak --json` has gflops, bf16_gflops and int8_gops (numbers,
#     or null where the CPU lacks the instruction).
# Speed is never asserted.
set -euo pipefail
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
FFN="${FFN_BIN:-$ROOT/build/ffn}"
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fails=$((fails + 1)); }

expect() { # CODE FRAGMENT -- cmd...
    local code="$1" frag="$2"; shift 3
    local rc=0
    "$@" >"$T/stdout" 2>"$T/stderr" || rc=$?
    if [[ $rc -ne $code ]]; then bad "$*: exit $rc, expected $code; stderr: $(head -c 300 "$T/stderr")"
    elif ! grep -qF -- "$frag" "$T/stderr"; then bad "$*: stderr lacks '$frag': $(head -c 300 "$T/stderr")"
    else ok "exit $code, '$frag'"; fi
}

if "$FFN" bench qgemm --help >"$T/h" 2>"$T/e" && grep -q "^usage: ffn bench qgemm" "$T/h" &&
   grep -q "read bandwidth" "$T/h" && grep -qF -- "--type" "$T/h" && [[ ! -s "$T/e" ]] &&
   [[ $(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$T/h") -le 80 ]]; then
    ok "ffn bench qgemm --help"
else bad "ffn bench qgemm --help: $(head -c 300 "$T/h") $(head -c 200 "$T/e")"; fi
"$FFN" bench --help | grep -q "qgemm" && ok "ffn bench --help lists qgemm" || bad "ffn bench --help lacks qgemm"

expect 2 "--type: unknown ggml type 'q9_9'" -- "$FFN" bench qgemm --type q9_9
expect 2 "--cols: 100 is not a multiple of q4_K's block of 256" -- "$FFN" bench qgemm --type q4_K --cols 100
expect 2 "--n" -- "$FFN" bench qgemm --n 0
expect 1 "iq2_xxs" -- "$FFN" bench qgemm --type iq2_xxs --rows 2 --cols 256 --repeats 1 --hot

for spec in "q4_0 96" "q8_0 64" "q4_K 512" "q6_K 256" "bf16 77" "f16 40" "f32 33"; do
    set -- $spec
    if "$FFN" bench qgemm --type "$1" --rows 21 --cols "$2" --n 3 --threads 1 --repeats 2 --hot --json >"$T/j" 2>"$T/e" &&
       $PY - "$T/j" "$1" "$2" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
want = {"bench", "type", "rows", "cols", "n", "threads", "simd", "repeats", "copies", "weight_bytes",
        "min_ms", "median_ms", "weight_gbps", "gflops", "bandwidth_gbps", "peak_name", "peak_gflops",
        "pct_bandwidth", "pct_peak"}
missing = want - set(d)
assert not missing, missing
assert d["bench"] == "qgemm" and d["type"].lower() == sys.argv[2].lower() and d["cols"] == int(sys.argv[3])
assert d["rows"] == 21 and d["n"] == 3 and d["copies"] == 1 and d["repeats"] == 2
assert 0 < d["min_ms"] <= d["median_ms"]
flops = 2 * 3 * 21 * d["cols"]
assert abs(d["gflops"] - flops / (d["min_ms"] * 1e-3) * 1e-9) <= 0.01 * d["gflops"] + 0.01, d
PYEOF
    then ok "bench qgemm --type $1 --json"; else bad "bench qgemm --type $1: $(cat "$T/j" "$T/e" | head -c 400)"; fi
done

# bf16_gflops and int8_gops are null exactly where the CPU (its
# /proc/cpuinfo flags, FFN_SIMD's cap) has no AVX512_BF16 / AVX512_VNNI
. "$(dirname "$0")/lib_cpu.sh"
hw_bf16=0; hw_vnni=0
cpu_has avx512_bf16 && hw_bf16=1
cpu_has avx512_vnni && hw_vnni=1
if "$FFN" bench peak --threads 1 --json >"$T/p" 2>"$T/e" && $PY - "$T/p" $hw_bf16 $hw_vnni <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bench"] == "peak" and d["gflops"] > 0
for k, hw in (("bf16_gflops", sys.argv[2]), ("int8_gops", sys.argv[3])):
    assert k in d and (d[k] is None if hw == "0" else d[k] > 0), (k, hw, d)
PYEOF
then ok "bench peak --json: gflops, bf16_gflops ($( ((hw_bf16)) && echo measured || echo 'null: no AVX512_BF16')), int8_gops ($( ((hw_vnni)) && echo measured || echo 'null: no AVX512_VNNI'))"
else bad "bench peak --json: $(cat "$T/p" "$T/e" | head -c 300)"; fi
if "$FFN" bench peak --threads 1 >"$T/p" 2>"$T/e" &&
   { ((hw_bf16)) || grep -q "^bf16 dot-product peak (vdpbf16ps): n/a" "$T/p"; } &&
   { ((hw_vnni)) || grep -q "^int8 dot-product peak (vpdpbusd): n/a" "$T/p"; }
then ok "bench peak: every figure printed, n/a where the CPU cannot give it"; else bad "bench peak: $(cat "$T/p" "$T/e" | head -c 300)"; fi
missing=()
((hw_bf16)) || missing+=(AVX512_BF16)
((hw_vnni)) || missing+=(AVX512_VNNI)
((${#missing[@]} == 0)) || note "no ${missing[*]} (/proc/cpuinfo, FFN_SIMD=${FFN_SIMD:-unset}): bench peak's null and n/a for it tested"

[[ $fails -eq 0 ]] && echo "all ok" || echo "$fails failed"
exit $((fails > 0))
