#!/usr/bin/env bash
# test_dirswap_fallback.sh -- the directory swap's fallback (a file system
# without renameat2(RENAME_EXCHANGE), e.g. NFS; forced here with
# FFN_CHECKPOINT_NO_EXCHANGE=1): a swap interrupted between its two
# renames leaves DIR.old whole and DIR absent.  `ffn train --resume DIR`
# then reads DIR.old, puts it back as DIR and carries on its metrics
# history, as the atomic path does: the resumed log holds every step from
# 1, equal line for line (loss, lr, grad_norm) to an uninterrupted run of
# the same schedule, and no DIR.old or DIR.tmp-* is left.  The same
# resume with the exchange (the atomic path) gives the same log.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
FFN_BIN="$(cd "$(dirname "$FFN_BIN")" && pwd)/$(basename "$FFN_BIN")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok $*"; }
small=(--steps 8 --batch-size 2 --seq-len 16 --hidden-size 32 --num-hidden-layers 1 --threads 1
       --quiet --eval-batches 1 --eval-every 4)
# the metrics without the timing fields (tokens_per_s differs run to run)
strip() { python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    r.pop("tokens_per_s", None)
    print(json.dumps(r, sort_keys=True))' "$1"; }

"$FFN_BIN" train "${small[@]}" --out whole >/dev/null
strip whole/metrics.jsonl > whole.log
[[ $(wc -l < whole.log) -eq 8 ]] || fail "uninterrupted run: $(wc -l < whole.log) metrics lines, expected 8"

for mode in fallback atomic; do
    export FFN_CHECKPOINT_NO_EXCHANGE=$([[ $mode == fallback ]] && echo 1 || echo 0)
    rm -rf "$mode"; mkdir "$mode"
    "$FFN_BIN" train "${small[@]}" --stop-at 4 --out "$mode/ck" >/dev/null
    [[ $(wc -l < "$mode/ck/metrics.jsonl") -eq 4 ]] || fail "$mode: the first run's log"
    # the moment between DIR -> DIR.old and DIR.tmp-XXXXXX -> DIR
    mv "$mode/ck" "$mode/ck.old"
    "$FFN_BIN" train --resume "$mode/ck" --threads 1 --quiet >/dev/null 2>"$mode.err" ||
        fail "$mode: resume from an interrupted swap: $(cat "$mode.err")"
    [[ -f "$mode/ck/model.safetensors" && ! -e "$mode/ck.old" ]] ||
        fail "$mode: after the resume: $(ls -a "$mode")"
    compgen -G "$mode/ck.tmp*" >/dev/null && fail "$mode: a temporary left: $(ls -a "$mode")"
    strip "$mode/ck/metrics.jsonl" > "$mode.log"
    n=$(wc -l < "$mode.log")
    [[ $n -eq 8 ]] || fail "$mode: the resumed log has $n lines (steps $(cut -c1-12 "$mode/ck/metrics.jsonl" | tr '\n' ' ')), expected 8: the history of steps 1-4 lost"
    cmp -s "$mode.log" whole.log || fail "$mode: the resumed log differs from the uninterrupted run's: $(diff "$mode.log" whole.log | head -4)"
    ok "$mode: resume from DIR.old carries the history: 8 steps, equal to the uninterrupted run"
done

# A resume whose DIR.old sits beside a whole DIR (the crash came after the
# second rename): DIR is read, DIR.old retired by the next save.
export FFN_CHECKPOINT_NO_EXCHANGE=1
rm -rf both; mkdir both
"$FFN_BIN" train "${small[@]}" --stop-at 4 --out both/ck >/dev/null
cp -r both/ck both/ck.old
"$FFN_BIN" train --resume both/ck --threads 1 --quiet >/dev/null 2>both.err || fail "DIR and DIR.old: $(cat both.err)"
strip both/ck/metrics.jsonl > both.log
cmp -s both.log whole.log || fail "DIR beside DIR.old: the log differs from the uninterrupted run's"
[[ ! -e both/ck.old ]] || fail "DIR.old left after the next fallback swap"
ok "DIR beside DIR.old: DIR resumed, the history whole, DIR.old retired"
echo "PASS"
