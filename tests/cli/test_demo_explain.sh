#!/usr/bin/env bash
# test_demo_explain.sh -- the sentences `ffn demo` prints under its table
# follow from the numbers (tools/experiment.c, exp_explain).  Synthetic
# compare.json files are fed through the hidden flag --explain-from:
#   - the expected directions beyond the noise: "better" and the lesson's
#     reason;
#   - differences within the noise (two standard errors over the seeds):
#     "within the noise", never "better"/"worse";
#   - results against the expected direction (gelu worse than linear, swiglu
#     worse than gelu) at 300 steps: said to be against it, with the short
#     run and the 1500-step default as the reason;
#   - one seed per variant: the noise is the assumed spread, stated;
#   - linear clearly better than none: not explained as "one matrix in
#     disguise" alone but with why a short run can still gain.
set -uo pipefail
FFN="${FFN_BIN:-build/ffn}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

# make NAME STEPS SEEDS  none_mean none_sd linear_mean linear_sd gelu... swiglu... moe...
make() {
    local name=$1 steps=$2 seeds=$3; shift 3
    /usr/bin/python3 - "$tmp/$name.json" "$steps" "$seeds" "$@" <<'EOF'
import json, sys
path, steps, seeds, *v = sys.argv[1:]
names = ["none", "linear", "gelu", "swiglu", "moe"]
rows = []
for i, n in enumerate(names):
    rows.append({"variant": n, "val_loss_mean": float(v[2 * i]), "val_loss_std": float(v[2 * i + 1]),
                 "runs": int(seeds), "total_params": 167744 if n == "moe" else 102272,
                 "active_params": 102464 if n == "moe" else 102272})
json.dump({"settings": {"steps": int(steps), "seeds": int(seeds)}, "variants": rows}, open(path, "w"))
EOF
}

explain() { "$FFN" demo --explain-from "$tmp/$1.json" >"$tmp/$1.txt" 2>"$tmp/$1.err" || bad "$1: exit $?: $(cat "$tmp/$1.err")"; }
# row NAME VARIANT: that variant's sentence, joined across its wrapped lines
row() { awk -v v="$2" '$1 == v {p = 1; printf "%s", $0; next} /^  [a-z]/ {p = 0} p {printf " %s", $0} END {print ""}' "$tmp/$1.txt" | tr -s ' '; }
has() { local r; r=$(row "$1" "$2"); if grep -qE -- "$3" <<<"$r"; then ok "$1/$2: '$3'"; else bad "$1/$2 lacks '$3': $r"; fi; }
hasnt() { local r; r=$(row "$1" "$2"); if grep -qE -- "$3" <<<"$r"; then bad "$1/$2 says '$3': $r"; else ok "$1/$2 does not say '$3'"; fi; }

# 1. every step in the expected direction, far beyond a small spread (3 seeds)
make expected 1500 3  1.26 0.01  1.26 0.01  0.88 0.01  0.77 0.01  0.74 0.01
explain expected
has expected linear "within the noise"
has expected linear "one D x D matrix in disguise"
has expected gelu "better, beyond the noise of ±0.016"     # 2*sqrt(2*0.01^2/3)
has expected gelu "nonlinearity is what makes"
has expected swiglu "gate helps"
has expected moe "better, beyond the noise"
hasnt expected gelu "against"
grep -q "two standard errors of a difference over 3 seeds" "$tmp/expected.txt" && ok "noise from the seeds stated" || bad "noise statement: $(head -3 "$tmp/expected.txt")"

# 2. the same gaps, but the seeds spread widely: everything is noise
make noisy 1500 3  1.26 0.2  1.26 0.2  1.20 0.2  1.15 0.2  1.12 0.2
explain noisy
for v in linear gelu swiglu moe; do has noisy $v "within the noise"; hasnt noisy $v "\((better|worse)"; done
has noisy gelu "no gain from the nonlinearity can be claimed"
has noisy swiglu "no gain from the gate can be claimed"

# 3. at 300 steps gelu loses to linear and swiglu to gelu, beyond the noise
make contradicts 300 3  2.07 0.01  1.77 0.01  1.90 0.01  1.95 0.01  1.95 0.01
explain contradicts
has contradicts gelu "worse, beyond the noise"
has contradicts gelu "against the expected direction"
has contradicts gelu "At 300 steps the runs are short"
has contradicts gelu "1500 steps by default"
hasnt contradicts gelu "makes the FFN's parameters pay"
has contradicts swiglu "against the direction of Shazeer"
hasnt contradicts swiglu "the input-dependent gate helps"
has contradicts moe "within the noise"
has contradicts linear "better, beyond the noise"
has contradicts linear "RMSNorm"
hasnt contradicts linear "as expected"

# 4. one seed per variant: the assumed spread, and a gap inside it is noise
make oneseed 1500 1  1.2617 0  1.2690 0  0.8786 0  0.8700 0  0.7404 0
explain oneseed
grep -q "one seed per variant" "$tmp/oneseed.txt" && ok "one seed: the assumed spread is stated" || bad "one seed: $(head -3 "$tmp/oneseed.txt")"
has oneseed linear "within the noise of ±0.057"
has oneseed swiglu "within the noise"
has oneseed gelu "better, beyond the noise"
has oneseed moe "better, beyond the noise"

# a file that is not compare.json
echo '{"variants": 3}' >"$tmp/bad.json"
"$FFN" demo --explain-from "$tmp/bad.json" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "not the JSON that ffn compare writes" "$tmp/err" && ok "a wrong file: exit 1 naming it" || bad "bad file: exit $rc $(cat "$tmp/err")"
printf '{"settings": {"steps": 3, "seeds": 1}, "variants": [' >"$tmp/trunc.json"
"$FFN" demo --explain-from "$tmp/trunc.json" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc -eq 1 ]] && grep -q "trunc.json" "$tmp/err" && ok "truncated JSON: the strict reader's error, naming the file" || bad "truncated: exit $rc $(cat "$tmp/err")"
"$FFN" demo --help | grep -q -- "--explain-from" && bad "the hidden flag shows in --help" || ok "--explain-from is not in --help"

exit $fail
