# lib_dist.sh -- sourced by the distributed-training tests (test_dist_zero.sh,
# test_dist_pp.sh, test_dist_overlap.sh): the ffn binary (FFN_BIN, made
# absolute), a temporary directory removed on exit and entered, ok/bad and
# the fail flag, Open MPI as root and oversubscribed (MPIRUN), ASan's
# options for an ASan binary, and the run comparison (dist_cmp.py) as cmp.py.
# A missing mpirun is a failure, not a skip.
FFN="${FFN_BIN:-build/ffn}"
FFN="$(cd "$(dirname "$FFN")" && pwd)/$(basename "$FFN")"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
case "$FFN" in */asan/*) export ASAN_OPTIONS="abort_on_error=0:detect_leaks=0" ;; esac
MPIRUN=(mpirun --oversubscribe)
command -v mpirun >/dev/null || { bad "mpirun missing (scripts/setup.sh test installs openmpi-bin)"; exit 1; }
cd "$tmp" || exit 1
cp "$HERE/dist_cmp.py" "$tmp/cmp.py"
