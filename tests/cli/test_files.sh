#!/usr/bin/env bash
# test_files.sh -- ffn never loses a user's file.  Each case is typed as a
# user would, and checks that files ffn did not write are still there,
# byte for byte, afterwards:
#   - a symbolic link planted at the old temporary names (DIR.tmp, PATH.tmp)
#     is never followed, written through or emptied (train, export hf,
#     export llama2c, the DIR.old fallback);
#   - --resume through a symbolic link to a run directory keeps the real
#     directory whole and the link a link;
#   - export refuses an existing --out without --force, refuses --out equal
#     to MODEL (however spelled), keeps the files ffn does not write;
#   - the metrics log: DIR/metrics.jsonl by default (--log only moves it),
#     --log DIR/metrics.jsonl before DIR exists, carried across the swap
#     and across --resume (also into another --out);
#   - compare/demo results directories: another experiment is refused
#     without --force, which removes only what an experiment wrote (stale
#     runs included); the same one needs --resume (finished runs kept, the
#     interrupted one continued); an interrupted compare leaves compare.json;
#   - two ffn train on one --out: the second fails at once, naming the
#     first one's pid;
#   - no temporary file or directory is left behind.
set -euo pipefail
FFN_BIN="${FFN_BIN:-build/ffn}"
FFN_SHARED="${FFN_SHARED:-../shared}"
FFN_BIN="$(cd "$(dirname "$FFN_BIN")" && pwd)/$(basename "$FFN_BIN")"
MODEL="$FFN_SHARED/models/stories260K.bin"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok $*"; }
head -c 20000 "$FFN_SHARED/data/tinyshakespeare.txt" > data.txt
small=(--data data.txt --steps 3 --hidden-size 32 --intermediate-size 64 --num-hidden-layers 1
       --num-attention-heads 2 --num-key-value-heads 2 --seq-len 16 --batch-size 2 --threads 1
       --quiet --eval-batches 1)
# victim DIR: a user's directory with files that must survive
victim() { rm -rf "$1"; mkdir -p "$1"; echo "precious $1" > "$1/a.txt"; }
intact() { [[ -f "$1/a.txt" && "$(cat "$1/a.txt")" == "precious $1" ]]; }
no_temps() { ! compgen -G "$1.tmp*" >/dev/null; }

# ---- 1. a symlink at DIR.tmp (train, export hf) --------------------------------
victim v; mkdir w; ln -s "$PWD/v" w/ck.tmp
"$FFN_BIN" train "${small[@]}" --out w/ck >/dev/null 2>err.txt || { cat err.txt; fail "train with a link at DIR.tmp"; }
intact v || fail "train emptied the directory a DIR.tmp link points to"
[[ -L w/ck.tmp ]] || fail "the user's link w/ck.tmp was removed"
[[ -f w/ck/model.safetensors ]] || fail "train did not write w/ck"
"$FFN_BIN" train --resume w/ck --steps 6 --threads 1 --quiet >/dev/null 2>err.txt || { cat err.txt; fail "resume w/ck"; }
intact v && [[ -L w/ck.tmp ]] || fail "a resumed run (a swap over an existing DIR) touched the link or its target"
ok "a symlink at DIR.tmp is neither followed nor removed (train, resume)"

victim v2; ln -s "$PWD/v2" w/hf.tmp
"$FFN_BIN" export "$MODEL" --out w/hf 2>err.txt || { cat err.txt; fail "export hf with a link at DIR.tmp"; }
"$FFN_BIN" export "$MODEL" --out w/hf --force 2>err.txt || { cat err.txt; fail "export hf --force over its own output"; }
intact v2 && [[ -L w/hf.tmp ]] || fail "export --format hf followed DIR.tmp"
ok "a symlink at DIR.tmp is neither followed nor removed (export --format hf)"

# ---- 1b. the DIR.old fallback ----------------------------------------------------
victim v3; ln -s "$PWD/v3" w/ck.old
rc=0; FFN_CHECKPOINT_NO_EXCHANGE=1 "$FFN_BIN" train --resume w/ck --steps 9 --threads 1 --quiet \
    >/dev/null 2>err.txt || rc=$?
