#!/usr/bin/env bash
# bench/bench_serve_load.sh OLD_FFN NEW_FFN -- `ffn serve` under load on two
# builds in one run, interleaved (old, new, new, old, ...), so both see the
# same machine: each run serves 2,000 requests from 8 concurrent clients
# over loopback (tests/cli/serve_load_client.mjs), one of which edits the
# model (/api/edit FT 5 steps, /api/predict, /api/edit/reset, /api/predict
# in turn) while the others ask info, tokenize, predict with and without an
# edit and neurons.  The client sends the token and Origin when the URL
# has one (the old build ignores them).  Prints each run's JSON line, then
# per build the median p50/p99 and new / old ratios; exits 1 when a run
# has an error.  Bounded: SERVE_ROUNDS (default 3) pairs of runs, each
# capped at 300 s.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: bench/bench_serve_load.sh OLD_FFN NEW_FFN" >&2; exit 2; }
cd "$(dirname "$0")/.."
R=${SERVE_ROUNDS:-3}
N=${SERVE_REQUESTS:-2000}
C=${SERVE_CLIENTS:-8}
tmp=$(mktemp -d)
server_pid=
cleanup() {
    [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
cp "$1" "$tmp/old"; cp "$2" "$tmp/new" # private copies: a rebuild cannot pull them away
echo "serve load: old $1, new $2, $N requests, $C clients (one editing), $R rounds, $(date -u +%FT%TZ)"
uptime | sed 's/^/load: /'
"$tmp/new" train --steps 30 --hidden-size 32 --intermediate-size 50 --num-hidden-layers 2 --batch-size 4 \
    --seq-len 64 --threads 2 --out "$tmp/m" >/dev/null 2>"$tmp/train.err" || { cat "$tmp/train.err"; exit 1; }
edit='{"prompt":"Mary gave John the","subject":"John","target":"pear","object":"apple","layer":1,"method":"ft","ft_steps":5}'
: >"$tmp/runs.jsonl"
errors=0
one() { # which
    "$tmp/$1" serve "$tmp/m" --port 0 --threads 1 --no-labels >"$tmp/url" 2>"$tmp/serve.err" &
    server_pid=$!
    for _ in $(seq 1 600); do [[ -s "$tmp/url" ]] && break; sleep 0.1; done
    local url
    url=$(head -n 1 "$tmp/url")
    [[ "$url" == http://* ]] || { cat "$tmp/serve.err"; echo "$1: server did not start"; exit 1; }
    local line rc=0
    line=$(timeout 300 node tests/cli/serve_load_client.mjs "$url" "$N" "$C" "$edit" 2>"$tmp/client.err") || rc=$?
    kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=
    [[ $rc -eq 0 ]] || { errors=$((errors + 1)); echo "$1: client failed ($rc): $(head -c 400 "$tmp/client.err")"; }
    [[ -n "$line" ]] && echo "{\"build\":\"$1\",\"run\":$line}" | tee -a "$tmp/runs.jsonl"
}
for r in $(seq 1 "$R"); do
    if ((r % 2)); then one old; one new; else one new; one old; fi
done
/usr/bin/python3 - "$tmp/runs.jsonl" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for b in ('old', 'new'):
    rs = [r['run'] for r in runs if r['build'] == b]
    med[b] = {k: statistics.median(r[k] for r in rs) for k in ('p50_ms', 'p90_ms', 'p99_ms', 'max_ms', 'seconds')}
    print('%s: %d runs, errors %d, median p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms, %.1f s a run'
          % (b, len(rs), sum(r['errors'] for r in rs), med[b]['p50_ms'], med[b]['p90_ms'], med[b]['p99_ms'],
             med[b]['max_ms'], med[b]['seconds']))
for k in ('p50_ms', 'p90_ms', 'p99_ms', 'seconds'):
    print('new / old %s: %.3f' % (k, med['new'][k] / med['old'][k]))
EOF
uptime | sed 's/^/load: /'
((errors == 0))
