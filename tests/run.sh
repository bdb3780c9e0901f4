#!/usr/bin/env bash
# tests/run.sh -- run every test and end with "N passed, N failed".
#   unit     build/tests/test_*        (C unit tests)
#   asan     build/asan/tests/test_*   (the same under ASan + UBSan)
#   parity   tests/parity/test_*.py    (against PyTorch, /usr/bin/python3)
#   cli      tests/cli/test_*.sh       (the command line, bad input, files)
#   asan-cli the CLI tests that run $FFN_BIN again, through build/asan/ffn
#            (the command under ASan + UBSan, from make asan-cli)
#   browser  tests/browser/test_*.mjs  (headless Chromium, node)
#   simd-avx2, simd-scalar
#            the kernel, layer, model and GGUF tests again on an emulated
#            AVX2-only machine (FFN_SIMD=avx2 and ONEDNN_MAX_CPU_ISA=AVX2,
#            which caps oneDNN too) and at ffn's scalar level
#            (FFN_SIMD=scalar), so that an AVX-512 machine runs what an AVX2
#            one would; the line says when the CPU itself is below the level
# A test's lines "note: ..." (what it checked where the machine decides,
# e.g. an instruction set it lacks, so the refusal was tested) are printed
# beside its PASS or FAIL: nothing is skipped silently.
# Usage: tests/run.sh [-j N] [substring]   -- only tests whose name
# contains it; -j N (or FFN_TEST_JOBS=N) runs up to N tests at a time
# (scripts/test.sh: 3), a new one as soon as any ends.  The results are
# printed in the same order, each when it and all before it have ended, so
# the output is the same as one at a time.  A test that holds a bound in
# seconds (serial_tests below) runs alone, after the others.
# Each test's output goes to build/test-logs/<name>.log; a failure prints
# the log's tail.  Build first (make all unit asan asan-cli).
set -u
cd "$(dirname "$0")/.."
jobs="${FFN_TEST_JOBS:-1}"
if [[ "${1:-}" == -j* ]]; then
    jobs="${1#-j}"; shift
    [[ -z "$jobs" ]] && { jobs="${1:-}"; shift; }
fi
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "tests/run.sh: -j takes a whole number >= 1, not '$jobs'" >&2; exit 2; }
filter="${1:-}"
logs=build/test-logs
mkdir -p "$logs"
export FFN_ROOT="$PWD"
export FFN_BIN="$PWD/build/ffn"
export FFN_SHARED="${FFN_SHARED:-$PWD/../shared}"
# LeakSanitizer cannot follow OpenMP's and oneDNN's thread pools reliably
# under ptrace-less sandboxes; leaks are still checked in single-threaded
# unit tests by FFN_NUM_THREADS=1 below.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
passed=0; failed=0; failed_names=()

# Tests that hold a bound in seconds (or a timeout that must not fire on a
# loaded machine), or click through a browser against a clock: these run
# alone even under -j, one after another once all the others have ended
# (at -j 1 too, so the output is the same).  (The MPI tests test_dist and test_dist_agree may
# share the cores: their deadlines are 60 s and more a step, and both pass
# with the machine loaded twelve times over.)
serial_tests=(test_cost_bounds test_hostile test_serve_slow test_serve_load
              test_serve_guard test_train_profile test_bench test_files browser/)
serial_names=(); serial_cmds=()
is_serial() {
    local s
    for s in "${serial_tests[@]}"; do [[ "$1" == *"$s"* ]] && return 0; done
    return 1
}
# the tests started and not yet reported, in the order they started: name,
# pid, log, start, ended (parallel arrays).  A slot is freed by whichever
# test ends first (wait -n); the results are still printed in order, each
# once it and all before it have ended.
q_name=(); q_pid=(); q_log=(); q_t0=(); q_end=()
running=0