intact v3 && [[ -L w/ck.old ]] || fail "the fallback swap followed or removed a link at DIR.old"
[[ $rc -ne 0 ]] && grep -q "ck.old" err.txt || { cat err.txt; fail "the fallback swap should refuse a foreign DIR.old (rc $rc)"; }
"$FFN_BIN" generate --model w/ck --steps 2 >/dev/null 2>&1 || fail "w/ck no longer loads after the refused swap"
rm w/ck.old
FFN_CHECKPOINT_NO_EXCHANGE=1 "$FFN_BIN" train --resume w/ck --steps 9 --threads 1 --quiet >/dev/null 2>err.txt \
    || { cat err.txt; fail "the fallback swap without a foreign DIR.old"; }
[[ ! -e w/ck.old ]] || fail "the fallback swap left DIR.old"
ok "a foreign DIR.old is refused, never followed; the fallback works without it"

# ---- 2. a symlink at PATH.tmp (atomic files) --------------------------------------
echo "victim file" > victim.txt
ln -s "$PWD/victim.txt" m.bin.tmp
"$FFN_BIN" export "$MODEL" --out m.bin --format llama2c 2>err.txt || { cat err.txt; fail "export llama2c"; }
[[ "$(cat victim.txt)" == "victim file" && -L m.bin.tmp ]] || fail "ffn_atomic_open wrote through PATH.tmp"
[[ "$("$FFN_BIN" run m.bin --ids "1 2" --steps 4 --emit ids)" == "$("$FFN_BIN" run "$MODEL" --ids "1 2" --steps 4 --emit ids)" ]] \
    || fail "the exported m.bin does not run like its source"
! compgen -G "m.bin.tmp-*" >/dev/null || fail "a temporary m.bin.tmp-* was left"
ln -s "$PWD/victim.txt" w/ck/train_state.safetensors.tmp
"$FFN_BIN" train --resume w/ck --steps 12 --threads 1 --quiet >/dev/null 2>err.txt || { cat err.txt; fail "resume with a link in DIR"; }
[[ "$(cat victim.txt)" == "victim file" ]] || fail "a link inside the run directory was written through"
ok "a symlink at PATH.tmp is never written through (atomic files, safetensors)"

# ---- 3. --resume through a symlinked run directory --------------------------------
"$FFN_BIN" train "${small[@]}" --out real_run >/dev/null 2>err.txt || { cat err.txt; fail "train real_run"; }
echo "notes" > real_run/notes.txt
ln -s real_run latest
"$FFN_BIN" train --resume latest --steps 6 --threads 1 --quiet >/dev/null 2>err.txt || { cat err.txt; fail "resume latest"; }
[[ -L latest ]] || fail "the link 'latest' was replaced by a directory"
[[ -f real_run/model.safetensors && -f real_run/train_state.safetensors ]] || fail "real_run was emptied"
[[ "$(cat real_run/notes.txt)" == "notes" ]] || fail "a user's file in the run directory was lost"
python3 - real_run/train_state.safetensors <<'EOF' || fail "real_run is not at step 6"
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]
sys.exit(0 if json.loads(f.read(n))["__metadata__"]["step"] == "6" else 1)
EOF
no_temps real_run && no_temps latest || fail "a temporary directory was left beside real_run"
ok "--resume through a symlink continues the real directory (user files kept, link kept)"

# ---- 4. export over an existing --out, over its own source ------------------------
"$FFN_BIN" train "${small[@]}" --out run1 >/dev/null 2>err.txt || { cat err.txt; fail "train run1"; }
cp run1/train_state.safetensors state.copy
rc=0; "$FFN_BIN" export run1 --out run1 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q "itself" err.txt || { cat err.txt; fail "export run1 --out run1: rc $rc"; }
rc=0; "$FFN_BIN" export run1 --out ./run1/ --force 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q "itself" err.txt || { cat err.txt; fail "export run1 --out ./run1/ --force: rc $rc"; }
ln -s run1 run1_link
rc=0; "$FFN_BIN" export run1_link --out run1 --force 2>err.txt || rc=$?
[[ $rc -eq 1 ]] || fail "export through a link to its own source was not refused"
cmp -s run1/train_state.safetensors state.copy || fail "export deleted or changed train_state.safetensors"
rc=0; "$FFN_BIN" export "$MODEL" --out m.bin --format llama2c 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q -- "--force" err.txt || { cat err.txt; fail "export over an existing file without --force: rc $rc"; }
"$FFN_BIN" export "$MODEL" --out hf1 2>/dev/null
echo "mine" > hf1/README.user
rc=0; "$FFN_BIN" export "$MODEL" --out hf1 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q -- "--force" err.txt || { cat err.txt; fail "export over a model directory without --force: rc $rc"; }
"$FFN_BIN" export "$MODEL" --out hf1 --force 2>err.txt || { cat err.txt; fail "export --force"; }
[[ "$(cat hf1/README.user)" == "mine" ]] || fail "export --force deleted a file it did not write"
no_temps hf1 && no_temps run1 || fail "export left a temporary directory"
ok "export: an existing --out needs --force, MODEL itself is refused, foreign files kept"

