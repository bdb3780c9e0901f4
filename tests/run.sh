#!/usr/bin/env bash
# tests/run.sh -- run every test and end with "N passed, N failed".
#   unit     build/tests/test_*        (C unit tests)
#   asan     build/asan/tests/test_*   (the same under ASan + UBSan)
#   parity   tests/parity/test_*.py    (against PyTorch, /usr/bin/python3)
#   cli      tests/cli/test_*.sh       (the command line, bad input, files)
#   asan-cli the CLI tests that run $FFN_BIN again, through build/asan/ffn
#            (the command under ASan + UBSan, from make asan-cli)
#   browser  tests/browser/test_*.mjs  (headless Chromium, node)
# Usage: tests/run.sh [substring]   -- only tests whose name contains it.
# Each test's output goes to build/test-logs/<name>.log; a failure prints
# the log's tail.  Build first (make all unit asan asan-cli).
set -u
cd "$(dirname "$0")/.."
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

run_one() { # name, command...
    local name="$1"; shift
    [[ -n "$filter" && "$name" != *"$filter"* ]] && return
    local log="$logs/${name//\//_}.log" t0=$SECONDS
    if "$@" >"$log" 2>&1; then
        passed=$((passed + 1)); printf 'PASS %-40s %4ds\n' "$name" $((SECONDS - t0))
    else
        failed=$((failed + 1)); failed_names+=("$name")
        printf 'FAIL %-40s %4ds  (log: %s)\n' "$name" $((SECONDS - t0)) "$log"
        tail -n 30 "$log" | sed 's/^/    /'
    fi
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
if [[ -x build/asan/ffn ]]; then
    for t in tests/cli/test_*.sh; do
        [[ -f "$t" ]] && grep -q 'FFN_BIN' "$t" &&
            run_one "asan-cli/$(basename "$t" .sh)" env FFN_BIN="$PWD/build/asan/ffn" bash "$t"
    done
elif [[ -z "$filter" || "asan-cli/" == *"$filter"* ]]; then
    failed=$((failed + 1)); failed_names+=("asan-cli")
    echo "FAIL asan-cli: build/asan/ffn is missing (make asan-cli)"
fi
for t in tests/browser/test_*.mjs; do [[ -f "$t" ]] && run_one "browser/$(basename "$t" .mjs)" node "$t"; done

if ((failed)); then printf 'failed: %s\n' "${failed_names[*]}"; fi
echo "$passed passed, $failed failed"
((failed == 0))
