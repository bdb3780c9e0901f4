#!/usr/bin/env bash
# test_serve.sh -- `ffn serve` from the command line and over its JSON API:
# --help and usage errors; a small model trained here served on a free port
# of 127.0.0.1; /api/info against the model's config; /api/tokenize whose
# pieces give back the text; /api/predict without edits (before = after,
# KL 0) and with edits against an independent computation
# (tests/cli/serve_predict_driver.c: the same edits through the public tap
# API in a separate program); /api/neurons against `ffn inspect --json`
# (the same neurons and values) with gate-probe labels from the word
# classes; the model file unchanged by edits; --lang zh messages; the
# warning for a non-loopback --host; a port in use; a clean stop on SIGINT
# and SIGTERM (exit 0).  The page itself is tests/browser/test_serve.mjs;
# load and hostile requests are tests/cli/test_serve_load.sh.
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
check() { # description, command...
    local what="$1"; shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
expect_exit() { # code, stderr pattern, description, args...
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
# start_server NAME ARGS...: ffn serve in the background, its URL in $url
start_server() {
    local name="$1"; shift
    "$FFN" serve "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" &
    server_pid=$!
    for _ in $(seq 1 1800); do # up to 3 min: labelling under ASan on a loaded machine
        [[ -s "$tmp/$name.out" ]] && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    full_url=$(head -n 1 "$tmp/$name.out")
    [[ "$full_url" == http://* ]] || { cat "$tmp/$name.err"; echo "FAIL server $name did not start"; exit 1; }
    url=${full_url%%\?*} token=${full_url#*\?token=}
}
# every request as the page sends it: the launch's token, same-origin, JSON
# (the refusals without them are test_serve_guard.sh)
curl() { command curl -H "Authorization: token $token" -H "Origin: ${url%/}" -H 'Content-Type: application/json' "$@"; }
stop_server() { # signal; sets $stop_rc
    kill "-$1" "$server_pid"
    stop_rc=0
    wait "$server_pid" || stop_rc=$?
    server_pid=
}
post() { curl -s -S --max-time 120 -H 'Content-Type: application/json' -d "$2" "$url${1#/}"; }
# jcheck FILE EXPR DESCRIPTION: a python expression over d (the JSON in FILE)
jcheck() {
    if "$PY" - "$1" "$2" <<'EOF'; then pass "$3"; else fail "$3"; fi
import json, sys
d = json.load(open(sys.argv[1], encoding='utf-8'))
ok = eval(sys.argv[2])
if not ok: print('   expression false:', sys.argv[2], '\n   on', json.dumps(d)[:600], file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
}

# ---- usage ---------------------------------------------------------------------------
"$FFN" serve --help >"$tmp/help.txt"
for w in --port --host --lang 127.0.0.1 /api/predict /api/neurons "1 MiB" "one at a time" \
         "never opens a path" "layers.L.m"; do
    check "--help mentions $w" grep -q -- "$w" "$tmp/help.txt"
done
check "ffn --help lists serve" bash -c "grep -q '^  serve' <<<\"\$('$FFN' --help)\""
expect_exit 2 "missing MODEL" "no MODEL" serve
expect_exit 2 "--port" "--port out of range" serve "$tmp" --port 70000
expect_exit 2 "--lang" "--lang unknown" serve "$tmp" --lang fr
expect_exit 2 "unknown option" "unknown flag" serve "$tmp" --bogus
expect_exit 1 "$tmp/nope" "missing model named" serve "$tmp/nope" --port 0

# ---- a small model ---------------------------------------------------------------------
m="$tmp/m"
"$FFN" train --steps 200 --hidden-size 32 --intermediate-size 50 --num-hidden-layers 2 \
    --batch-size 4 --seq-len 64 --threads 2 --seed 3 --out "$m" >/dev/null 2>"$tmp/train.err" \
    || { cat "$tmp/train.err"; exit 1; }
sum_before=$(sha256sum "$m/model.safetensors" | cut -d' ' -f1)

start_server main "$m" --port 0 --threads 2
check "the URL is on 127.0.0.1 with a 256-bit token" grep -q '^http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]\{64\}$' "$tmp/main.out"
check "labels computed at the start (stderr says so)" grep -q "labels from the en corpus" "$tmp/main.err"

curl -s -S "${url}api/info" >"$tmp/info.json"
jcheck "$tmp/info.json" "d['config']['num_hidden_layers'] == 2 and [l['d_ff'] for l in d['layers']] == [50, 50] and d['config']['hidden_size'] == 32" \
    "/api/info: layers and d_ff of the model"
"$PY" - "$m/config.json" "$tmp/info.json" <<'EOF' && pass "/api/info: the config equals config.json" || fail "/api/info: the config equals config.json"
import json, sys
c, i = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))['config']
keys = ['vocab_size', 'hidden_size', 'intermediate_size', 'num_hidden_layers', 'num_attention_heads',
        'num_key_value_heads', 'max_position_embeddings', 'hidden_act']
bad = [k for k in keys if c[k] != i[k]]
if bad: print('   differ:', bad, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
jcheck "$tmp/info.json" "d['vocab']['kind'] == 'char' and d['labels']['available'] and d['labels']['classes'][0] == 'name' and len(d['labels']['classes']) == 7" \
    "/api/info: vocabulary kind and the probe's classes"
jcheck "$tmp/info.json" "d['limits']['body_bytes'] == 1048576 and d['limits']['run_tokens'] == 64 and d['lang'] == 'en' and d['messages']['live.off'] == 'off'" \
    "/api/info: limits and the English messages"
jcheck "$tmp/info.json" "sorted(e['path'] for e in d['endpoints']) == ['/api/edit', '/api/edit/reset', '/api/edit/save', '/api/info', '/api/neurons', '/api/predict', '/api/tokenize', '/api/trace']" \
    "/api/info lists the endpoint table"

text="Mary gave John the apple because"
post /api/tokenize "{\"text\":\"$text\"}" >"$tmp/tok.json"
jcheck "$tmp/tok.json" "''.join(t['piece'] for t in d['tokens']) == '$text' and d['n_tokens'] == len('$text')" \
    "/api/tokenize: the pieces give back the text"

post /api/predict "{\"text\":\"$text\",\"k\":5}" >"$tmp/p0.json"
jcheck "$tmp/p0.json" "len(d['before']) == 5 and d['kl'] == 0 and all(e['p_before'] == e['p_after'] for e in d['before']) and d['before'] == d['after']" \
    "/api/predict without edits: before = after, KL 0"
jcheck "$tmp/p0.json" "all(d['before'][i]['p_before'] >= d['before'][i + 1]['p_before'] for i in range(4)) and d['position'] == len('$text') - 1" \
    "/api/predict: top-k in descending order, at the last position"

# the strongest neurons of the last token at layer 1, then switch two off and scale one
post /api/neurons "{\"text\":\"$text\",\"position\":-1,\"layer\":1,\"k\":4}" >"$tmp/n.json"
jcheck "$tmp/n.json" "len(d['layers']) == 1 and d['layers'][0]['layer'] == 1 and len(d['layers'][0]['neurons']) == 4 and d['position'] == len('$text') - 1" \
    "/api/neurons: k neurons of the chosen layer"
jcheck "$tmp/n.json" "all(n['label'] and n['label']['class'] in ('name','pronoun','object','verb','function','modifier','punct') for n in d['layers'][0]['neurons'])" \
    "/api/neurons: every neuron has a word-class label"
ids=$("$PY" -c "import json,sys; print(' '.join(str(t['id']) for t in json.load(open('$tmp/tok.json'))['tokens']))")
"$FFN" inspect "$m" --ids "$ids" --layer 1 --top 4 --json --threads 2 >"$tmp/inspect.json" 2>/dev/null
"$PY" - "$tmp/n.json" "$tmp/inspect.json" <<'EOF' && pass "/api/neurons equals ffn inspect --json (indices, gate_pre, gate, up, product, promoted)" || fail "/api/neurons equals ffn inspect --json"
import json, sys
n, ins = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t = n['position']
ref = [x for x in ins['layers'][0]['tokens'] if x['position'] == t][0]['neurons']
got = n['layers'][0]['neurons']
ok = len(ref) == len(got)
for a, b in zip(got, ref):
    ok &= a['index'] == b['index']
    for f in ('gate_pre', 'gate', 'up', 'product'):  # inspect prints 6 digits
        ok &= abs(a[f] - b[f]) <= 1e-5 * (1 + abs(b[f]))
    ok &= [p['id'] for p in a['promoted']] == [p['id'] for p in b['promoted']]
if not ok: print('   serve:', got, '\n   inspect:', ref, file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
read -r n1 n2 n3 < <("$PY" -c "import json; print(*[x['neuron'] for x in json.load(open('$tmp/n.json'))['layers'][0]['neurons'][:3]])")
edits="[{\"layer\":1,\"neuron\":$n1,\"scale\":0},{\"layer\":1,\"neuron\":$n2,\"scale\":0},{\"layer\":0,\"neuron\":$n3,\"scale\":3.5}]"
post /api/predict "{\"text\":\"$text\",\"edits\":$edits,\"k\":8}" >"$tmp/p1.json"
jcheck "$tmp/p1.json" "d['kl'] > 0 and len(d['edits']) == 3 and d['edits'][0]['scale'] == 0" "/api/predict with edits: KL > 0, edits echoed"

cc -std=c11 -D_GNU_SOURCE -O2 -fopenmp -I"$ROOT/include" -o "$tmp/driver" "$ROOT/tests/cli/serve_predict_driver.c" \
    "$ROOT/build/libffn.a" -ldnnl -fopenmp -lm -lpthread -lpcre2-8
"$tmp/driver" "$m" "$ids" "1:$n1:0" "1:$n2:0" "0:$n3:3.5" >"$tmp/driver.json"
"$PY" - "$tmp/p1.json" "$tmp/driver.json" <<'EOF' && pass "/api/predict equals the tap-API driver (|dp| <= 1e-6, KL rel 1e-4)" || fail "/api/predict equals the tap-API driver"
import json, sys
p, d = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
worst = 0.0
for e in p['before'] + p['after']:
    worst = max(worst, abs(e['p_before'] - d['before'][e['id']]), abs(e['p_after'] - d['after'][e['id']]))
top_after = sorted(range(len(d['after'])), key=lambda v: (-d['after'][v], v))[:8]
ok = worst <= 1e-6 and abs(p['kl'] - d['kl']) <= 1e-4 * d['kl'] + 1e-9
ok &= [e['id'] for e in p['after']] == top_after or worst <= 1e-7
print(f'   max |dp| {worst:.2e}, kl server {p["kl"]:.6g} driver {d["kl"]:.6g}')
sys.exit(0 if ok else 1)
EOF
post /api/predict "{\"text\":\"$text\",\"k\":5}" >"$tmp/p2.json"
check "after the edits the model is as before (same prediction)" cmp -s "$tmp/p0.json" "$tmp/p2.json"
check "the model on disk is unchanged" test "$(sha256sum "$m/model.safetensors" | cut -d' ' -f1)" = "$sum_before"
post /api/predict "{\"ids\":[$(tr ' ' ',' <<<"$ids")],\"edits\":$edits,\"k\":8}" >"$tmp/p3.json"
check "\"ids\" give the same prediction as the text" cmp -s <(sed 's/"tokens":.*"position"//' "$tmp/p1.json") <(sed 's/"tokens":.*"position"//' "$tmp/p3.json")

# /api/trace: the same numbers as `ffn trace --json` on the same prompt
post /api/trace "{\"text\":\"$text\",\"subject\":\"John\"}" >"$tmp/tr.json"
"$FFN" trace "$m" --prompt "$text" --subject John --json >"$tmp/tr_cli.json" 2>"$tmp/tr_cli.err"
if "$PY" - "$tmp/tr.json" "$tmp/tr_cli.json" <<'EOF'; then pass "/api/trace equals ffn trace --json (p_clean, p_corrupt, every effect)"; else fail "/api/trace differs from ffn trace --json"; fi
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
def flat(x):
    return [v for row in x for v in row] if isinstance(x, list) else x
# the command prints 6 significant digits
ok = abs(a["p_clean"] - b["p_clean"]) < 1e-6 and abs(a["p_corrupt"] - b["p_corrupt"]) < 1e-6
ok &= a["target"] == b["target_id"]
for k, rows in a["effects"].items():
    if k in b:
        ok &= max(abs(x - y) for x, y in zip(flat(rows), flat(b[k]))) < 1e-6
    else:
        ok = False; print("   ffn trace --json has no", k, "; keys:", list(b.keys()), file=sys.stderr)
ok &= a["subject"][1] - a["subject"][0] == 4 and len(a["effects"]["mlp_out"]) == 2
print("   p_clean %.6f p_corrupt %.6f" % (a["p_clean"], a["p_corrupt"]), file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
code=$(curl -s -o "$tmp/bad.json" -w '%{http_code}' -d '{"text":"Mary gave","subject":"Tom"}' "${url}api/trace")
check "trace: a subject not in the text is a 400 naming it" bash -c "[[ $code == 400 ]] && grep -q 'Tom' '$tmp/bad.json'"

code=$(curl -s -o "$tmp/bad.json" -w '%{http_code}' -d '{"text":"x","edits":[{"layer":1,"neuron":50,"scale":0}]}' "${url}api/predict")
check "neuron out of range: 400 naming the range" bash -c "[[ $code == 400 ]] && grep -q '0..49' '$tmp/bad.json'"

stop_server INT
check "SIGINT: a clean stop, exit 0" test "$stop_rc" -eq 0
check "SIGINT: says it stops" grep -q "SIGINT: stopping" "$tmp/main.err"

# ---- --lang zh, --no-labels, SIGTERM ----------------------------------------------------------
start_server zh "$m" --port 0 --lang zh --no-labels --threads 1
curl -s -S "${url}api/info" >"$tmp/info_zh.json"
jcheck "$tmp/info_zh.json" "d['lang'] == 'zh' and d['messages']['live.off'] == '关闭' and d['messages']['page.layer'] == '层' and not d['labels']['available'] and 'no-labels' in d['labels']['reason']" \
    "--lang zh: Chinese messages; --no-labels: no labels, and why"
busy=$(curl -s -o /dev/null -w '%{http_code}' "${url}")
check "the page is served" test "$busy" = 200
port=${url##*:}; port=${port%/}
expect_exit 1 "cannot listen" "a port in use: exit 1" serve "$m" --port "$port" --no-labels
stop_server TERM
check "SIGTERM: a clean stop, exit 0" test "$stop_rc" -eq 0

# ---- a llama2.c model (stories260K) with a tokenizer.bin: bos, labels -----------------------
stories="${FFN_SHARED:-/work/shared}/models/stories260K.bin"
if [[ -f "$stories" ]]; then
    # a byte-level tokenizer.bin of the model's 512 tokens: <unk> <s> </s>, the 256 <0xXX>, filler
    "$PY" - "$tmp/tok512.bin" <<'EOF'
import struct, sys
pieces = [b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % i for i in range(256)]
pieces += [b"<f%d>" % i for i in range(512 - len(pieces))]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<i", max(map(len, pieces))))
    for p in pieces:
        f.write(struct.pack("<fi", 0.0, len(p)) + p)
EOF
    expect_exit 1 "--tokenizer FILE" "a llama2.c model without its tokenizer: exit 1 saying so" serve "$stories" --port 0
    start_server l2c "$stories" --tokenizer "$tmp/tok512.bin" --port 0 --threads 2
    curl -s -S "${url}api/info" >"$tmp/info_l2c.json"
    jcheck "$tmp/info_l2c.json" "d['format'] == 'llama2c' and d['vocab']['kind'] == 'llama2c' and d['vocab']['bos'] == 1 and d['labels']['available'] and d['labels']['corpus'] == 'en'" \
        "stories260K: a llama2c vocabulary with bos; labels from the English corpus"
    post /api/neurons '{"text":"Once upon a time","position":3,"layer":2,"k":3}' >"$tmp/n_l2c.json"
    jcheck "$tmp/n_l2c.json" "len(d['layers'][0]['neurons']) == 3 and all(n['label']['class'] in ('name','pronoun','object','verb','function','modifier','punct') for n in d['layers'][0]['neurons'])" \
        "stories260K: neurons with word-class labels"
    post /api/predict '{"text":"Once upon","edits":[{"layer":4,"neuron":100,"scale":0}],"k":3}' >"$tmp/p_l2c.json"
    jcheck "$tmp/p_l2c.json" "d['tokens'][0]['id'] == 1 and len(d['after']) == 3 and d['kl'] >= 0" "stories260K: predict with an edit (bos first)"
    stop_server TERM
else
    fail "stories260K.bin not found under \$FFN_SHARED/models"
fi

# ---- a non-loopback address warns loudly ------------------------------------------------------
start_server wide "$m" --port 0 --host 0.0.0.0 --no-labels --threads 1
stop_server TERM
check "--host 0.0.0.0: a WARNING about the network on stderr" grep -q "WARNING: listening on 0.0.0.0" "$tmp/wide.err"

echo "$fails failure(s)"
((fails == 0))