# The CPU seconds (user + system) of a test and every process it waited
# for: the line's second figure.  Unlike the wall time it hardly changes
# with the machine's load, so it is what to compare when cutting the
# suite's time (the slowest by CPU are listed at the end).
cpu_secs() { # file with the output of `times` -> the children's CPU seconds
    awk 'function sec(t, m) { m = t; sub(/m.*/, "", m); sub(/^[0-9]+m/, "", t); sub(/s$/, "", t); return m * 60 + t }
         NR == 2 { printf "%d\n", sec($1) + sec($2) + 0.5 }' "$1"
}
run_test() { # log, t0, command...: the test in a subshell; writes log.rc
    local log="$1" t0="$2"; shift 2
    rm -f "$log.rc"
    ( rc=0; "$@" >"$log" 2>&1 </dev/null || rc=$?
      times >"$log.times"   # (here: the subshell's children, this test's processes)
      echo "$rc $((SECONDS - t0)) $(cpu_secs "$log.times")" >"$log.rc"; rm -f "$log.times" )
}
read_rc() { # log, t0 -> rc secs cpu (a missing .rc file: killed, rc 1)
    local rc=1 secs=$((SECONDS - $2)) cpu=0
    [[ -f "$1.rc" ]] && read -r rc secs cpu <"$1.rc"
    rm -f "$1.rc"
    echo "$rc $secs $cpu"
}
run_one() { # name, command...
    local name="$1"; shift
    [[ -n "$filter" && "$name" != *"$filter"* ]] && return
    local log="$logs/${name//\//_}.log" t0=$SECONDS
    if is_serial "$name" && [[ -z "${in_serial:-}" ]]; then
        # run alone, after all the others (one wait for the cores to be
        # free instead of one for each): kept, with its words quoted
        serial_names+=("$name"); serial_cmds+=("$(printf '%q ' "$@")")
        return
    fi
    rm -f "$log.rc"
    if ((jobs == 1)) || [[ -n "${in_serial:-}" ]]; then
        t0=$SECONDS
        run_test "$log" "$t0" "$@"
        report "$name" "$log" $(read_rc "$log" "$t0")
        return
    fi
    drain $((jobs - 1))
    t0=$SECONDS # (the test's own time, not its wait for a free slot)
    run_test "$log" "$t0" "$@" &
    q_name+=("$name"); q_pid+=($!); q_log+=("$log"); q_t0+=("$t0"); q_end+=(0)
    running=$((running + 1))
}
drain() { # N: wait for any running test to end until at most N run
    local i live
    while ((running > $1)); do
        live=()
        for i in "${!q_pid[@]}"; do ((q_end[i])) || live+=("${q_pid[i]}"); done
        wait -n "${live[@]}" 2>/dev/null
        for i in "${!q_pid[@]}"; do
            # ended: its .rc file (written last by the test's subshell), or
            # gone without one (killed)
            if ((!q_end[i])) && { [[ -f "${q_log[i]}.rc" ]] || ! kill -0 "${q_pid[i]}" 2>/dev/null; }; then
                q_end[i]=1; running=$((running - 1))
            fi
        done
        flush
    done
    flush
}
flush() { # report the ended tests at the head of the queue, in order
    while ((${#q_pid[@]})) && ((q_end[0])); do
        wait "${q_pid[0]}" 2>/dev/null
        report "${q_name[0]}" "${q_log[0]}" $(read_rc "${q_log[0]}" "${q_t0[0]}")
        q_name=("${q_name[@]:1}"); q_pid=("${q_pid[@]:1}"); q_log=("${q_log[@]:1}")
        q_t0=("${q_t0[@]:1}"); q_end=("${q_end[@]:1}")
    done
}
cpu_list=() # "cpu name", for the list of the slowest at the end
report() { # name, log, exit status, seconds, CPU seconds
    local name="$1" log="$2"
    cpu_list+=("$5 $name")
    if (($3 == 0)); then
        passed=$((passed + 1)); printf 'PASS %-40s %4ds %4ds cpu' "$name" "$4" "$5"
        print_notes "$log"
    else
        failed=$((failed + 1)); failed_names+=("$name")
        printf 'FAIL %-40s %4ds %4ds cpu  (log: %s)' "$name" "$4" "$5" "$log"
        print_notes "$log"
        tail -n 30 "$log" | sed 's/^/    /'
    fi
}
print_notes() { # the log's "note: " lines, after the result on one line
    local notes
    notes=$(sed -n 's/^ *note: //p' "$1" | head -n 4 | paste -sd';' - | sed 's/;/; /g')
    [[ -n "$notes" ]] && printf '  [%s]' "$notes"
    printf '\n'
}

simd_run() { # note (or ""), command...: the note first, then the command
    [[ -n "$1" ]] && echo "$1"
    shift
    "$@"
}

# (test_* with no dot: not the .d dependency files, nor a .tmp being linked)
for t in build/tests/test_*; do
    [[ -x "$t" && "$t" != *.* ]] && run_one "unit/$(basename "$t")" "$t"
done
for t in build/asan/tests/test_*; do
    [[ -x "$t" && "$t" != *.* ]] && run_one "asan/$(basename "$t")" env FFN_NUM_THREADS=1 "$t"
done
for t in tests/parity/test_*.py; do [[ -f "$t" ]] && run_one "parity/$(basename "$t" .py)" /usr/bin/python3 "$t"; done
for t in tests/cli/test_*.sh; do [[ -f "$t" ]] && run_one "cli/$(basename "$t" .sh)" bash "$t"; done
# The same CLI tests through the sanitized command (only those that run
# $FFN_BIN; the others do not depend on which binary it is).
runs_bin() { # test: it or a tests/cli/lib_*.sh it sources names FFN_BIN
    local lib
    grep -q 'FFN_BIN' "$1" && return 0
    for lib in $(grep -oE '^(source|\.) .*/lib_[a-z_]+\.sh' "$1" | grep -oE 'lib_[a-z_]+\.sh'); do
        grep -q 'FFN_BIN' "tests/cli/$lib" && return 0
    done
    return 1
}
if [[ -x build/asan/ffn ]]; then
    for t in tests/cli/test_*.sh; do
        [[ -f "$t" ]] && runs_bin "$t" &&
            run_one "asan-cli/$(basename "$t" .sh)" env FFN_BIN="$PWD/build/asan/ffn" bash "$t"
    done
elif [[ -z "$filter" || "asan-cli/" == *"$filter"* ]]; then
    drain 0
    failed=$((failed + 1)); failed_names+=("asan-cli")
    echo "FAIL asan-cli: build/asan/ffn is missing (make asan-cli)"
fi
# The kernel, layer, model and GGUF tests at the lower SIMD levels (about
# 1.5 minutes a level on 2 cores).  Not here: test_gemv_multi (it runs its
# layer under FFN_SIMD=avx2 and scalar in child processes itself) and
# test_model_quant (by design at the scalar level, whose activations stay
# exact for its dequantized-fp32 reference; the SIMD levels' quantized
# kernels have their own bounds in test_qgemm and cli/test_llamacpp).
simd_unit=(test_kernels test_wgrad test_attention test_qgemm test_qgemm_int8 test_quant test_bf16
           test_layer test_layer_prod test_moe test_model test_model_grad test_generate
           test_gguf test_gguf_mmap test_adamw_lanes)
simd_parity=(test_act test_layer test_moe test_moe_routing test_model test_stories260k test_bf16
             test_quant test_quant_formats test_families)
simd_cli=(test_gguf_model test_quant_run)
for level in avx2 scalar; do
    lenv=(env FFN_SIMD=$level)
    [[ $level == avx2 ]] && lenv+=(ONEDNN_MAX_CPU_ISA=AVX2)
    got=$("${lenv[@]}" build/ffn version 2>/dev/null | sed -n 's/^simd //p')
    below=""
    [[ -n "$got" && "$got" != "$level" ]] && below="note: this CPU is below $level: ran at $got"
    # On a CPU whose own level is AVX2 (no AVX-512, no AVX-VNNI for oneDNN
    # to use), the avx2 round is the unit/, parity/ and cli/ runs above
    # over again, bit for bit: said, not run twice.
    if [[ $level == avx2 && "$(build/ffn version 2>/dev/null | sed -n 's/^simd //p')" == avx2 ]] &&
       ! grep -qE '^flags.*\b(avx512[a-z_0-9]*|avx_vnni)\b' /proc/cpuinfo; then
        hit=""
        for t in "${simd_unit[@]}" "${simd_parity[@]/#/parity/}" "${simd_cli[@]/#/cli/}"; do
            [[ -z "$filter" || "simd-avx2/$t" == *"$filter"* ]] && hit=1
        done
        if [[ -n "$hit" ]]; then
            drain 0
            echo "note: simd-avx2 round not run: this CPU's own level is avx2 (ffn version: simd avx2; /proc/cpuinfo: no avx512*, no avx_vnni), so unit/, parity/ and cli/ above ran these tests at that level"
        fi
        continue
    fi
    for t in "${simd_unit[@]}"; do
        [[ -x build/tests/$t ]] && run_one "simd-$level/$t" simd_run "$below" "${lenv[@]}" "build/tests/$t"
    done
    for t in "${simd_parity[@]}"; do
        [[ -f tests/parity/$t.py ]] &&
            run_one "simd-$level/parity/$t" simd_run "$below" "${lenv[@]}" /usr/bin/python3 "tests/parity/$t.py"
    done
    for t in "${simd_cli[@]}"; do
        [[ -f tests/cli/$t.sh ]] && run_one "simd-$level/cli/$t" simd_run "$below" "${lenv[@]}" bash "tests/cli/$t.sh"
    done
done
for t in tests/browser/test_*.mjs; do [[ -f "$t" ]] && run_one "browser/$(basename "$t" .mjs)" node "$t"; done

drain 0
in_serial=1
for i in "${!serial_names[@]}"; do eval "run_one ${serial_names[i]@Q} ${serial_cmds[i]}"; done
if ((${#cpu_list[@]} > 1)); then
    printf '%s\n' "${cpu_list[@]}" | sort -k1,1nr | head -n 8 |
        awk -v t="$SECONDS" '{ s = s sprintf("%s%s %ds", NR > 1 ? ", " : "", $2, $1) } END { printf "slowest by CPU: %s; wall %ds in all\n", s, t }'
fi
if ((failed)); then printf 'failed: %s\n' "${failed_names[*]}"; fi
echo "$passed passed, $failed failed"
((failed == 0))
