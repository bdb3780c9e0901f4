#!/usr/bin/env bash
# test_serve_guard.sh -- nobody but the user drives `ffn serve`: requests a
# hostile page or a DNS-rebinding host could send are refused with the
# right status, before any body is read, and the server keeps serving.
#   - the printed URL has a 256-bit token; /?token=T sets an HttpOnly,
#     SameSite=Strict cookie named for the port and redirects to /; a wrong
#     token there is a 401
#   - /api/ without the token, with a wrong one, one byte short, in a
#     cookie of another port: 401; with it in the cookie, "Authorization:
#     token T", "Authorization: Bearer T" or "X-FFN-Token: T": 200
#   - Host: a rebinding name, the right name with another port, an address
#     that is not the bound one, a name with a trailing dot or user info:
#     421; no Host (HTTP/1.0): 400; localhost, 127.0.0.1, with and without
#     the port: 200 (the page itself, without a token, too)
#   - POST with text/plain, form or no Content-Type (what a no-cors fetch
#     or a form sends): 415; with Origin of another site, "null", another
#     port, https: 403; Sec-Fetch-Site cross-site / same-site / none: 403;
#     neither Origin nor Sec-Fetch-Site: 403; Sec-Fetch-Site same-origin
#     without Origin: 200
#   - a refused edit/save changed nothing (no edit, nothing written)
#   - no absolute path in any reply: /api/info names the model and --data
#     by their last component only
#   - 20 refused 100 MB POSTs are refused from the headers (fast)
set -euo pipefail
FFN="${FFN_BIN:-build/ffn}"
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
check() {
    local what="$1"; shift
    if "$@"; then pass "$what"; else fail "$what"; fi
}
export FFN_NUM_THREADS=2

"$FFN" serve --help >"$tmp/help.txt"
for w in "?token=" getrandom "constant time" "Host" "421" "Origin" "Sec-Fetch-Site" "application/json" \
         "415" "no absolute path" --request-timeout --max-per-address --max-saves --max-save-mb statvfs; do
    check "--help explains $w" grep -q -- "$w" "$tmp/help.txt"
done

m="$tmp/m"
"$FFN" train --steps 30 --hidden-size 32 --intermediate-size 50 --num-hidden-layers 2 --batch-size 4 \
    --seq-len 64 --threads 2 --out "$m" >/dev/null 2>"$tmp/train.err" || { cat "$tmp/train.err"; exit 1; }
"$FFN" corpus --sentences 3000 >"$tmp/text-for-c.txt"
mkdir "$tmp/saved"
"$FFN" serve "$m" --port 0 --threads 2 --no-labels --data "$tmp/text-for-c.txt" --samples 200 \
    --save-dir "$tmp/saved" >"$tmp/url" 2>"$tmp/serve.err" &
