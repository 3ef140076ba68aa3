#!/usr/bin/env bash
# Run the test suite on one OpenCL device of a bigger machine (the lent GPU machine), in
# parallel (pytest-xdist); the log and every test's time (longest first) go to $OUT (or /tmp).
#   scripts/device_suite.sh gpu 24 [pytest args...]   # THEANO_OCL_DEVICE=gpu, 24 workers
#   scripts/device_suite.sh cpu 12 [pytest args...]
# SUITE_TIMEOUT=SECONDS stops pytest there (its per-test times are kept).
#
# - one Theano compiledir per worker (no waiting on one compiledir's lock), and one cache
#   of the modules Theano's g++ links, shared by all of them (scripts/g++-cache): a module
#   is compiled once, not once per worker;
# - one kernel cache for all workers (THEANO_OCL_KERNEL_CACHE_DIR);
# - the longest tests first (tests/durations_h200.tsv, as timed on the H200), handed out
#   one by one to whichever worker is free, so that workers end together.
set -uo pipefail
dev=${1:-gpu}; n=${2:-8}; shift 2 || true
out=${OUT:-/tmp}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${THEANO_OCL_TEST_WORKER_COMPILEDIR:-/tmp/thc}
export THEANO_OCL_DEVICE=$dev THEANO_OCL_TEST_WORKER_COMPILEDIR=$work
export THEANO_FLAGS=${THEANO_FLAGS:+$THEANO_FLAGS,}cxx=$root/scripts/g++-cache
export G_CACHE_DIR=${G_CACHE_DIR:-$work.g++-cache} G_CACHE_STRIP="$work/[^/]+"
export THEANO_OCL_KERNEL_CACHE_DIR=${THEANO_OCL_KERNEL_CACHE_DIR:-$work.kernels}
export THEANO_OCL_TEST_ORDER=${THEANO_OCL_TEST_ORDER:-$root/tests/durations_h200.tsv}
export THEANO_OCL_TEST_TIMES=${THEANO_OCL_TEST_TIMES:-$work.times}
python -m theano_ocl info > "$out/info-$dev.txt" 2>&1
paths=tests
for a in "$@"; do case $a in tests/*) paths= ;; esac; done
start=$(date +%s)
timeout "${SUITE_TIMEOUT:-0}" python -m pytest -q -p no:cacheprovider -n "$n" --dist worksteal \
    -rfE --durations=30 $paths "$@" > "$out/pytest-$dev.log" 2>&1
rc=$?
cat "$THEANO_OCL_TEST_TIMES"/*.tsv 2>/dev/null | sort -rn > "$out/test-times-$dev.tsv"
echo "device=$dev workers=$n rc=$rc seconds=$(( $(date +%s) - start )) modules compiled=$(ls "$G_CACHE_DIR" 2>/dev/null | wc -l)" \
    | tee -a "$out/pytest-$dev.log"
tail -n 25 "$out/pytest-$dev.log"
exit $rc
