#!/usr/bin/env bash
# test_fuzz_regress.sh -- replay the fuzzing corpus (seeds and every input
# that ever crashed a parser, tests/fuzz/corpus/<target>/) through the same
# harnesses the fuzzers use, built without libFuzzer against the ASan+UBSan
# library (build/asan/libffn.a, from `make asan`; else build/libffn_internal.a:
# the harnesses call the parsers' internal functions).
# Every input must be handled without a crash, a sanitizer report or a
# broken invariant (the harnesses abort on those).
set -euo pipefail
root="${FFN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

lib=build/asan/libffn.a
san=(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
if [[ ! -f $lib ]]; then lib=build/libffn_internal.a; san=(); fi
[[ -f $lib ]] || { echo "no library built (run make)"; exit 1; }
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:abort_on_error=0"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export FFN_NUM_THREADS=1

total=0
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    dir=tests/fuzz/corpus/$name
    [[ -d $dir ]] || { echo "$name: no corpus directory $dir"; exit 1; }
    cc -std=c11 -D_GNU_SOURCE -DFFN_FUZZ_REPLAY -g -O1 "${san[@]}" -Iinclude -Isrc \
        -o "$tmp/$name" "$src" "$lib" -ldnnl -fopenmp -lm -lpthread -lpcre2-8
    mapfile -t inputs < <(find "$dir" -type f | sort)
    ((${#inputs[@]} > 0)) || { echo "$name: empty corpus"; exit 1; }
    # one input per process run would be slow; batches keep a crash attributable
    for ((i = 0; i < ${#inputs[@]}; i += 50)); do
        if ! "$tmp/$name" "${inputs[@]:i:50}" >"$tmp/out" 2>&1; then
            # find the input(s) of the batch that fail, one process each
            for input in "${inputs[@]:i:50}"; do
                if ! "$tmp/$name" "$input" >"$tmp/one" 2>&1; then
                    tail -n 40 "$tmp/one"
                    echo "$name: FAILED on $input"
                fi
            done
            exit 1
        fi
    done
    echo "$name: ${#inputs[@]} inputs replayed, no crash"
    total=$((total + ${#inputs[@]}))
done
echo "fuzz regression corpus: $total inputs OK"
