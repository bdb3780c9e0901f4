# lib_cpu.sh -- sourced by tests and benchmarks that need an instruction set:
#   cpu_has ISA   exit 0 when the CPU has ISA, by its /proc/cpuinfo flags (not
#                 by the code under test), capped by FFN_SIMD=scalar|avx2|avx512
#                 the way ffn caps itself.  ISA: avx2 (with fma), avx512 (f,
#                 bw, vl, dq), avx512_bf16, avx512_vnni (each also needing
#                 avx512).
#   note TEXT     a line tests/run.sh prints beside the test's result: what
#                 was checked where the machine decides (nothing is skipped
#                 silently).
cpu_has() {
    local flags level
    flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1) "
    case "${FFN_SIMD:-}" in scalar) level=0 ;; avx2) level=1 ;; *) level=2 ;; esac
    has() { local f; for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
    ((level >= 1)) && has avx2 fma || return 1
    [[ $1 == avx2 ]] && return 0
    ((level >= 2)) && has avx512f avx512bw avx512vl avx512dq || return 1
    [[ $1 == avx512 ]] && return 0
    has "$1"
}
note() { echo "note: $*"; }