server_pid=$!
for _ in $(seq 1 600); do [[ -s "$tmp/url" ]] && break; sleep 0.1; done
full=$(head -n 1 "$tmp/url")
[[ "$full" == http://* ]] || { cat "$tmp/serve.err"; echo "FAIL server did not start"; exit 1; }
url=${full%%\?*} token=${full#*\?token=} origin=${full%/\?*}
port=${origin##*:}
check "the URL carries a 64-hex-digit token" bash -c "[[ '$token' =~ ^[0-9a-f]{64}$ ]]"

# req EXPECTED DESCRIPTION curl-args...: the status (and a JSON error naming why for a refusal)
req() {
    local code="$1" what="$2"; shift 2
    local got
    got=$(command curl -s -o "$tmp/r" -w '%{http_code}' --max-time 30 "$@" || true)
    if [[ "$got" != "$code" ]]; then
        fail "$what: HTTP $got, expected $code ($(head -c 300 "$tmp/r"))"
    elif [[ "$code" != 2* && "$code" != 3* ]] && ! "$PY" -c "import json,sys; d=json.load(open('$tmp/r')); sys.exit(0 if d['status'] == $code and d['error'] else 1)" 2>/dev/null; then
        fail "$what: no JSON error: $(head -c 300 "$tmp/r")"
    else
        pass "$what: $got $(head -c 140 "$tmp/r" | tr '\n' ' ')"
    fi
}
A=(-H "Authorization: token $token")
J=(-H 'Content-Type: application/json')
O=(-H "Origin: $origin")
body='{"text":"Mary gave"}'
P="${url}api/predict"

# ---- the token --------------------------------------------------------------------------------
req 200 "/api/info with Authorization: token T" "${A[@]}" "${url}api/info"
req 200 "/api/info with Authorization: Bearer T" -H "Authorization: Bearer $token" "${url}api/info"
req 200 "/api/info with X-FFN-Token: T" -H "X-FFN-Token: $token" "${url}api/info"
req 200 "/api/info with the page's cookie" -H "Cookie: other=1; ffn_token_$port=$token" "${url}api/info"
req 401 "/api/info without a token" "${url}api/info"
req 401 "/api/info with a wrong token" -H "Authorization: token ${token%?}x" "${url}api/info"
req 401 "/api/info with the token one byte short" -H "Authorization: token ${token%?}" "${url}api/info"
req 401 "/api/info with the token and one byte more" -H "X-FFN-Token: ${token}0" "${url}api/info"
req 401 "/api/info with the cookie of another port" -H "Cookie: ffn_token_1$port=$token" "${url}api/info"
req 401 "/api/info with the token in the query" "${url}api/info?token=$token"
req 401 "POST /api/predict without a token (same-origin, JSON)" "${J[@]}" "${O[@]}" -d "$body" "$P"
command curl -s -D "$tmp/landing.h" -o /dev/null "${url}?token=$token"
check "/?token=T: 303 to /" grep -qi '^HTTP/1.1 303\|^location: /' "$tmp/landing.h"
check "/?token=T: sets the cookie HttpOnly, SameSite=Strict, for the port" \
    grep -qi "^set-cookie: ffn_token_$port=$token; Path=/; HttpOnly; SameSite=Strict" "$tmp/landing.h"
check "/?token=T: Referrer-Policy no-referrer" grep -qi '^referrer-policy: no-referrer' "$tmp/landing.h"
req 401 "/?token= a wrong token" "${url}?token=abc"
req 200 "the page itself without a token (it holds no secret)" "${url}"

# ---- Host ---------------------------------------------------------------------------------------
req 421 "Host: a DNS-rebinding name" "${A[@]}" -H "Host: rebind.attacker.example:$port" "${url}api/info"
req 421 "Host: a rebinding name without the port" "${A[@]}" -H "Host: rebind.attacker.example" "${url}api/info"
req 421 "Host: the page, a rebinding name (no token needed to refuse)" -H "Host: evil.example" "${url}"
req 421 "Host: localhost with another port" "${A[@]}" -H "Host: localhost:1$port" "${url}api/info"
req 421 "Host: 127.0.0.1 with port 0$port (a leading zero)" "${A[@]}" -H "Host: 127.0.0.1:0$port" "${url}api/info"
req 421 "Host: another address" "${A[@]}" -H "Host: 10.0.0.1:$port" "${url}api/info"
req 421 "Host: localhost. (a trailing dot)" "${A[@]}" -H "Host: localhost.:$port" "${url}api/info"
req 421 "Host: user info" "${A[@]}" -H "Host: evil@127.0.0.1:$port" "${url}api/info"
req 421 "Host: empty port" "${A[@]}" -H "Host: 127.0.0.1:" "${url}api/info"
req 400 "no Host at all (HTTP/1.0)" --http1.0 "${A[@]}" -H "Host:" "${url}api/info"
req 200 "Host: localhost" "${A[@]}" -H "Host: localhost" "${url}api/info"
req 200 "Host: LOCALHOST:port (case)" "${A[@]}" -H "Host: LOCALHOST:$port" "${url}api/info"
req 200 "Host: 127.0.0.1 without the port" "${A[@]}" -H "Host: 127.0.0.1" "${url}api/info"
req 200 "Host: [::1]:port" "${A[@]}" -H "Host: [::1]:$port" "${url}api/info"

# ---- Content-Type, Origin, Sec-Fetch-Site ---------------------------------------------------------
req 415 "text/plain (a no-cors fetch)" "${A[@]}" "${O[@]}" -H 'Content-Type: text/plain' -d "$body" "$P"
req 415 "text/plain;charset=UTF-8" "${A[@]}" "${O[@]}" -H 'Content-Type: text/plain;charset=UTF-8' -d "$body" "$P"
req 415 "a form (application/x-www-form-urlencoded)" "${A[@]}" "${O[@]}" -d "$body" "$P"
req 415 "multipart/form-data" "${A[@]}" "${O[@]}" -F 'text=Mary' "$P"
req 415 "no Content-Type" "${A[@]}" "${O[@]}" -H 'Content-Type:' -d "$body" "$P"
req 415 "application/jsonx" "${A[@]}" "${O[@]}" -H 'Content-Type: application/jsonx' -d "$body" "$P"
req 200 "application/json; charset=utf-8" "${A[@]}" "${O[@]}" -H 'Content-Type: application/json; charset=utf-8' -d "$body" "$P"
req 403 "Origin of another site" "${A[@]}" "${J[@]}" -H 'Origin: http://evil.example' -d "$body" "$P"
req 403 "Origin: null (a sandboxed frame, a data: page)" "${A[@]}" "${J[@]}" -H 'Origin: null' -d "$body" "$P"
req 403 "Origin of another port" "${A[@]}" "${J[@]}" -H "Origin: http://127.0.0.1:1$port" -d "$body" "$P"
req 403 "Origin https://" "${A[@]}" "${J[@]}" -H "Origin: https://127.0.0.1:$port" -d "$body" "$P"
req 403 "Origin localhost while Host is 127.0.0.1 (another origin)" "${A[@]}" "${J[@]}" -H "Origin: http://localhost:$port" -d "$body" "$P"
req 403 "Sec-Fetch-Site: cross-site" "${A[@]}" "${J[@]}" "${O[@]}" -H 'Sec-Fetch-Site: cross-site' -d "$body" "$P"
req 403 "Sec-Fetch-Site: same-site" "${A[@]}" "${J[@]}" -H 'Sec-Fetch-Site: same-site' -d "$body" "$P"
req 403 "Sec-Fetch-Site: none" "${A[@]}" "${J[@]}" -H 'Sec-Fetch-Site: none' -d "$body" "$P"
req 403 "GET with Sec-Fetch-Site: cross-site" "${A[@]}" -H 'Sec-Fetch-Site: cross-site' "${url}api/info"
req 403 "POST with neither Origin nor Sec-Fetch-Site" "${A[@]}" "${J[@]}" -d "$body" "$P"
req 200 "POST with Sec-Fetch-Site: same-origin and no Origin" "${A[@]}" "${J[@]}" -H 'Sec-Fetch-Site: same-origin' -d "$body" "$P"
req 200 "POST with Host localhost and Origin http://localhost:port" "${A[@]}" "${J[@]}" -H "Host: localhost:$port" -H "Origin: http://localhost:$port" -d "$body" "$P"

# what a hostile page would do, all refused: nothing edited, nothing saved
E='{"prompt":"Mary gave","subject":"Mary","target":"a","layer":1,"method":"ft","ft_steps":1}'
req 403 "a no-cors edit (text/plain, cross-site)" "${A[@]}" -H 'Origin: http://evil.example' -H 'Sec-Fetch-Site: cross-site' -H 'Content-Type: text/plain' -d "$E" "${url}api/edit"
req 403 "a cross-site save" "${A[@]}" "${J[@]}" -H 'Origin: http://evil.example' -d '{}' "${url}api/edit/save"
req 401 "a no-cors save without the cookie (SameSite=Strict keeps it home)" -H 'Origin: http://evil.example' -H 'Content-Type: text/plain' -d '{}' "${url}api/edit/save"
command curl -s "${A[@]}" "${url}api/info" >"$tmp/info.json"
check "no edit and no save came through" "$PY" -c "
import json, sys; e = json.load(open('$tmp/info.json'))['edit']; sys.exit(0 if e['n_edits'] == 0 and e['saves'] == 0 else 1)"
check "and nothing was written to --save-dir" bash -c "[[ -z \$(ls '$tmp/saved') ]]"

# ---- no absolute path in replies -------------------------------------------------------------------
check "/api/info names the model and --data by their last component" "$PY" -c "
import json, sys; d = json.load(open('$tmp/info.json')); sys.exit(0 if d['model'] == 'm' and d['edit']['text'] == 'text-for-c.txt' else 1)"
check "/api/info holds no absolute path (nothing under $tmp)" bash -c "! grep -q '$tmp' '$tmp/info.json'"
command curl -s "${A[@]}" "${O[@]}" "${J[@]}" -d '{"prompt":"Mary gave","subject":"Mary","target":"zzzz-not-a-token","layer":1}' "${url}api/edit" >"$tmp/err.json" || true
check "an edit's error holds no absolute path" bash -c "! grep -q '$tmp' '$tmp/err.json'"

# ---- refusals come from the headers: a 100 MB body is not read --------------------------------------
head -c 100000000 /dev/zero >"$tmp/big"
# (curl's own time per request: reading the file into curl is not the server's)
for i in $(seq 1 20); do
    command curl -s -o /dev/null -w '%{http_code} %{time_total}\n' --max-time 30 -H 'Origin: http://evil.example' \
        "${J[@]}" --data-binary @"$tmp/big" "$P" || true
done >"$tmp/big.times"
check "20 refused 100 MB posts: each a 401 within 1 s, $(awk '{s += $2} END {printf "%.3f s", s}' "$tmp/big.times") in all (refused from the headers)" \
    awk '$1 != 401 || $2 > 1 {bad = 1} END {exit bad || NR != 20}' "$tmp/big.times"
req 200 "the server still answers" "${A[@]}" "${O[@]}" "${J[@]}" -d "$body" "$P"

kill -TERM "$server_pid"
rc=0; wait "$server_pid" || rc=$?
server_pid=
check "and stops cleanly (exit 0)" test "$rc" -eq 0
echo "$fails failure(s)"
((fails == 0))
