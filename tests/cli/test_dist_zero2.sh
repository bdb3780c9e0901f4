#!/usr/bin/env bash
# test_dist_zero2.sh -- ZeRO-2 (--zero 2: gradients reduce-scattered bucket
# by bucket and kept sharded, AdamW's moments sharded) under ffn train
# (Open MPI), on two ranks:
#   - --dp 2 --zero 2 in 16 buckets writes the bytes of --dp 2 --zero 1 and
#     of plain --dp 2 (for two ranks every sum is a + b, the update is
#     elementwise, the all-gather copies), the same with one bucket and
#     twice the same; it equals one process with batch 2B (losses 1e-6
#     relative, every tensor of the model and of AdamW's m and v within
#     1e-4, as test_dist_zero.sh);
#   - resumed across stages and layouts: --zero 2 stopped at 4 -> one
#     process (--zero 0) and -> --dp 2 --zero 1, one process stopped at 4
#     -> --dp 2 --zero 2, all equal to the uninterrupted one process;
#   - mutations: FFN_DIST_MUTATE=zero2-skip-bucket (one bucket not
#     reduce-scattered) and zero-owner (each rank updates the other's
#     range) break the equality;
#   - the state a rank keeps ("state_bytes": parameters, the gradients of
#     its range, m and v of its range) for --zero 0/1/2 equals ffn plan's
#     weights + gradients + optimizer, and each rank's peak RSS is printed
#     beside it (a 2.1 M-parameter model; the moments' half must show in
#     the non-writer's; ZeRO-2's peak is ZeRO-1's: the backward writes the
#     whole gradient block before the reduce-scatter; the writer's peak
#     holds the whole moments gathered for the save);
#   - ZeRO-1 and ZeRO-2 with --ep 2 alone (the replicated tensors' state
#     split over the dp group, each expert's over the ranks holding it):
#     ZeRO-1 the bytes of --ep 2, both equal to one process and resumed
#     under --dp 2, the mutations caught, state bytes = ffn plan's;
#   - --tp 2 --zero 2 (--dp 1) refused on every rank before anything is
#     allocated (a model of some 10 GB, well under 200 MB resident), naming
#     both numbers, nothing written, as is --dp 3 --ep 2 --zero 2; --zero 2
#     in one process refused; (--tp 2 --dp 2 --zero 2 = --zero 1 bitwise: 4 ranks,
#     the plain round only)
set -uo pipefail
FFN="${FFN_BIN:-build/ffn}"
FFN="$(cd "$(dirname "$FFN")" && pwd)/$(basename "$FFN")"
HERE="$(cd "$(dirname "$0")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
ASAN=0
case "$FFN" in */asan/*) export ASAN_OPTIONS="abort_on_error=0:detect_leaks=0"; ASAN=1 ;; esac
MPIRUN=(mpirun --oversubscribe)
command -v mpirun >/dev/null || { bad "mpirun missing (scripts/setup.sh test installs openmpi-bin)"; exit 1; }
cd "$tmp" || exit 1

cp "$HERE/dist_cmp.py" "$tmp/cmp.py"

Z=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
   --corpus en --steps 8 --eval-every 4 --eval-batches 4 --quiet --json)
zrun() { local np=$1; shift; timeout 300 "${MPIRUN[@]}" -np "$np" "$FFN" train "${Z[@]}" "$@" 2>"$tmp/ez" ||
             bad "-np $np $*: $(tail -3 "$tmp/ez")"; }
one() { "$FFN" train "${Z[@]}" --threads 1 "$@" 2>"$tmp/ez" || bad "one process $*: $(tail -3 "$tmp/ez")"; }
S=(--bucket-mb 0.01) # 2621 floats a bucket: 16 buckets of the 39,792 parameters
one --batch-size 8 --out zone >/dev/null
zrun 2 --dp 2 --batch-size 4 --out d2 >d2.json
zrun 2 --dp 2 --zero 1 --batch-size 4 --out z1 >z1.json
zrun 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --out z2 >z2.json
zrun 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --out z2b >/dev/null
zrun 2 --dp 2 --zero 2 --batch-size 4 --out z2one >/dev/null
zrun 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --stop-at 4 --out z2s >/dev/null
cp -r z2s z2s1
"$FFN" train --resume z2s --threads 1 --quiet >/dev/null 2>"$tmp/ez" || bad "resume zero 2 dp 2 -> one process: $(tail -3 "$tmp/ez")"
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --zero 1 --resume z2s1 --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume zero 2 dp 2 -> zero 1 dp 2: $(tail -3 "$tmp/ez")"
one --batch-size 8 --stop-at 4 --out zones >/dev/null
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --zero 2 "${S[@]}" --resume zones --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume one process -> zero 2 dp 2: $(tail -3 "$tmp/ez")"
FFN_DIST_MUTATE=zero2-skip-bucket zrun 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --out zm1 >/dev/null
FFN_DIST_MUTATE=zero-owner zrun 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --out zm2 >/dev/null

for f in model.safetensors train_state.safetensors; do
    cmp -s z2/$f z1/$f && cmp -s z1/$f d2/$f && cmp -s z2/$f z2b/$f && cmp -s z2/$f z2one/$f &&
        ok "dp 2 zero 2: $f bitwise that of zero 1 and of plain dp 2, with 1 bucket as with 16, and the same twice" ||
        bad "dp 2 zero 2: $f differs from zero 1, plain dp 2, one bucket or a rerun"
done
nb=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grad_buckets_per_step"])' z2.json 2>/dev/null)
[[ "$nb" == "16.0" ]] && ok "zero 2 with --bucket-mb 0.01: $nb buckets a step" || bad "zero 2: ${nb:-?} buckets a step (expected 16)"
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
exec(open("cmp.py").read())
r = [same("zone", "z2"), same("zone", "z2s"), same("zone", "z2s1"), same("zone", "zones")]
print("losses within %.1e relative, parameters and moments within %.1e" % (max(x for x, _ in r), max(y for _, y in r)))
PY
then ok "zero 2: dp 2, dp 2 -> one process, dp 2 -> zero 1 dp 2, one process -> zero 2 dp 2 resumed = one process (batch 8): $(cat "$tmp/out")"
else bad "zero 2 equality: $(tail -5 "$tmp/out")"; fi
for m in zm1:zero2-skip-bucket zm2:zero-owner; do
    if /usr/bin/python3 - "${m%%:*}" >"$tmp/out" 2>&1 <<'PY'
import sys; exec(open("cmp.py").read())
try:
    same("zone", sys.argv[1])
except AssertionError as e:
    print("caught: %s" % (e,)); sys.exit(0)
sys.exit(1)
PY
    then ok "mutation ${m#*:} fails the comparison: $(head -c 160 "$tmp/out")"
    else bad "mutation ${m#*:} not caught: $(tail -3 "$tmp/out")"; fi
done

# ---- the state a rank keeps against ffn plan, and the peak RSS ----
R=(--seq-len 32 --hidden-size 256 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 1024
   --corpus en --steps 2 --eval-every 0 --eval-batches 1 --batch-size 2 --quiet --json)
for z in 0 1 2; do
    rm -f "$tmp"/rss.*
    # each rank's peak RSS into a file of its own (lines on the shared stderr interleave)
    timeout 300 "${MPIRUN[@]}" -np 2 sh -c 'exec /usr/bin/time -f "maxrss %M" -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
        "$tmp/rss" "$FFN" train "${R[@]}" --dp 2 --zero $z --out big$z >big$z.json 2>"$tmp/ez" ||
        bad "rss run zero $z: $(tail -3 "$tmp/ez")"
    cat "$tmp"/rss.0 "$tmp"/rss.1 2>/dev/null | grep -o "maxrss [0-9]*" | awk '{print $2}' | paste -sd' ' >rss$z
    "$FFN" plan big$z/config.json --seq-len 32 --batch-size 2 --dp 2 --zero $z --json >plan$z.json 2>"$tmp/ez" ||
        bad "plan zero $z: $(cat "$tmp/ez")"
done
if ASAN=$ASAN /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
import json, os
lines, rss = [], {}
for z in (0, 1, 2):
    j = json.load(open("big%d.json" % z)); p = json.load(open("plan%d.json" % z))["memory_bytes"]
    n = j["params"]
    want = {"grad_bytes": 4 * (n if z < 2 else (n + 1) // 2),
            "optimizer_bytes": 8 * (n if z == 0 else (n + 1) // 2)}
    want["state_bytes"] = 4 * n + want["grad_bytes"] + want["optimizer_bytes"]
    for k, v in want.items(): assert j[k] == v, (z, k, j[k], v)
    pred = p["weights"] + p["gradients"] + p["optimizer"]
    assert abs(pred - j["state_bytes"]) <= 0.001 * j["state_bytes"], (z, pred, j["state_bytes"])
    rss[z] = [int(x) for x in open("rss%d" % z).read().split()]
    assert len(rss[z]) == 2, (z, rss[z])
    lines.append("zero %d: %.2f MB kept (plan %.2f; gradients %.2f, in the backward %.2f), peak RSS %s MB"
                 % (z, j["state_bytes"] / 1e6, pred / 1e6, j["grad_bytes"] / 1e6,
                    p["gradients_backward"] / 1e6, "/".join("%.1f" % (k * 1.024e-3) for k in rss[z])))
# the moments' half (4 n bytes) must show in the non-writer's peak (at least half of it: the
# reductions' scratch and MPI's buffers move too); ZeRO-2's peak is ZeRO-1's (the whole gradient
# block is written by the backward), within 2 MB
if os.environ["ASAN"] != "1":
    half = 4 * json.load(open("big0.json"))["params"] / 1024
    assert rss[0][1] - rss[1][1] >= 0.5 * half, ("zero 1 rank 1 peak", rss[0][1], rss[1][1], half)
    assert rss[2][1] <= rss[1][1] + 2048, ("zero 2 rank 1 peak above zero 1's", rss[1][1], rss[2][1])
else: lines.append("(ASan: RSS not compared)")
print("; ".join(lines))
PY
then ok "state a rank = ffn plan's weights + gradients + optimizer: $(cat "$tmp/out")"
else bad "state bytes / RSS: $(tail -5 "$tmp/out")"; fi

# ---- tensor parallel: --tp 2 --dp 2 --zero 2 = --zero 1 bitwise (plain round only) ----
if ((ASAN == 0)); then
    zrun 4 --tp 2 --dp 2 --zero 1 --batch-size 4 --out t1 >/dev/null
    zrun 4 --tp 2 --dp 2 --zero 2 --batch-size 4 "${S[@]}" --out t2 >/dev/null
    cmp -s t1/model.safetensors t2/model.safetensors && cmp -s t1/train_state.safetensors t2/train_state.safetensors &&
        ok "tp 2 dp 2 zero 2 (16 buckets): the bytes of tp 2 dp 2 zero 1" || bad "tp 2 dp 2 zero 2 differs from zero 1"
else echo "ok   (ASan: the 4-rank --tp 2 --dp 2 --zero 2 run is left to the plain round)"; fi

# ---- ZeRO-1/2 with --ep alone: the held tensors' state split over their groups ----
# An 8-expert model (as test_dist_shard.sh): --ep 2 --zero 1 writes the bytes
# of --ep 2 (the gradients are summed whole as without ZeRO, the norm is the
# same, the update elementwise, the all-gather copies) and equals one process
# with --grad-accum 2; stopped at 4 and resumed under --dp 2 (no ZeRO, no EP)
# it ends where one process does; --ep 2 --zero 2 (each held tensor's
# gradient reduce-scattered over its group) equals one process, and stopped
# at 4 resumes under --dp 2 --zero 2, and twice it writes the same bytes; the mutations zero-held-owner (each
# rank updates another rank's part) and zero2-skip-bucket (the tensors of
# 2048 floats or more not reduce-scattered) break the equality; the state
# bytes of --zero 0/1/2 equal ffn plan --ep 2's.
M=(--seq-len 32 --hidden-size 48 --num-hidden-layers 2 --num-attention-heads 4 --intermediate-size 64
   --num-experts 8 --num-experts-per-tok 2 --corpus en --steps 8 --eval-every 4 --quiet --json)
erun() { local np=$1; shift; timeout 300 "${MPIRUN[@]}" -np "$np" "$FFN" train "${M[@]}" "$@" 2>"$tmp/ez" ||
             bad "-np $np $*: $(tail -3 "$tmp/ez")"; }
"$FFN" train "${M[@]}" --threads 1 --batch-size 4 --grad-accum 2 --eval-batches 8 --out eone >/dev/null 2>"$tmp/ez" ||
    bad "one process (MoE): $(tail -3 "$tmp/ez")"
erun 2 --ep 2 --batch-size 4 --eval-batches 4 --out ep2 >ep2.json
erun 2 --ep 2 --zero 1 --batch-size 4 --eval-batches 4 --out ep2z >ep2z.json
erun 2 --ep 2 --zero 1 --batch-size 4 --eval-batches 4 --stop-at 4 --out ep2zs >/dev/null
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --resume ep2zs --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume ep 2 zero 1 -> dp 2: $(tail -3 "$tmp/ez")"
FFN_DIST_MUTATE=zero-held-owner erun 2 --ep 2 --zero 1 --batch-size 4 --eval-batches 4 --out ep2zm >/dev/null
erun 2 --ep 2 --zero 2 --batch-size 4 --eval-batches 4 --out ep2z2 >ep2z2.json
erun 2 --ep 2 --zero 2 --batch-size 4 --eval-batches 4 --out ep2z2b >/dev/null
erun 2 --ep 2 --zero 2 --batch-size 4 --eval-batches 4 --stop-at 4 --out ep2z2s >/dev/null
timeout 300 "${MPIRUN[@]}" -np 2 "$FFN" train --dp 2 --zero 2 --resume ep2z2s --quiet >/dev/null 2>"$tmp/ez" ||
    bad "resume ep 2 zero 2 -> dp 2 zero 2: $(tail -3 "$tmp/ez")"
FFN_DIST_MUTATE=zero2-skip-bucket erun 2 --ep 2 --zero 2 --batch-size 4 --eval-batches 4 --out ep2z2m >/dev/null
"$FFN" plan ep2/config.json --seq-len 32 --batch-size 4 --dp 2 --ep 2 --zero 2 --json >eplan2.json 2>"$tmp/ez" ||
    bad "plan ep 2 zero 2: $(cat "$tmp/ez")"
"$FFN" plan ep2/config.json --seq-len 32 --batch-size 4 --dp 2 --ep 2 --zero 1 --json >eplan1.json 2>"$tmp/ez" ||
    bad "plan ep 2 zero 1: $(cat "$tmp/ez")"
"$FFN" plan ep2/config.json --seq-len 32 --batch-size 4 --dp 2 --ep 2 --json >eplan0.json 2>"$tmp/ez" ||
    bad "plan ep 2: $(cat "$tmp/ez")"
cmp -s ep2/model.safetensors ep2z/model.safetensors && cmp -s ep2/train_state.safetensors ep2z/train_state.safetensors &&
    ok "ep 2 zero 1: model.safetensors and train_state.safetensors bitwise those of ep 2" || bad "ep 2 zero 1 differs from ep 2"
cmp -s ep2z2/model.safetensors ep2z2b/model.safetensors && cmp -s ep2z2/train_state.safetensors ep2z2b/train_state.safetensors &&
    ok "ep 2 zero 2 twice: the same bytes" || bad "ep 2 zero 2: two runs differ"
if /usr/bin/python3 - >"$tmp/out" 2>&1 <<'PY'
import json; exec(open("cmp.py").read())
r = [same("eone", "ep2z"), same("eone", "ep2zs"), same("eone", "ep2z2"), same("eone", "ep2z2s")]
line = "losses within %.1e relative, parameters and moments within %.1e" % (max(x for x, _ in r), max(y for _, y in r))
for z, run in ((0, "ep2"), (1, "ep2z"), (2, "ep2z2")):
    j = json.load(open(run + ".json")); p = json.load(open("eplan%d.json" % z))["memory_bytes"]
    pred = p["weights"] + p["gradients"] + p["optimizer"]
    assert abs(pred - j["state_bytes"]) <= 0.01 * j["state_bytes"], (run, pred, j["state_bytes"])
    line += "; ep 2 zero %d: %d state bytes (plan %d), gradients %d (plan %d), optimizer %d (plan %d)" % (
        z, j["state_bytes"], pred, j["grad_bytes"], p["gradients"], j["optimizer_bytes"], p["optimizer"])
e0, e1, e2 = (json.load(open(f + ".json")) for f in ("ep2", "ep2z", "ep2z2"))
assert e1["optimizer_bytes"] < e0["optimizer_bytes"] and e2["grad_bytes"] < e1["grad_bytes"] == e0["grad_bytes"]
for run, name in (("ep2zm", "zero-held-owner"), ("ep2z2m", "zero2-skip-bucket")):
    try:
        same("eone", run)
    except AssertionError as e:
        line += "; mutation %s caught: %s" % (name, str(e)[:90])
    else:
        raise AssertionError("mutation %s not caught" % name)
print(line)
PY
then ok "ep 2 zero 1, zero 2 = one process (2 micro-batches), ep 2 zero 1 -> dp 2 and ep 2 zero 2 -> dp 2 zero 2 resumed too: $(cat "$tmp/out")"
else bad "ep 2 zero 1/2: $(tail -5 "$tmp/out")"; fi

# ---- refused before any allocation, on every rank, nothing written ----
B=(--seq-len 32 --hidden-size 4096 --num-hidden-layers 48 --num-attention-heads 32 --intermediate-size 11008
   --corpus en --steps 1 --quiet)
refuse() { # NP PATTERN OUT args...
    local np=$1 pat=$2 out=$3; shift 3
    local rc=0
    rm -f "$tmp"/rss.*
    timeout 120 "${MPIRUN[@]}" -np "$np" sh -c 'exec /usr/bin/time -f "maxrss %M" -o "$0.$OMPI_COMM_WORLD_RANK" "$@"' \
        "$tmp/rss" "$FFN" train "${B[@]}" "$@" --out "$out" >/dev/null 2>"$tmp/err" || rc=$?
    local n rss; n=$(grep -cE -- "$pat" "$tmp/err")
    rss=$(cat "$tmp"/rss.* 2>/dev/null | grep -o "maxrss [0-9]*" | awk '{print $2}' | sort -n | tail -1)
    if ((rc != 0 && rc != 124)) && ((n >= 1)) && [[ ! -e "$out" ]] && ((${rss:-999999} < 200000)); then
        ok "($rc, $n of $np ranks said it, at most ${rss} KiB resident, nothing written) $pat"
    else bad "-np $np $*: exit $rc, $n of $np said '$pat', rss ${rss:-?} KiB, $(ls -d "$out" 2>/dev/null): $(head -c 300 "$tmp/err")"; fi
}
refuse 2 "--zero 2 with --dp 1: .* the 2 ranks of the job are --tp 2 x --dp 1: give --dp 2 or more" r1 --tp 2 --zero 2
refuse 3 "--ep 2 does not divide --dp 3" r2 --dp 3 --ep 2 --zero 2 --num-experts 4 --num-experts-per-tok 1
rc=0; "$FFN" train "${B[@]}" --zero 2 --out r3 >/dev/null 2>"$tmp/err" || rc=$?
((rc == 2)) && grep -q -- "--zero 2 shards the optimizer and the gradients over --dp ranks: .*this is one process: --dp 1" "$tmp/err" && [[ ! -e r3 ]] &&
    ok "--zero 2 in one process: exit 2, named, nothing written" || bad "--zero 2 one process: exit $rc: $(cat "$tmp/err")"
"$FFN" train --help | tr -s ' \n' ' ' | grep -q -- "2: also the gradients: reduce-scattered bucket by bucket" && ok "ffn train --help explains --zero 2" || bad "ffn train --help: no --zero 2"
exit $fail
