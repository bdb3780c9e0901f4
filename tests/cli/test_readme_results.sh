#!/usr/bin/env bash
# test_readme_results.sh -- README.md's result blocks are what the code
# prints.  scripts/readme_results.sh writes each marked block
# (<!-- begin results: NAME --> ... <!-- end results: NAME -->) from a real
# run and records it in tests/data/readme/NAME.{cmd,out,runs,meta}.  Here:
#   1. every block in README.md is its recorded output (a hand edit, or a
#      recorded output not written into README, fails; --check);
#   2. one run of each block is rerun at the same thread count, which makes
#      it deterministic, and its held-out loss must equal the recorded one
#      to the 4 digits printed: the demo's cheapest variant (none, 1500
#      steps) and the compare block's relu seed 1 (300 steps), about a
#      minute together.  A change to training, the model or the corpus that
#      moves the numbers fails here until the blocks are regenerated
#      (bash scripts/readme_results.sh).
set -uo pipefail
ROOT="${FFN_ROOT:-$PWD}"
# the plain build (numbers are checked here, not memory: no ASan rerun)
FFN="$ROOT/build/ffn"
rec="$ROOT/tests/data/readme"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

(cd "$ROOT" && bash scripts/readme_results.sh --check) || fail=1
for name in demo compare; do
    for f in cmd out runs meta; do
        [[ -s "$rec/$name.$f" ]] || { echo "FAIL $rec/$name.$f missing (bash scripts/readme_results.sh $name)"; fail=1; }
    done
    grep -q "<!-- begin results: $name -->" "$ROOT/README.md" || { echo "FAIL README.md has no '$name' block"; fail=1; }
done
grep -q "threads" "$rec/demo.meta" && grep -q "cores of an" "$rec/demo.meta" ||
    { echo "FAIL demo.meta does not name the machine and thread count: $(cat "$rec/demo.meta")"; fail=1; }

# The level the records were made at (scripts/readme_results.sh writes it):
# at that level a rerun is bit for bit; at another one (AVX-512 against
# AVX2, say) the kernels sum in another order and the loss may move in the
# last digits, so there it must be within 0.01.
simd=$("$FFN" version | awk '$1 == "simd" {print $2}')
rec_simd=$(cat "$rec/simd" 2>/dev/null || echo unknown)
# rerun NAME VARIANT SEED ARGS...: that run's val loss against NAME.runs
rerun() {
    local name=$1 variant=$2 seed=$3; shift 3
    local want
    want=$(awk -v v="$variant" -v s="$seed" '$1 == v && $2 == s {print $3}' "$rec/$name.runs")
    [[ -n $want ]] || { echo "FAIL $name.runs has no run '$variant' seed $seed"; fail=1; return; }
    # run k of a variant is seed (default 1234) + k - 1: run 1 is a 1-seed compare's run
    local first=1234
    "$FFN" compare --variants "$variant" --seeds 1 --seed $((first + seed - 1)) --out "$tmp/$name" "$@" >/dev/null 2>"$tmp/$name.err" ||
        { echo "FAIL ffn compare $*: $(tail -3 "$tmp/$name.err")"; fail=1; return; }
    local got
    got=$(sed -nE "s/^$variant +seed 1: val loss ([0-9.]+),.*/\1/p" "$tmp/$name.err")
    if [[ "$got" == "$want" ]]; then echo "ok   $name: $variant seed $seed reruns to val loss $got, as recorded"
    elif [[ "$simd" != "$rec_simd" && -n "$got" ]] &&
         awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01) }'; then
        # another SIMD level sums in another order: the same run, not the same bits
        echo "ok   $name: $variant seed $seed reruns to val loss $got, recorded $want at the $rec_simd level (here $simd: within 0.01)"
    else echo "FAIL $name: $variant seed $seed now gives val loss '$got', README says $want (bash scripts/readme_results.sh $name)"; fail=1; fi
}
# the demo's settings are compare's with 1500 steps (ffn demo: 5 variants, 1 seed)
rerun demo none 1 --steps 1500 --threads 2
rerun compare relu 1 --steps 300 --threads 2
exit $fail
