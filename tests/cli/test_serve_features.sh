#!/usr/bin/env bash
# test_serve_features.sh -- `ffn serve --transcoder FILE`: a transcoder's
# features switched off and scaled over the JSON API as neurons are.
# A small char model and a transcoder of its layer 1 trained here;
#   - /api/info lists the transcoder (layer, kind, features, k, file name);
#   - /api/predict with {"layer": 1, "feature": j, "scale": s} equals an
#     independent computation (tests/cli/serve_feature_driver.c: the
#     features read through the layers.1.tc_features tap, (s - 1) a_j d_j
#     ADDed to layers.1.mlp_out with the public tap API) for a feature
#     active at the last token (off, and scaled 40x), KL > 0; scale 1 is
#     KL 0; a feature and a neuron edit together; the edits echoed;
#   - a feature of a layer without a transcoder, a feature out of range, a
#     "neuron" and a "feature" in one edit: 400 naming them;
#   - --transcoder of another model's width or a layer twice: exit 2.
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
ROOT="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
PY=/usr/bin/python3
tmp=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
check() { local what="$1"; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
jcheck() {
    if "$PY" - "$1" "$2" <<'PYEOF'; then pass "$3"; else fail "$3"; fi
import json, sys
d = json.load(open(sys.argv[1], encoding='utf-8'))
ok = eval(sys.argv[2])
if not ok: print('   expression false:', sys.argv[2], '\n   on', json.dumps(d)[:600], file=sys.stderr)
sys.exit(0 if ok else 1)
PYEOF
}

m="$tmp/m"
"$FFN" train --steps 150 --hidden-size 32 --intermediate-size 50 --num-hidden-layers 2 \
    --batch-size 4 --seq-len 64 --threads 2 --seed 3 --out "$m" >/dev/null 2>"$tmp/train.err" \
    || { cat "$tmp/train.err"; exit 1; }
"$FFN" transcoder train "$m" --layer 1 --features 96 --k 6 --steps 40 --batch-size 4 --seq-len 64 \
    --eval-windows 2 --threads 2 --out "$tmp/tc1.st" >/dev/null 2>"$tmp/tc.err" ||
    { cat "$tmp/tc.err"; exit 1; }

"$FFN" serve "$m" --port 0 --no-labels --threads 2 --transcoder "$tmp/tc1.st" \
    >"$tmp/s.out" 2>"$tmp/s.err" &
server_pid=$!
for _ in $(seq 1 1800); do
    [[ -s "$tmp/s.out" ]] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
full_url=$(head -n 1 "$tmp/s.out")
[[ "$full_url" == http://* ]] || { cat "$tmp/s.err"; echo "FAIL the server did not start"; exit 1; }
url=${full_url%%\?*} token=${full_url#*\?token=}
post() { command curl -s -S --max-time 120 -H "Authorization: token $token" -H "Origin: ${url%/}" \
    -H 'Content-Type: application/json' -d "$2" "$url${1#/}"; }
code_of() { command curl -s -o "$tmp/bad.json" -w '%{http_code}' -H "Authorization: token $token" \
    -H "Origin: ${url%/}" -H 'Content-Type: application/json' -d "$1" "${url}api/predict"; }

command curl -s -S -H "Authorization: token $token" -H "Origin: ${url%/}" "${url}api/info" >"$tmp/info.json"
jcheck "$tmp/info.json" "d['transcoders'] == [{'layer': 1, 'kind': 'transcoder', 'features': 96, 'k': 6, 'file': 'tc1.st'}]" \
    "/api/info lists the transcoder"

command curl -s -S -H "Authorization: token $token" "${url}" >"$tmp/page.html"
command curl -s -S -H "Authorization: token $token" "${url}live.js" >"$tmp/live.js"
check "the page has the feature row" grep -q 'id="feature-controls"' "$tmp/page.html"
check "the page's script sends feature edits" grep -q 'feature: e.feature' "$tmp/live.js"
text="Mary gave John the apple because"
post /api/tokenize "{\"text\":\"$text\"}" >"$tmp/tok.json"
ids=$("$PY" -c "import json; print(' '.join(str(t['id']) for t in json.load(open('$tmp/tok.json'))['tokens']))")
cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" -o "$tmp/driver" \
    "$ROOT/tests/cli/serve_feature_driver.c" "$ROOT/build/libffn.a" -ldnnl -fopenmp -lm -lpthread -lpcre2-8
"$tmp/driver" "$m" "$tmp/tc1.st" "$ids" >"$tmp/d0.json"
read -r j0 < <("$PY" -c "import json; a = json.load(open('$tmp/d0.json'))['active']; print(max(a, key=lambda x: x[1])[0])")
echo "   feature $j0: the most active at the last token"
same() { # server reply, driver output, description
    "$PY" - "$1" "$2" <<'PYEOF' && pass "$3" || fail "$3"
import json, sys
p, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
worst = 0.0
for e in p['before'] + p['after']:
    worst = max(worst, abs(e['p_before'] - d['before'][e['id']]), abs(e['p_after'] - d['after'][e['id']]))
effect = max(abs(a - b) for a, b in zip(d['before'], d['after']))
ok = worst <= 1e-6 and worst <= 1e-3 * effect and abs(p['kl'] - d['kl']) <= 1e-4 * d['kl'] + 1e-9
print(f'   max |dp| {worst:.2e} (the edit moves p by up to {effect:.3g}), kl server {p["kl"]:.6g} driver {d["kl"]:.6g}')
sys.exit(0 if ok else 1)
PYEOF
}
post /api/predict "{\"text\":\"$text\",\"edits\":[{\"layer\":1,\"feature\":$j0,\"scale\":0}],\"k\":8}" >"$tmp/p_off.json"
"$tmp/driver" "$m" "$tmp/tc1.st" "$ids" "$j0:0" >"$tmp/d_off.json"
jcheck "$tmp/p_off.json" "d['kl'] > 0 and d['edits'] == [{'layer': 1, 'feature': $j0, 'scale': 0, 'position': -1}]" \
    "feature $j0 off: KL > 0, the edit echoed as a feature"
same "$tmp/p_off.json" "$tmp/d_off.json" "feature $j0 off equals the tap-API driver"
post /api/predict "{\"text\":\"$text\",\"edits\":[{\"layer\":1,\"feature\":$j0,\"scale\":40}],\"k\":8}" >"$tmp/p_3.json"
"$tmp/driver" "$m" "$tmp/tc1.st" "$ids" "$j0:40" >"$tmp/d_3.json"
same "$tmp/p_3.json" "$tmp/d_3.json" "feature $j0 x40 equals the tap-API driver"
post /api/predict "{\"text\":\"$text\",\"edits\":[{\"layer\":1,\"feature\":$j0,\"scale\":1}],\"k\":8}" >"$tmp/p_1.json"
jcheck "$tmp/p_1.json" "d['kl'] == 0 and d['before'] == d['after']" "scale 1: the model itself (KL 0)"
post /api/predict "{\"text\":\"$text\",\"edits\":[{\"layer\":1,\"feature\":$j0,\"scale\":0},{\"layer\":0,\"neuron\":3,\"scale\":0}],\"k\":8}" >"$tmp/p_both.json"
jcheck "$tmp/p_both.json" "d['kl'] > 0 and [('feature' in e, 'neuron' in e) for e in d['edits']] == [(True, False), (False, True)]" \
    "a feature and a neuron edit in one request"
post /api/predict "{\"text\":\"$text\",\"k\":8}" >"$tmp/p_none.json"
post /api/predict "{\"text\":\"$text\",\"k\":8}" >"$tmp/p_none2.json"
check "after the feature edits the model is as before" cmp -s "$tmp/p_none.json" "$tmp/p_none2.json"

code=$(code_of '{"text":"x","edits":[{"layer":0,"feature":1,"scale":0}]}')
check "a feature of a layer without a transcoder: 400 saying so" bash -c "[[ $code == 400 ]] && grep -q 'no --transcoder of that layer' '$tmp/bad.json'"
code=$(code_of '{"text":"x","edits":[{"layer":1,"feature":96,"scale":0}]}')
check "feature out of range: 400 naming 0..95" bash -c "[[ $code == 400 ]] && grep -q '0..95' '$tmp/bad.json'"
code=$(code_of '{"text":"x","edits":[{"layer":1,"feature":1,"neuron":2,"scale":0}]}')
check "a neuron and a feature in one edit: 400" bash -c "[[ $code == 400 ]] && grep -q 'switches one of them' '$tmp/bad.json'"
kill -INT "$server_pid"
wait "$server_pid" || true
server_pid=

# bad --transcoder files
"$FFN" serve "$m" --port 0 --no-labels --transcoder "$tmp/tc1.st" --transcoder "$tmp/tc1.st" \
    >/dev/null 2>"$tmp/err" && rc=0 || rc=$?
check "a layer given twice: exit 2 saying so" bash -c "[[ $rc == 2 ]] && grep -q 'a layer given twice' '$tmp/err'"
"$FFN" train --steps 2 --hidden-size 16 --intermediate-size 20 --num-hidden-layers 2 --batch-size 2 \
    --seq-len 16 --threads 2 --out "$tmp/m16" >/dev/null 2>&1
"$FFN" serve "$tmp/m16" --port 0 --no-labels --transcoder "$tmp/tc1.st" >/dev/null 2>"$tmp/err" && rc=0 || rc=$?
check "another model's transcoder: exit 2 naming the widths" bash -c "[[ $rc == 2 ]] && grep -q 'width 32: another width' '$tmp/err'"
"$FFN" serve --help >"$tmp/shelp.txt"; grep -q -- "--transcoder FILE" "$tmp/shelp.txt" && pass "--help explains --transcoder" || fail "--help explains --transcoder"

echo "$fails failure(s)"
((fails == 0))
