#!/usr/bin/env bash
# Runs every benchmark in bench/ on one device and writes each table to $OUT (or ./bench-out).
#   bash bench/run_all.sh [device-spec] [quick]
# Used for docs/benchmarks.md; each script compares with Theano C in the same process.
set -u
dev=${1:-}
out=${OUT:-bench-out}
mkdir -p "$out"
cd "$(dirname "$0")"
tag=${dev:-default}
run() {  # name, timeout, args...
  local name=$1 t=$2; shift 2
  echo "== $name ($tag)"
  timeout "$t" python "$@" ${dev:+--device $dev} 2>&1 | grep -v -e compilelock -e 'WARNING (theano' | tee "$out/$name-$tag.txt"
}
run check1 120 check1.py
run check1_host 120 check1_host.py
run elemwise 120 elemwise.py
run overhead 120 overhead.py --calls 5000
run reduce 200 reduce.py
run reduce_ceiling 200 reduce_ceiling.py
# NVIDIA only, with a second Python that has cupy and torch (python3 on the H100 machine)
run reduce_cupti 200 reduce_cupti.py
run gemm 200 gemm.py
run demo 300 demo.py --hidden 1000,1000 --steps 50
run mlp 300 mlp.py
run nengo 600 nengo_like.py --ensembles ${NENGO_E:-500} --steps 200 --detail ${NENGO_CACHE:+--cache $NENGO_CACHE}
run cmdbuf 300 cmdbuf.py
