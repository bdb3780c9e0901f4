#!/usr/bin/env bash
# test_report_cli.sh -- `ffn report`: the self-contained HTML report of a run
# directory, from the command line: what it writes (the embedded data read
# back with python), that it references nothing outside the file, every
# option, and every error naming its file with the right exit code.  The
# browser side is tests/browser/test_report.mjs.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { # description, command...
    local what="$1"; shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
# expect_exit CODE PATTERN description -- args...: exit code and a stderr pattern
expect_exit() {
    local code="$1" pattern="$2" what="$3"; shift 3
    local got=0
    "$FFN" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" || got=$?
    if [[ "$got" -ne "$code" ]]; then
        fail "$what: exit $got, expected $code ($(head -c 300 "$tmp/err.txt"))"
    elif ! grep -q -- "$pattern" "$tmp/err.txt"; then
        fail "$what: stderr lacks '$pattern': $(head -c 300 "$tmp/err.txt")"
    else
        pass "$what (exit $code)"
    fi
}
# the embedded JSON of a report, as python can read it: jq-like checks
data_check() { # file, python expression over d (the data) that must be True, description
    if "$PY" - "$1" "$2" <<'EOF'; then pass "$3"; else fail "$3"; fi
import json, re, sys
html = open(sys.argv[1], encoding='utf-8').read()
m = re.search(r'<script type="application/json" id="ffn-data">\n(.*?)\n</script>', html, re.S)
d = json.loads(m.group(1))
ok = eval(sys.argv[2], {'d': d, 'len': len, 'all': all, 'any': any, 'abs': abs})
if not ok:
    print('   expression false:', sys.argv[2], file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}

# ---- usage ---------------------------------------------------------------------
"$FFN" report --help >"$tmp/help.txt"
check "--help exits 0 and explains the page" grep -q "self-contained" "$tmp/help.txt"
for w in --prompt --layer --model --config --top "linear collapse" "no network request"; do
    check "--help mentions $w" grep -qi -- "$w" "$tmp/help.txt"
done
check "ffn --help lists report" bash -c "grep -q '^  report' <<<\"\$('$FFN' --help)\""
expect_exit 2 "missing RUN_DIR" "no RUN_DIR" report
expect_exit 2 "unknown option" "unknown option" report "$tmp" --bogus
expect_exit 2 "--top" "--top 0" report "$tmp" --top 0
expect_exit 1 "$tmp/nope" "missing directory named" report "$tmp/nope"
mkdir "$tmp/empty"
expect_exit 1 "$tmp/empty: no runs found" "empty directory named" report "$tmp/empty"

# ---- a small run directory --------------------------------------------------------
run="$tmp/run"
"$FFN" compare --variants linear,swiglu --steps 6 --seeds 1 --hidden-size 32 --batch-size 4 \
    --seq-len 32 --eval-every 3 --eval-batches 2 --sentences 1000 --threads 2 --out "$run" \
    >/dev/null 2>"$tmp/compare.err" || { cat "$tmp/compare.err"; exit 1; }

out=$("$FFN" report "$run" --threads 2)
check "default output RUN_DIR/report.html, path printed" test "$out" = "$run/report.html" -a -s "$run/report.html"
check "no temporary file left" test ! -e "$run/report.html.tmp"
html="$run/report.html"
check "one file: a Content-Security-Policy forbids any load" grep -q "default-src 'none'" "$html"
check "no external script, style, image or font" bash -c "! grep -Eiq '<script[^>]+src=|<link[^>]+stylesheet|<img|@import|@font-face|url\\(' '$html'"
check "no URL but the SVG namespace" bash -c "! grep -Eo 'https?://[^\"'\\'' ]+' '$html' | grep -v '^http://www.w3.org/2000/svg$' | grep -q ."
if "$PY" - "$html" "$ROOT/tools/report" <<'EOF'; then pass "the page holds tools/report/ (report.css, format.js, report.js) byte for byte, every marker replaced"; else fail "the page holds tools/report/ byte for byte"; fi
import sys
html = open(sys.argv[1], encoding='utf-8').read()
for name, wrap in (('report.css', '<style>\n%s</style>'), ('format.js', '<script>\n%s</script>'), ('report.js', '<script>\n%s</script>')):
    text = open(sys.argv[2] + '/' + name, encoding='utf-8').read()
    if (wrap % text) not in html:
        print('   ', name, 'is not in the page as it is in the tree', file=sys.stderr)
        sys.exit(1)
sys.exit(1 if '{{' in html.split('id="ffn-data"')[0] else 0)
EOF
data_check "$html" "len(d['curves']) == 2 and all(len(c['val']) >= 2 for c in d['curves'])" "curves of both runs with validation points"
data_check "$html" "[v['variant'] for v in d['variants']] == ['linear', 'swiglu']" "compare.json table embedded"
data_check "$html" "[p['name'] for p in d['params']] == ['linear', 'swiglu', 'Llama-2-7B'] and d['params'][2]['total'] == 6738415616" \
    "parameter chart: both variants and the built-in Llama-2-7B (6,738,415,616)"
data_check "$html" "all(sum(p['parts'].values()) == p['total'] for p in d['params'])" "parameter parts add up to the totals"
data_check "$html" "[m['name'] for m in d['models']] == ['swiglu'] and len(d['models'][0]['ids']) == len('Mary gave John the apple because he was hungry.')" \
    "default model swiglu on the default prompt (char tokens)"
data_check "$html" "all(len(row) == 2 and all(len(e['n']) == 8 and len(e['n'][0][8]) == 6 for e in row) for row in d['models'][0]['tok'])" \
    "every token: 2 layers x top 8 neurons x 6 promoted tokens"
data_check "$html" "all(str(i) in d['models'][0]['vocab'] for row in d['models'][0]['tok'] for e in row for n in e['n'] for i in n[8])" \
    "every promoted token's text is embedded"
data_check "$html" "all(abs(e['n'][0][7]) >= abs(e['n'][-1][7]) for row in d['models'][0]['tok'] for e in row)" \
    "neurons ordered by |contribution|"
data_check "$html" "d['collapse']['run'] == 'linear-seed1' and len(d['collapse']['layers']) == 2 and all(l['rel'] < 1e-4 for l in d['collapse']['layers'])" \
    "linear collapse: merged map equals the two layers (relative < 1e-4)"
data_check "$html" "d['collapse']['params_before'] == 2 * 32 * 128 and d['collapse']['params_after'] == 32 * 32" \
    "linear collapse: 2DF parameters before, D^2 after"

# the page's neurons are ffn inspect's: same neurons, values to the 4 digits the page keeps
# (ffn inspect keeps the first context of 32 tokens; the page runs the rest as a second window)
"$FFN" inspect "$run/swiglu-seed1" --prompt "Mary gave John the apple because he was hungry." --top 8 \
    --promoted 6 --json --threads 2 >"$tmp/inspect.json"
if "$PY" - "$html" "$tmp/inspect.json" "$FFN" "$run/swiglu-seed1" <<'EOF'; then pass "neurons agree with ffn inspect --json (every token, layer, neuron; both windows)"; else fail "neurons agree with ffn inspect --json"; fi
import json, re, sys
html = open(sys.argv[1], encoding='utf-8').read()
d = json.loads(re.search(r'id="ffn-data">\n(.*?)\n</script>', html, re.S).group(1))
ins = json.load(open(sys.argv[2]))
m = d['models'][0]
bad = 0
assert len(ins['layers']) == len(m['layers']) == 2
for li, layer in enumerate(ins['layers']):
    assert m['layers'][li] == layer['layer']
    assert len(layer['tokens']) == 32  # ffn inspect keeps the context; the page ran windows
    for t, tk in enumerate(layer['tokens']):
        e = m['tok'][t][li]
        for n, ref in zip(e['n'], tk['neurons'], strict=True):
            same = n[0] == ref['expert'] and n[1] == ref['index'] and n[8] == [p['id'] for p in ref['promoted']]
            for got, want in ((n[3], ref['gate']), (n[4], ref['up']), (n[5], ref['product'])):
                same = same and abs(got - want) <= 1e-3 * abs(want) + 1e-6
            if not same:
                bad += 1
                print('   mismatch at layer', layer['layer'], 'token', t, n[:6], ref['index'], ref['product'], file=sys.stderr)
        if abs(e['x'] - tk['explained']) > 1e-3 * abs(tk['explained']) + 1e-6:
            bad += 1
# the second window (tokens 32..46) is its own sequence from position 0
import subprocess
ids = ' '.join(str(i) for i in m['ids'][32:])
w2 = json.loads(subprocess.run([sys.argv[3], 'inspect', sys.argv[4], '--ids', ids, '--top', '8', '--promoted', '6',
                                '--json', '--threads', '2'], check=True, capture_output=True, text=True).stdout)
for li, layer in enumerate(w2['layers']):
    for t, tk in enumerate(layer['tokens']):
        e = m['tok'][32 + t][li]
        if [n[1] for n in e['n']] != [r['index'] for r in tk['neurons']]:
            bad += 1
            print('   window 2 mismatch at layer', layer['layer'], 'token', 32 + t, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF

# ---- options ----------------------------------------------------------------------
mix="$ROOT/tests/data/configs/Mixtral-8x7B-v0.1.json"
"$FFN" report "$run" --out "$tmp/opts.html" --config "$mix" --config "$ROOT/tests/data/configs/gpt2.json" \
    --layer 0 --top 3 --promoted 2 --model linear --model "$run/swiglu-seed1" \
    --prompt "Mary gave John the apple. Zürich ☃" --threads 2 >/dev/null
mix_total=$("$FFN" params "$mix" --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["total_params"])')
data_check "$tmp/opts.html" "[p['name'] for p in d['params']][2:] == ['Mixtral-8x7B-v0.1', 'gpt2'] and d['params'][2]['total'] == $mix_total" \
    "--config twice: Mixtral ($mix_total, as ffn params counts) and gpt2 replace Llama-2-7B"
data_check "$tmp/opts.html" "d['params'][2]['active']['ffn'] < d['params'][2]['parts']['ffn'] / 3" "Mixtral's active FFN is 2 of 8 experts"
data_check "$tmp/opts.html" "[m['name'] for m in d['models']] == ['linear', 'swiglu-seed1']" "--model by variant and by directory"
data_check "$tmp/opts.html" "all(m['layers'] == [0] and all(len(r) == 1 and len(r[0]['n']) == 3 and len(r[0]['n'][0][8]) == 2 for r in m['tok']) for m in d['models'])" \
    "--layer 0 --top 3 --promoted 2"
data_check "$tmp/opts.html" "d['models'][0]['unk'] >= 2" "characters outside the vocabulary counted as <unk>"
check "a prompt with a quote, </script> and & stays inside the data" \
    "$FFN" report "$run" --out "$tmp/esc.html" --prompt 'a "b" </script><b>& c' --threads 2
data_check "$tmp/esc.html" "d['models'][0]['prompt'] == 'a \"b\" </script><b>& c'" "the prompt round-trips through the page's JSON"
check "no raw </script> inside the data (one per script element)" \
    bash -c "[ \$(grep -o '</script>' '$tmp/esc.html' | wc -l) -eq \$(grep -o '<script' '$tmp/esc.html' | wc -l) ]"

# 200 tokens: windows of the model's 32-token context
long=$("$PY" -c "print(('Mary gave John the apple because he was hungry. ' * 5)[:200])")
"$FFN" report "$run" --out "$tmp/long.html" --prompt "$long" --threads 2 >/dev/null
data_check "$tmp/long.html" "len(d['models'][0]['tok']) == 200 and d['models'][0]['windows'] == 7" "200-token prompt in 7 windows of 32"
size=$(stat -c %s "$tmp/long.html")
check "200-token report stays small ($size bytes < 2 MB)" test "$size" -lt 2000000

# a single ffn train checkpoint (no compare.json): its metrics next to it
"$FFN" train --steps 4 --hidden-size 32 --num-hidden-layers 1 --intermediate-size 64 --batch-size 2 \
    --seq-len 16 --eval-every 2 --eval-batches 1 --corpus-sentences 500 --threads 2 --quiet \
    --out "$tmp/single" --log "$tmp/single.metrics.jsonl" >/dev/null
"$FFN" report "$tmp/single" --out "$tmp/single.html" --threads 2 >/dev/null
data_check "$tmp/single.html" "len(d['curves']) == 1 and d['curves'][0]['run'] == 'single' and [m['name'] for m in d['models']] == ['single'] and d['collapse'] is None" \
    "a single ffn train checkpoint: its curve, its neurons, no collapse section"

# ---- errors name the file; a failed run leaves the old report alone ----------------------
expect_exit 1 "nope.json" "--config missing file named" report "$run" --out "$tmp/x.html" --config "$tmp/nope.json"
expect_exit 2 "have: linear, swiglu" "--model unknown lists the variants" report "$run" --out "$tmp/x.html" --model gelu
expect_exit 2 "--layer 5: swiglu has 2 layers" "--layer out of range" report "$run" --out "$tmp/x.html" --layer 5
expect_exit 1 "$tmp/no/such/dir/r.html.tmp" "unwritable --out named" report "$run" --out "$tmp/no/such/dir/r.html"
check "nothing written on failure" test ! -e "$tmp/x.html"
before=$(md5sum <"$html")
cp "$run/compare.json" "$tmp/compare.json.bak"
printf '{"variants": [' >"$run/compare.json"
expect_exit 1 "$run/compare.json" "truncated compare.json named" report "$run"
check "the previous report.html is untouched" test "$(md5sum <"$html")" = "$before"
cp "$tmp/compare.json.bak" "$run/compare.json"
printf 'garbage\n' >>"$run/swiglu-seed1.metrics.jsonl"
expect_exit 1 "swiglu-seed1.metrics.jsonl: line 7" "bad metrics line named with its line number" report "$run"

if ((fails)); then echo "$fails check(s) failed"; exit 1; fi
echo "all report CLI checks passed"
