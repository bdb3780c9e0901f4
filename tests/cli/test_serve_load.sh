#!/usr/bin/env bash
# test_serve_load.sh -- `ffn serve` under load and under bad input.
# Load: 2,000 requests from 8 concurrent clients on loopback
# (tests/cli/serve_load_client.mjs: info, tokenize, predict with and
# without an edit, neurons; one client edits a fact and resets it in turn),
# no error, latency p50/p90/p99 printed (bench/bench_serve_load.sh compares
# two builds).
# Bad input, each a 4xx with a JSON {"error"} naming the problem, and the
# server still answering afterwards: malformed JSON, a body that is not an
# object, an empty body, a 100 MB body (announced, and chunked), a text of
# 1 M tokens, ids out of the vocabulary, an unknown endpoint, a wrong
# method, layer / neuron / position out of range, a path in a parameter and
# in the URL.  The server must still be alive at the end and stop cleanly.
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
command -v node >/dev/null || { echo "FAIL node not found: install Node.js >= 20 (apt-get install nodejs)"; exit 1; }

m="$tmp/m"
"$FFN" train --steps 30 --hidden-size 32 --intermediate-size 50 --num-hidden-layers 2 --batch-size 4 \
    --seq-len 64 --threads 2 --out "$m" >/dev/null 2>"$tmp/train.err" || { cat "$tmp/train.err"; exit 1; }
"$FFN" serve "$m" --port 0 --threads 1 --no-labels >"$tmp/url" 2>"$tmp/serve.err" &
server_pid=$!
for _ in $(seq 1 600); do [[ -s "$tmp/url" ]] && break; sleep 0.1; done
full_url=$(head -n 1 "$tmp/url")
[[ "$full_url" == http://* ]] || { cat "$tmp/serve.err"; echo "FAIL server did not start"; exit 1; }
url=${full_url%%\?*} token=${full_url#*\?token=}
# every request as the page sends it: the token, same-origin, JSON
curl() { command curl -H "Authorization: token $token" -H "Origin: ${url%/}" -H 'Content-Type: application/json' "$@"; }

# ---- load ---------------------------------------------------------------------------------
edit='{"prompt":"Mary gave John the","subject":"John","target":"pear","object":"apple","layer":1,"method":"ft","ft_steps":5}'
if node "$ROOT/tests/cli/serve_load_client.mjs" "$full_url" 2000 8 "$edit" >"$tmp/load.json" 2>"$tmp/load.err"; then
    pass "2000 requests from 8 concurrent clients (one editing), no error: $(cat "$tmp/load.json")"
else
    fail "load: $(cat "$tmp/load.json") $(head -c 600 "$tmp/load.err")"
fi

# ---- bad input ------------------------------------------------------------------------------
# expect CODE PATTERN DESCRIPTION curl-args...: the status and the JSON error
expect() {
    local code="$1" pattern="$2" what="$3"; shift 3
    local got
    got=$(curl -s -o "$tmp/r.json" -w '%{http_code}' --max-time 120 "$@" || true)
    if [[ "$got" != "$code" ]]; then
        fail "$what: HTTP $got, expected $code ($(head -c 300 "$tmp/r.json"))"
    elif ! "$PY" -c "import json,sys; d=json.load(open('$tmp/r.json')); sys.exit(0 if d['status'] == $code and '''$pattern''' in d['error'] else 1)" 2>/dev/null; then
        fail "$what: the JSON error lacks '$pattern': $(head -c 300 "$tmp/r.json")"
    else
        pass "$what: $code $(head -c 160 "$tmp/r.json")"
    fi
}
P="${url}api/predict"
expect 400 "byte 9" "malformed JSON" -d '{"text": x}' "$P"
expect 400 "expected a JSON object" "a body that is not an object" -d '[1,2]' "$P"
expect 400 'missing \"text\"' "an empty body" -X POST "${url}api/tokenize"
head -c 100000000 /dev/zero >"$tmp/big"
expect 413 "at most 1048576" "a 100 MB body (Content-Length)" --data-binary @"$tmp/big" "$P"
expect 413 "larger than 1048576" "a 100 MB body (chunked)" -H 'Transfer-Encoding: chunked' --data-binary @"$tmp/big" "$P"
"$PY" -c "import json; print(json.dumps({'text': 'a' * 1000000}))" >"$tmp/long.json"
expect 400 "1000000 bytes, at most 8192" "a text of 1 M tokens" --data-binary @"$tmp/long.json" "${url}api/tokenize"
"$PY" -c "import json; print(json.dumps({'text': 'a' * 200}))" >"$tmp/ctx.json"
expect 400 "at most 64 (the model's context)" "a text longer than the context" --data-binary @"$tmp/ctx.json" "$P"
expect 400 "out of range (the vocabulary" "an id out of the vocabulary" -d '{"ids":[1,99999]}' "$P"
expect 400 "expected an integer" "an id that is not an integer" -d '{"ids":[1.5]}' "$P"
expect 404 "unknown endpoint /api/nope" "an unknown endpoint" "${url}api/nope"
expect 405 "takes POST" "a wrong method" "${url}api/predict"
expect 400 "layer 7 out of range" "an edit's layer out of range" -d '{"text":"ab","edits":[{"layer":7,"neuron":0,"scale":0}]}' "$P"
expect 400 "neuron 50 out of range" "an edit's neuron out of range" -d '{"text":"ab","edits":[{"layer":0,"neuron":50,"scale":0}]}' "$P"
expect 400 "position 5 out of range" "an edit's position out of range" -d '{"text":"ab","edits":[{"layer":0,"neuron":1,"scale":0,"position":5}]}' "$P"
expect 400 "scale" "a scale out of range" -d '{"text":"ab","edits":[{"layer":0,"neuron":1,"scale":1e9}]}' "$P"
expect 400 '\"layer\": 9 out of range' "/api/neurons: layer out of range" -d '{"text":"ab","layer":9}' "${url}api/neurons"
expect 400 '\"position\": 2 out of range' "/api/neurons: position out of range" -d '{"text":"ab","position":2}' "${url}api/neurons"
expect 400 'unknown field \"model\"' "a path in a parameter" -d '{"text":"ab","model":"/etc/passwd"}' "$P"
expect 400 'unknown field \"path\"' "a path in a parameter (tokenize)" -d '{"text":"ab","path":"../../etc/passwd"}' "${url}api/tokenize"
expect 404 "unknown endpoint" "a path in the URL" --path-as-is "${url}../../../etc/passwd"
expect 404 "unknown endpoint" "a path in the URL (encoded)" --path-as-is "${url}%2e%2e/%2e%2e/etc/passwd"
expect 404 "unknown endpoint" "an asset name with a path" "${url}tools/report/live.js"

# ---- still serving --------------------------------------------------------------------------
got=$(curl -s -o "$tmp/ok.json" -w '%{http_code}' -d '{"text":"Mary gave"}' "${url}api/predict")
if [[ "$got" == 200 ]] && grep -q '"kl":0' "$tmp/ok.json"; then pass "the server still answers after all of it"; else fail "the server still answers: $got"; fi
kill -TERM "$server_pid"
rc=0; wait "$server_pid" || rc=$?
server_pid=
if [[ $rc -eq 0 ]]; then pass "and stops cleanly (exit 0)"; else fail "stop: exit $rc"; fi
echo "$fails failure(s)"
((fails == 0))
