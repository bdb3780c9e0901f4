#!/usr/bin/env bash
# test_help_width.sh -- every --help (each command of tools/commands.def and
# the subcommands of bench and inspect) fits 80 columns (a CJK character is
# two), prints no internal bound (an int64 limit as a range), and bench
# --help names every benchmark it runs.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
root="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mapfile -t cmds < <(sed -n 's/^CMD(\([a-z_-]*\),.*/\1/p' "$root/tools/commands.def")
[[ ${#cmds[@]} -ge 20 ]] || fail "only ${#cmds[@]} commands read from tools/commands.def"
pages=()
for c in "${cmds[@]}"; do pages+=("$c"); done
for s in layer moe peak bandwidth link qgemm model; do pages+=("bench $s"); done
for s in keys gates; do pages+=("inspect $s"); done
n=0
for p in "${pages[@]}"; do
    # shellcheck disable=SC2086
    "$FFN" $p --help >"$tmp/h" 2>&1 || fail "ffn $p --help exits non-zero"
    /usr/bin/python3 - "$tmp/h" "$p" <<'PY' || exit 1
import sys, unicodedata
path, page = sys.argv[1], sys.argv[2]
bad = []
for i, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
    w = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)
    if w > 80:
        bad.append("line %d is %d columns: %s" % (i, w, line))
    if "9223372036854775" in line:
        bad.append("line %d prints an int64 limit: %s" % (i, line))
if bad:
    print("FAIL: ffn %s --help: %s" % (page, "; ".join(bad[:3])), file=sys.stderr)
    sys.exit(1)
PY
    n=$((n + 1))
done
"$FFN" bench --help | head -1 | grep -q "link" || fail "bench --help's usage line does not name link"
echo "ok   $n help pages fit 80 columns"
