#!/usr/bin/env bash
# test_readme_tour.sh -- README.md's "A quick tour" runs as written on a fresh
# clone: its code block is extracted and every command run in order, in an
# empty directory that holds only build/ and tests/ of this tree, so every
# file the tour uses must be one it creates.  As the README says, `--steps
# 300` and `--steps 1000` become `--steps 20` and `--seeds 3` becomes
# `--seeds 1`, and the
# `make` lines are skipped (the tree is built; make bench wants a quiet
# machine).  Each command must exit 0.
set -uo pipefail
ROOT="${FFN_ROOT:-$PWD}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# the block: from "## A quick tour" to the end of its first ```sh fence
awk '/^## A quick tour/ {t = 1} t && /^```sh/ {b = 1; next} b && /^```/ {exit} b {print}' \
    "$ROOT/README.md" >"$tmp/block"
[[ -s "$tmp/block" ]] || { echo "FAIL no tour block in README.md"; exit 1; }
grep -q 'says so\|--steps 20' "$ROOT/README.md" || { echo "FAIL README does not state the substitutions"; exit 1; }
# join continuation lines, drop comments and blank lines
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$tmp/block" | sed -e 's/[[:space:]]#.*$//' -e '/^[[:space:]]*#/d' \
    -e '/^[[:space:]]*$/d' >"$tmp/commands"

mkdir "$tmp/clone"
ln -s "$ROOT/build" "$tmp/clone/build"
ln -s "$ROOT/tests" "$tmp/clone/tests"
n=0
while IFS= read -r cmd; do
    case "$cmd" in make*) echo "skip $cmd"; continue ;; esac
    run=${cmd//--steps 300/--steps 20}
    run=${run//--steps 1000/--steps 20}
    run=${run//--seeds 3/--seeds 1}
    n=$((n + 1))
    if (cd "$tmp/clone" && bash -c "$run" >"$tmp/out" 2>"$tmp/err" </dev/null); then
        echo "ok   $run"
    else
        echo "FAIL $run"; tail -n 5 "$tmp/err" | sed 's/^/    /'; fail=1
    fi
done <"$tmp/commands"
(( n >= 15 )) || { echo "FAIL only $n commands found in the tour"; fail=1; }
exit $fail