# ---- 5. the metrics log ----------------------------------------------------------
steps_of() { python3 -c '
import json, sys
print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1])))' "$1"; }
"$FFN_BIN" train "${small[@]}" --out moe1 --log moe1/metrics.jsonl >/dev/null 2>err.txt \
    || { cat err.txt; fail "--log DIR/metrics.jsonl before DIR exists"; }
[[ "$(steps_of moe1/metrics.jsonl)" == "1 2 3" ]] || fail "moe1/metrics.jsonl: steps $(steps_of moe1/metrics.jsonl)"
"$FFN_BIN" train --resume moe1 --steps 5 --threads 1 --quiet >/dev/null 2>err.txt || { cat err.txt; fail "resume moe1"; }
[[ "$(steps_of moe1/metrics.jsonl)" == "1 2 3 4 5" ]] || fail "the log was not carried across the swap and the resume"
"$FFN_BIN" train "${small[@]}" --out d1 >/dev/null 2>err.txt || { cat err.txt; fail "train d1"; }
[[ "$(steps_of d1/metrics.jsonl)" == "1 2 3" ]] || fail "no DIR/metrics.jsonl by default"
"$FFN_BIN" train --resume d1 --out d2 --steps 4 --threads 1 --quiet >/dev/null 2>err.txt || { cat err.txt; fail "resume d1 into d2"; }
[[ "$(steps_of d2/metrics.jsonl)" == "1 2 3 4" && "$(steps_of d1/metrics.jsonl)" == "1 2 3" ]] \
    || fail "a resume into another --out did not carry the log on"
"$FFN_BIN" report d2 --out d2.html >/dev/null 2>err.txt || { cat err.txt; fail "report d2"; }
grep -qE '"train":\[\[1,[^]]*\],\[2,[^]]*\],\[3,[^]]*\],\[4,' d2.html || fail "the report did not read d2/metrics.jsonl"
"$FFN_BIN" train "${small[@]}" --out d3 --log d3.jsonl >/dev/null 2>err.txt || { cat err.txt; fail "train d3"; }
[[ ! -e d3/metrics.jsonl && "$(steps_of d3.jsonl)" == "1 2 3" ]] || fail "--log FILE must move the log out of DIR"
ok "the metrics log lives in DIR by default, --log moves it, the swap and --resume carry it"

