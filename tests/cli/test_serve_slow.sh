#!/usr/bin/env bash
# test_serve_slow.sh -- slow clients do not lock the user out of `ffn serve`
# (loopback only, bounded: at most 256 connections, about 30 s in all).
#   1. one address (127.0.0.2) opens 256 connections that trickle a request
#      a byte every 0.3 s: the server keeps at most --max-per-address of
#      them, and a normal client (127.0.0.1) is served within 2 s, every
#      time it asks during the trickle;
#   2. sixteen addresses (127.0.0.10-25) open 16 each, 256 in all (the
#      server's whole connection limit): every trickler is closed by the
#      --request-timeout deadline (3 s here) although it keeps sending, and
#      a normal client is served within a few seconds of the start;
#   3. an idle connection (opened, nothing sent) is closed by the deadline;
#      a whole request sent slowly but within it is answered.
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
export FFN_NUM_THREADS=1

m="$tmp/m"
"$FFN" train --steps 20 --hidden-size 32 --intermediate-size 50 --num-hidden-layers 2 --batch-size 4 \
    --seq-len 64 --threads 1 --out "$m" >/dev/null 2>"$tmp/train.err" || { cat "$tmp/train.err"; exit 1; }
"$FFN" serve "$m" --port 0 --threads 1 --no-labels --request-timeout 3 --max-per-address 16 \
    >"$tmp/url" 2>"$tmp/serve.err" &
server_pid=$!
for _ in $(seq 1 600); do [[ -s "$tmp/url" ]] && break; sleep 0.1; done
full=$(head -n 1 "$tmp/url")
[[ "$full" == http://* ]] || { cat "$tmp/serve.err"; echo "FAIL server did not start"; exit 1; }

rc=0
"$PY" - "$full" <<'EOF' || rc=$?
import socket, sys, time, urllib.parse

u = urllib.parse.urlparse(sys.argv[1])
host, port = u.hostname, u.port
token = urllib.parse.parse_qs(u.query)['token'][0]
fails = 0
def ok(cond, what):
    global fails
    print(('ok   ' if cond else 'FAIL ') + what)
    fails += 0 if cond else 1

def normal(timeout):
    """GET /api/info from 127.0.0.1; seconds to a 200, or None"""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            s = socket.create_connection((host, port), timeout=2, source_address=('127.0.0.1', 0))
            s.sendall(('GET /api/info HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: token %s\r\n'
                       'Connection: close\r\n\r\n' % (host, port, token)).encode())
            data = b''
            while True:
                b = s.recv(65536)
                if not b: break
                data += b
            s.close()
            if data.startswith(b'HTTP/1.1 200'):
                return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.1)
    return None

def open_tricklers(addrs, per):
    socks = []
    for a in addrs:
        for _ in range(per):
            try:
                s = socket.create_connection((host, port), timeout=2, source_address=(a, 0))
                s.setblocking(False)
                s.send(b'GET /api/info HTTP/1.1\r\nHo')
                socks.append(s)
            except OSError:
                pass
    return socks

def alive(s):
    """the server has not closed s (nothing to read yet, no EOF, no reset)"""
    try:
        return s.recv(1) is None
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False

def trickle(socks):
    for s in socks:
        try: s.send(b'x')
        except OSError: pass

# 1. one address, 256 tricklers
socks = open_tricklers(['127.0.0.2'], 256)
time.sleep(0.5)
kept = [s for s in socks if alive(s)]
ok(len(kept) <= 16, '1. one address: at most --max-per-address 16 of its 256 connections kept (%d)' % len(kept))
worst, served = 0.0, 0
t0 = time.monotonic()
while time.monotonic() - t0 < 2.5:  # under the deadline: the tricklers still hold their slots
    trickle(kept)
    t = normal(2)
    if t is not None: served += 1; worst = max(worst, t)
    else: worst = 99
    time.sleep(0.3)
ok(served >= 3 and worst <= 2, '1. a normal client served every time during the trickle (%d times, worst %.3f s)' % (served, worst))
for s in socks: s.close()
time.sleep(0.3)

# 2. sixteen addresses, 256 tricklers: the whole connection limit
addrs = ['127.0.0.%d' % i for i in range(10, 26)]
t0 = time.monotonic()
socks = open_tricklers(addrs, 16)
time.sleep(0.3)
n_open = sum(alive(s) for s in socks)
got = None
while time.monotonic() - t0 < 10:
    trickle(socks)
    got = normal(0.3)
    if got is not None: got = time.monotonic() - t0; break
ok(got is not None and got <= 6, '2. 256 tricklers from 16 addresses (%d held): a normal client served %.1f s after they came (deadline 3 s)' % (n_open, got if got is not None else -1))
while time.monotonic() - t0 < 4.5:
    trickle(socks)
    time.sleep(0.3)
still = sum(alive(s) for s in socks)
ok(still == 0, '2. every trickler closed by the deadline although it kept sending (%d still open at %.1f s)' % (still, time.monotonic() - t0))
for s in socks: s.close()

# 3. idle, and slow but in time
s = socket.create_connection((host, port), timeout=10, source_address=('127.0.0.3', 0))
t0 = time.monotonic()
eof = s.recv(1) == b''
ok(eof and 2.5 <= time.monotonic() - t0 <= 5, '3. an idle connection is closed after the deadline (%.1f s)' % (time.monotonic() - t0))
s.close()
s = socket.create_connection((host, port), timeout=10, source_address=('127.0.0.3', 0))
req = ('GET /api/info HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: token %s\r\nConnection: close\r\n\r\n'
       % (host, port, token)).encode()
for i in range(0, len(req), len(req) // 4 + 1):  # in four parts, 0.4 s apart: 1.2 s < 3 s
    s.sendall(req[i:i + len(req) // 4 + 1]); time.sleep(0.4)
ok(s.recv(12) == b'HTTP/1.1 200', '3. a request sent slowly but within the deadline is answered')
s.close()
sys.exit(1 if fails else 0)
EOF
alive=0; kill -0 "$server_pid" 2>/dev/null && alive=1
kill -TERM "$server_pid"
stop=0; wait "$server_pid" || stop=$?
server_pid=
fails=0
[[ $rc -eq 0 ]] || fails=$((fails + 1))
if [[ $alive == 1 && $stop == 0 ]]; then echo "ok   the server lived through it and stops cleanly"; else echo "FAIL server alive $alive, exit $stop"; fails=$((fails + 1)); fi
echo "$fails failure(s)"
((fails == 0))
