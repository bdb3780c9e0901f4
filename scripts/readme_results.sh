#!/usr/bin/env bash
# readme_results.sh -- regenerate README.md's result blocks from real runs.
#
# README.md marks each block whose numbers come from a run:
#     <!-- begin results: NAME -->  ...  <!-- end results: NAME -->
# For each NAME this script runs the command below at a fixed thread count
# (the numbers are then the same on every machine of the same SIMD level at
# that count, except the speeds, which are left out of the tables; the level
# goes to tests/data/readme/simd), records what it printed in
# tests/data/readme/NAME.out, the per-run losses in NAME.runs and how long it
# took on which machine in NAME.meta, and writes the block from them.
# tests/cli/test_readme_results.sh fails when a block differs from its
# recorded output (--check does the same here) and reruns one cheap run of
# each block to catch the code drifting away from the recorded numbers.
#
# Usage: bash scripts/readme_results.sh [--check | --rewrite] [NAME...]   (default: all)
#   --check     compare README's blocks with the recorded outputs (no run)
#   --rewrite   write README's blocks from the recorded outputs (no run)
#   demo      ffn demo (5 variants x 1500 steps, 1 seed)       several minutes
#   compare   ffn compare relu,gelu,swiglu,moe, 300 steps, 3 seeds
set -euo pipefail
cd "$(dirname "$0")/.."
FFN="${FFN_BIN:-build/ffn}"
THREADS=2
rec=tests/data/readme
check=0 rewrite=0
if [[ "${1:-}" == --check ]]; then check=1; shift; fi
if [[ "${1:-}" == --rewrite ]]; then rewrite=1; shift; fi
names=("$@")
((${#names[@]})) || names=(demo compare)

# the command of a block (the flags its check reruns with one variant)
command_of() {
    case "$1" in
        demo) echo "demo --threads $THREADS" ;;
        compare) echo "compare --variants relu,gelu,swiglu,moe --steps 300 --seeds 3 --threads $THREADS" ;;
        *) echo "unknown block '$1' (demo, compare)" >&2; return 1 ;;
    esac
}

# What a run printed that the README quotes: its table without the tok/s
# column (speeds differ run to run), and for the demo the explanation it
# prints under the table (its sentences follow from the numbers); not the
# lines that name files of the run's temporary directory.
table_of() {
    awk '/^variant /{on=1} /^(sentences from the best model|validation curves:|checkpoints:)/{exit} on {print}' "$1" |
        awk 'NF==0 {blank=1} !blank {sub(/ +[^ ]+$/, "")} {print}' |
        awk '{lines[NR]=$0} END {n=NR; while (n > 0 && lines[n] == "") n--; for (i = 1; i <= n; i++) print lines[i]}'
}

# the README block of NAME from its recorded files
render() {
    local name=$1
    echo "<!-- begin results: $name -->"
    echo '```'
    echo "\$ ffn $(cat "$rec/$name.cmd")"
    cat "$rec/$name.out"
    echo '```'
    echo "($(cat "$rec/$name.meta"); regenerate with \`bash scripts/readme_results.sh $name\`)"
    echo "<!-- end results: $name -->"
}

# README.md with NAME's block replaced by the rendering in file $2
splice() {
    /usr/bin/python3 - "$1" "$2" <<'EOF'
import re, sys
name, block = sys.argv[1], open(sys.argv[2], encoding='utf-8').read().rstrip('\n')
readme = open('README.md', encoding='utf-8').read()
pat = re.compile(r'<!-- begin results: %s -->.*?<!-- end results: %s -->' % (re.escape(name), re.escape(name)), re.S)
if len(pat.findall(readme)) != 1:
    sys.exit('README.md: expected one block marked <!-- begin results: %s --> ... <!-- end results: %s -->' % (name, name))
tmp = 'README.md.tmp'
open(tmp, 'w', encoding='utf-8').write(pat.sub(lambda m: block, readme))
import os; os.replace(tmp, 'README.md')
EOF
}

status=0
for name in "${names[@]}"; do
    cmd=$(command_of "$name")
    if ((check)); then
        want=$(mktemp)
        render "$name" > "$want"
        got=$(/usr/bin/python3 - "$name" <<'EOF'
import re, sys
name = sys.argv[1]
m = re.search(r'<!-- begin results: %s -->.*?<!-- end results: %s -->' % (re.escape(name), re.escape(name)),
              open('README.md', encoding='utf-8').read(), re.S)
print(m.group(0) if m else '')
EOF
)
        if [[ "$got" == "$(cat "$want")" ]]; then echo "ok   README block '$name' is its recorded output"
        else echo "FAIL README block '$name' differs from $rec/$name.out (rerun: bash scripts/readme_results.sh $name)"; diff <(echo "$got") "$want" | head -20; status=1; fi
        rm -f "$want"
        continue
    fi
    if ((rewrite)); then
        block=$(mktemp)
        render "$name" > "$block"
        splice "$name" "$block"
        rm -f "$block"
        echo "readme_results: README block '$name' rewritten from $rec/$name.*" >&2
        continue
    fi
    [[ -x "$FFN" ]] || { echo "$FFN not found: make first" >&2; exit 1; }
    mkdir -p "$rec"
    out=$(mktemp -d)
    echo "readme_results: ffn $cmd (in $out) ..." >&2
    t0=$(date +%s)
    # shellcheck disable=SC2086
    "$FFN" $cmd --out "$out/run" > "$out/stdout" 2> "$out/stderr" || { cat "$out/stderr" >&2; exit 1; }
    secs=$(($(date +%s) - t0))
    table_of "$out/stdout" > "$rec/$name.out"
    # each run's held-out loss, as the command reports it on stderr ("gelu  seed 1: val loss 0.8786, ...")
    sed -nE 's/^([a-z0-9_]+) +seed ([0-9]+): val loss ([0-9.]+),.*/\1 \2 \3/p' "$out/stderr" > "$rec/$name.runs"
    [[ -s "$rec/$name.runs" ]] || { echo "no per-run losses on stderr of ffn $cmd" >&2; exit 1; }
    echo "$cmd" > "$rec/$name.cmd"
    cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
    load=$(cut -d' ' -f1 /proc/loadavg)
    "$FFN" version | awk '$1 == "simd" {print $2}' > "$rec/simd"
    echo "$THREADS threads; the speeds (tok/s) are left out; it took ${secs} s on $(date -u +%Y-%m-%d) on $(nproc) cores of an $cpu, load average $load before the run" > "$rec/$name.meta"
    render "$name" > "$out/block"
    splice "$name" "$out/block"
    echo "readme_results: README block '$name' written (${secs} s)" >&2
    rm -rf "$out"
done
exit $status
