#!/usr/bin/env bash
# test_stale_temps.sh -- DIR.tmp-XXXXXX directories that killed saves leave
# beside a run directory are removed by the next run on DIR, which says so
# on stderr, and only those it can prove are ffn's:
#   - the writer is gone: the run holds the lock on DIR (a held lock: the
#     run fails at once and touches nothing);
#   - the name is DIR.tmp- and mkdtemp's six characters [A-Za-z0-9];
#   - it is a real directory (a symbolic link of that name is left, and so
#     is its target) holding only regular files of ffn's names or their
#     atomic-write temporaries (NAME.tmp-XXXXXX, NAME.tmp.XXXXXX): one
#     with a user's file or a subdirectory is left, and named;
#   - 12 kill -9 of `ffn train --save-every 1` at random moments, then one
#     run: no DIR.tmp-* is left.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
FFN_BIN="$(cd "$(dirname "$FFN_BIN")" && pwd)/$(basename "$FFN_BIN")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok $*"; }
small=(--steps 20 --batch-size 2 --seq-len 16 --hidden-size 32 --num-hidden-layers 1 --threads 1
       --quiet --eval-batches 1)

mkdir w
"$FFN_BIN" train "${small[@]}" --stop-at 2 --out w/ck >/dev/null
# what killed saves leave: a half-written temporary of each kind
mkdir w/ck.tmp-Ab12Cd w/ck.tmp-EfGh34 w/ck.tmp-iJ5kL6
cp w/ck/config.json w/ck.tmp-Ab12Cd/ && echo partial > w/ck.tmp-Ab12Cd/train_state.safetensors.tmp.Zz9Yy8
echo partial > w/ck.tmp-EfGh34/tokenizer.txt.tmp-Qq1Ww2
# (an empty one: killed right after mkdtemp)
# not ffn's: a user's file, a subdirectory, a link, a name off the pattern
mkdir w/ck.tmp-User01 w/ck.tmp-Sub002 w/ck.tmp-bad w/ck.tmp-toolong1 elsewhere
echo "precious" > w/ck.tmp-User01/notes.txt
cp w/ck/config.json w/ck.tmp-User01/
mkdir w/ck.tmp-Sub002/inner && cp w/ck/config.json w/ck.tmp-Sub002/inner/
cp w/ck/config.json w/ck/model.safetensors elsewhere/ && echo "precious" > elsewhere/notes.txt
ln -s "$tmp/elsewhere" w/ck.tmp-Link01
cp w/ck/config.json w/ck.tmp-bad/ && cp w/ck/config.json w/ck.tmp-toolong1/

# a held lock: the run fails before looking, nothing is removed
flock w/.ck.lock sleep 3 &
holder=$!
sleep 0.5
if "$FFN_BIN" train --resume w/ck --stop-at 3 --threads 1 --quiet >/dev/null 2>held.err; then
    fail "a run started while the lock is held"
fi
wait $holder
grep -q "another ffn process" held.err || fail "held lock: $(cat held.err)"
[[ -d w/ck.tmp-Ab12Cd && -d w/ck.tmp-EfGh34 && -d w/ck.tmp-iJ5kL6 ]] || fail "held lock: a temporary was removed"
ok "lock held by another process: the run fails, the temporaries stay"

"$FFN_BIN" train --resume w/ck --stop-at 3 --threads 1 --quiet >/dev/null 2>run.err || fail "resume: $(cat run.err)"
for d in w/ck.tmp-Ab12Cd w/ck.tmp-EfGh34 w/ck.tmp-iJ5kL6; do
    [[ ! -e $d ]] || fail "$d (ffn's) left: $(ls -a "$d")"
    grep -q "removed $d, left by an interrupted save" run.err || fail "no word of removing $d: $(cat run.err)"
done
ok "three DIR.tmp-XXXXXX of ffn's files removed, each named on stderr"
[[ "$(cat w/ck.tmp-User01/notes.txt)" == precious && -f w/ck.tmp-User01/config.json ]] || fail "a user's file in DIR.tmp-User01 touched"
[[ -f w/ck.tmp-Sub002/inner/config.json ]] || fail "DIR.tmp-Sub002's subdirectory touched"
[[ -L w/ck.tmp-Link01 && "$(cat elsewhere/notes.txt)" == precious && -f elsewhere/config.json && -f elsewhere/model.safetensors ]] ||
    fail "the link DIR.tmp-Link01 or its target touched: $(ls -la w elsewhere)"
[[ -f w/ck.tmp-bad/config.json && -f w/ck.tmp-toolong1/config.json ]] || fail "a name off the pattern touched"
for d in w/ck.tmp-User01 w/ck.tmp-Sub002 w/ck.tmp-Link01; do
    grep -q "$d is not removed" run.err || fail "no word of leaving $d: $(cat run.err)"
done
grep -q "ck.tmp-bad\|ck.tmp-toolong1" run.err && fail "a name off the pattern was mentioned: $(cat run.err)"
ok "left and named: a user's file, a subdirectory, a link (target untouched); off-pattern names ignored"
rm -rf w/ck.tmp-* elsewhere

# kill -9 at random moments of saving every step
kills=12
big=(--steps 100000 --batch-size 2 --seq-len 32 --hidden-size 64 --num-hidden-layers 2 --threads 1
     --quiet --save-every 1)
seen=0
for i in $(seq 1 $kills); do
    "$FFN_BIN" train --resume w/ck "${big[@]}" >/dev/null 2>&1 &
    p=$!
    sleep "0.$((RANDOM % 9 + 1))"
    kill -9 $p 2>/dev/null || true
    wait $p 2>/dev/null || true
    n=$(compgen -G "w/ck.tmp-*" | wc -l || true)
    ((n > seen)) && seen=$n
done
"$FFN_BIN" train --resume w/ck --steps 100000 --stop-at $(( $(wc -l < w/ck/metrics.jsonl) + 1 )) --threads 1 --quiet >/dev/null 2>last.err ||
    fail "the run after the kills: $(cat last.err)"
left=$(compgen -G "w/ck.tmp-*" || true)
[[ -z "$left" ]] || fail "after $kills kills and one run: left $left"
"$FFN_BIN" generate w/ck --steps 3 --prompt "the" >/dev/null 2>gen.err || fail "the checkpoint after the kills: $(cat gen.err)"
ok "$kills kill -9 while saving (at most $seen temporaries at once), then one run: none left, the checkpoint loads"
echo "PASS"
