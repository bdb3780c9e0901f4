#!/usr/bin/env bash
# test_serve_i18n.sh -- one --lang flag for the lesson's language in every
# command that shows the lesson (tools/i18n.c, the message catalogue):
#   ffn report --lang zh   the page's data carries the Chinese messages (the
#                          browser side is in tests/browser/test_serve.mjs);
#                          --lang en writes the same page as no --lang
#   ffn demo --lang zh     the explanation in Chinese, wrapped at 80 columns
#                          (wide characters count two); English unchanged;
#                          the whole output of a tiny demo has no English word
#                          outside identifiers, units and model terms
#   ffn serve --lang zh    (tests/cli/test_serve.sh, tests/browser/test_serve.mjs)
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { local what="$1"; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }

for c in serve report demo; do
    check "ffn $c --help: --lang en|zh" bash -c "'$FFN' $c --help | grep -q -- '--lang en|zh'"
done

# ---- the report -------------------------------------------------------------------------
run="$tmp/run"
"$FFN" train --steps 10 --hidden-size 32 --num-hidden-layers 1 --batch-size 2 --seq-len 32 \
    --threads 2 --out "$run" >/dev/null 2>"$tmp/train.err" || { cat "$tmp/train.err"; exit 1; }
"$FFN" report "$run" --threads 2 --out "$tmp/plain.html" >/dev/null
"$FFN" report "$run" --threads 2 --lang en --out "$tmp/en.html" >/dev/null
"$FFN" report "$run" --threads 2 --lang zh --out "$tmp/zh.html" >/dev/null
check "report --lang en is the report without --lang" cmp -s "$tmp/plain.html" "$tmp/en.html"
if "$PY" - "$tmp/zh.html" "$tmp/en.html" <<'EOF'; then pass "report --lang zh: Chinese messages for every data-i18n key of the page"; else fail "report --lang zh: Chinese messages"; fi
import json, re, sys
def data(p):
    html = open(p, encoding='utf-8').read()
    m = re.search(r'<script type="application/json" id="ffn-data">\n(.*?)\n</script>', html, re.S)
    return html, json.loads(m.group(1))
html, zh = data(sys.argv[1])
_, en = data(sys.argv[2])
keys = set(k for k in re.findall(r'data-i18n="([a-z_]+\.[a-z_.]+)"', html))
cjk = lambda s: re.search('[\u4e00-\u9fff]', s) is not None
missing = [k for k in keys if k not in zh['messages'] or not cjk(zh['messages'][k])]
ok = zh['lang'] == 'zh' and en['lang'] == 'en' and en['messages'].get('report.nav_curves') == 'validation loss' and len(keys) >= 10 and not missing
print('  ', len(keys), 'keys on the page')
if not ok: print('   missing or not Chinese:', missing, file=sys.stderr)
sys.exit(0 if ok else 1)
EOF

# ---- the demo's explanation -----------------------------------------------------------------
"$PY" - "$tmp/cmp.json" <<'EOF'
import json, sys
rows = [dict(variant=n, val_loss_mean=m, val_loss_std=0.01, runs=1, total_params=1000, active_params=500)
        for n, m in [('none', 2.5), ('linear', 2.4), ('gelu', 2.2), ('swiglu', 2.1), ('moe', 2.15)]]
json.dump(dict(settings=dict(steps=300, seeds=1), variants=rows), open(sys.argv[1], 'w'))
EOF
"$FFN" demo --explain-from "$tmp/cmp.json" >"$tmp/plain.txt"
"$FFN" demo --explain-from "$tmp/cmp.json" --lang en >"$tmp/en.txt"
"$FFN" demo --explain-from "$tmp/cmp.json" --lang zh >"$tmp/zh.txt"
check "demo --lang en: the English explanation" bash -c "cmp -s '$tmp/plain.txt' '$tmp/en.txt' && grep -q 'what the rows show' '$tmp/en.txt'"
check "demo --lang zh: the explanation in Chinese" bash -c "grep -q '各行说明' '$tmp/zh.txt' && grep -q '正是非线性' '$tmp/zh.txt' && ! grep -q 'what the rows show' '$tmp/zh.txt'"
check "demo --lang zh: the numbers are the same as in English" bash -c "[[ \"\$(grep -o '[+-][0-9]\.[0-9]*' '$tmp/en.txt')\" == \"\$(grep -o '[+-][0-9]\.[0-9]*' '$tmp/zh.txt')\" ]]"
if "$PY" - "$tmp/zh.txt" <<'EOF'; then pass "demo --lang zh: lines at most 80 columns (wide characters count two)"; else fail "demo --lang zh: lines at most 80 columns"; fi
import sys, unicodedata
w = [sum(2 if unicodedata.east_asian_width(c) in 'WF' else 1 for c in line.rstrip('\n')) for line in open(sys.argv[1], encoding='utf-8')]
print('   widest line:', max(w), 'columns')
sys.exit(0 if max(w) <= 80 else 1)
EOF
# ---- the whole demo in Chinese: no English a person reads ----------------------------------
# (a tiny demo: the table, the explanation, the sentences and the files;
# Latin words must be identifiers, units or model terms -- paths, flags and
# `ffn CMD` commands are data)
"$FFN" demo --lang zh --steps 4 --sentences 300 --hidden-size 16 --batch-size 2 --seq-len 16 \
    --eval-every 2 --eval-batches 1 --threads 1 --out "$tmp/dz" >"$tmp/dz.txt" 2>"$tmp/dz.err" ||
    { cat "$tmp/dz.err"; fail "demo --lang zh ran"; }
"$FFN" demo --lang en --steps 4 --sentences 300 --hidden-size 16 --batch-size 2 --seq-len 16 \
    --eval-every 2 --eval-batches 1 --threads 1 --out "$tmp/de" >"$tmp/de.txt" 2>"$tmp/de.err" ||
    { cat "$tmp/de.err"; fail "demo --lang en ran"; }
check "demo --lang en: the table's English heads" grep -q "^variant  *params  *active  *FLOPs/tok  *val loss" "$tmp/de.txt"
if "$PY" - "$tmp/dz.txt" <<'EOF'; then pass "demo --lang zh: no English words in the table, explanation, sentences or files"; else fail "demo --lang zh: English words"; fi
import re, sys
allow = set('none linear gelu swiglu moe flops sd ffn kl shazeer lm'.split())
found = set()
for line in open(sys.argv[1], encoding='utf-8'):
    line = re.sub(r'\S*/\S*', ' ', line)                 # paths
    line = re.sub(r'--[a-z-]+( N)?', ' ', line)          # flags
    line = re.sub(r'\bffn [a-z]+', ' ', line)            # commands
    for w in re.findall(r'[A-Za-z][A-Za-z_]*[A-Za-z]', line):
        if w.lower() not in allow: found.add(w)
print('   English words:', sorted(found))
sys.exit(1 if found else 0)
EOF
echo "$fails failure(s)"
((fails == 0))
