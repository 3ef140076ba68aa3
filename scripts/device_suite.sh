#!/usr/bin/env bash
# Run the test suite on one OpenCL device of a bigger machine (the lent GPU machine), in
# parallel (pytest-xdist), one Theano compiledir per worker; logs go to $OUT (or /tmp).
#   scripts/device_suite.sh gpu  8 [pytest args...]   # THEANO_OCL_DEVICE=gpu, 8 workers
#   scripts/device_suite.sh cpu 12 [pytest args...]
set -uo pipefail
dev=${1:-gpu}; n=${2:-8}; shift 2 || true
out=${OUT:-/tmp}
export THEANO_OCL_DEVICE=$dev THEANO_OCL_TEST_WORKER_COMPILEDIR=${THEANO_OCL_TEST_WORKER_COMPILEDIR:-/tmp/thc}
python -m theano_ocl info > "$out/info-$dev.txt" 2>&1
start=$(date +%s)
# tests spread one by one (--dist load), not a file per worker: test_elemwise and
# test_scan_device alone outlast a device call on one worker; on the H200 with 14 workers
# the whole suite took 6 min 50 s (warm compile directories)
python -m pytest -q -p no:cacheprovider -n "$n" --dist load -rfE tests "$@" \
    > "$out/pytest-$dev.log" 2>&1
rc=$?
echo "device=$dev workers=$n rc=$rc seconds=$(( $(date +%s) - start ))" | tee -a "$out/pytest-$dev.log"
tail -n 25 "$out/pytest-$dev.log"
exit $rc