# ---- 6. compare / demo results directories --------------------------------------
tiny=(--hidden-size 16 --num-hidden-layers 1 --seq-len 16 --batch-size 2 --sentences 300 --threads 1)
runs_of() { python3 -c '
import json, sys
print(" ".join("%s=%d" % (v["variant"], v["runs"]) for v in json.load(open(sys.argv[1]))["variants"]))' "$1"; }
"$FFN_BIN" compare --variants gelu,swiglu --steps 2 --seeds 1 "${tiny[@]}" --out cmp >/dev/null 2>err.txt \
    || { cat err.txt; fail "compare"; }
echo "mine" > cmp/notes.txt
rc=0; "$FFN_BIN" compare --variants gelu,swiglu --steps 2 --seeds 1 "${tiny[@]}" --out cmp >/dev/null 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q -- "--resume" err.txt || { cat err.txt; fail "the same experiment again without --resume: rc $rc"; }
rc=0; "$FFN_BIN" compare --variants gelu --steps 3 --seeds 1 "${tiny[@]}" --out cmp >/dev/null 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q "another experiment" err.txt || { cat err.txt; fail "another experiment without --force: rc $rc"; }
[[ -f cmp/swiglu-seed1/model.safetensors ]] || fail "a refused compare touched the previous runs"
"$FFN_BIN" compare --variants gelu --steps 3 --seeds 1 "${tiny[@]}" --out cmp --force >/dev/null 2>err.txt \
    || { cat err.txt; fail "compare --force"; }
[[ ! -e cmp/swiglu-seed1 && ! -e cmp/swiglu-seed1.metrics.jsonl ]] || fail "--force kept the stale swiglu run"
[[ "$(cat cmp/notes.txt)" == "mine" ]] || fail "--force deleted a file ffn did not write"
[[ "$(runs_of cmp/compare.json)" == "gelu=1" ]] || fail "compare.json after --force: $(runs_of cmp/compare.json)"
rc=0; "$FFN_BIN" demo --steps 2 "${tiny[@]}" --out cmp >/dev/null 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q "another experiment" err.txt || { cat err.txt; fail "demo into a compare's directory: rc $rc"; }
# an interrupted compare: compare.json of what finished, then --resume
slowc=(--variants gelu,swiglu --steps 3000 --eval-every 0 --seeds 1 "${tiny[@]}" --out cmp2)
"$FFN_BIN" compare "${slowc[@]}" >/dev/null 2>cmp2.err &
pid=$!
for _ in $(seq 600); do [[ -f cmp2/gelu-seed1.result ]] && break; sleep 0.05; done
sleep 0.3
kill -INT $pid; rc=0; wait $pid || rc=$?
[[ $rc -eq 130 ]] || { cat cmp2.err; fail "an interrupted compare: rc $rc (too fast a machine?)"; }
[[ "$(runs_of cmp2/compare.json)" == "gelu=1 swiglu=0" ]] \
    || fail "an interrupted compare left no compare.json of what finished: $(runs_of cmp2/compare.json)"
cp cmp2/gelu-seed1/model.safetensors gelu.before
rc=0; "$FFN_BIN" compare "${slowc[@]/3000/2999}" >/dev/null 2>err.txt || rc=$?
[[ $rc -eq 1 ]] && grep -q "another experiment" err.txt || fail "a changed --steps must be another experiment"
"$FFN_BIN" compare "${slowc[@]}" --resume >/dev/null 2>err.txt || { cat err.txt; fail "compare --resume"; }
grep -q "gelu.*finished before, kept" err.txt || { cat err.txt; fail "--resume did not keep the finished run"; }
cmp -s gelu.before cmp2/gelu-seed1/model.safetensors || fail "--resume retrained a finished run"
[[ "$(runs_of cmp2/compare.json)" == "gelu=1 swiglu=1" ]] || fail "compare.json after --resume: $(runs_of cmp2/compare.json)"
[[ "$(python3 -c '
import json, sys
s = [json.loads(l)["step"] for l in open(sys.argv[1])]
print(s == list(range(1, 3001)))' cmp2/swiglu-seed1.metrics.jsonl)" == True ]] \
    || fail "the interrupted run was not continued (its log is not steps 1..3000 once each)"
ok "compare/demo: another experiment needs --force (only ffn's files removed), the same one --resume"

# ---- 7. two writers on one --out ---------------------------------------------------
slow=(--data data.txt --steps 100000 --save-every 1 --hidden-size 64 --intermediate-size 128
      --num-hidden-layers 2 --num-attention-heads 2 --num-key-value-heads 2 --seq-len 16 --batch-size 2
      --threads 1 --quiet
      --eval-every 0 --eval-batches 1)
"$FFN_BIN" train "${slow[@]}" --out busy >/dev/null 2>first.err &
first=$!
for _ in $(seq 400); do [[ -e busy/model.safetensors ]] && break; sleep 0.025; done
rc=0; t0=$SECONDS; timeout 20 "$FFN_BIN" train "${small[@]}" --out busy --force >/dev/null 2>err.txt || rc=$?
rc2=0; timeout 20 "$FFN_BIN" train --resume busy --steps 200000 --threads 1 --quiet >/dev/null 2>err2.txt || rc2=$?
kill $first 2>/dev/null || true
wait $first 2>/dev/null || true
[[ $rc -ne 0 ]] && grep -q "pid $first" err.txt || { cat err.txt; fail "a second train on the same --out did not fail naming pid $first (rc $rc)"; }
[[ $rc2 -ne 0 ]] && grep -q "pid $first" err2.txt || { cat err2.txt; fail "a second --resume of a busy directory did not fail (rc $rc2)"; }
((SECONDS - t0 < 20)) || fail "the second run did not fail at once"
"$FFN_BIN" generate --model busy --steps 2 >/dev/null 2>&1 || fail "busy does not load after the interrupted first run"
[[ ! -e .busy.lock ]] || fail "the lock file was left behind"
no_temps busy || fail "a temporary directory was left beside busy"
ok "a second writer on one --out fails at once, naming the first one's pid"
echo "all file-safety checks passed"
