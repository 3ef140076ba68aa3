#!/usr/bin/env bash
# Runs the benchmark suite and the diagnostic scripts on one device; writes each output
# to $OUT (or ./bench-out).
#   bash bench/run_all.sh [device-spec] [quick]
# The suite (python -m theano_ocl bench) writes its run record as JSON beside its table;
# `python -m theano_ocl bench --record` stores it under docs/_data/benchmarks/ instead,
# from where the docs' tables and plots are rendered. The scripts below add what the
# suite leaves out (kernel-only and event times, BLAS backends, launch costs).
set -u
dev=${1:-}
quick=${2:+--quick}
out=$(realpath -m "${OUT:-bench-out}")
mkdir -p "$out"
cd "$(dirname "$0")"
tag=${dev:-default}
run() {  # name, timeout, args...
  local name=$1 t=$2; shift 2
  echo "== $name ($tag)"
  timeout "$t" python "$@" ${dev:+--device $dev} 2>&1 | grep -v -e compilelock -e 'WARNING (theano' | tee "$out/$name-$tag.txt"
}
run suite 1800 -m theano_ocl bench $quick --no-progress --json "$out/suite-$tag.json" --plot "$out/suite-$tag.png"
run check1_host 120 check1_host.py
run download_cost 200 download_cost.py
run wait_latency 200 wait_latency.py
run handed_outputs 200 handed_outputs.py
run reduce 200 reduce.py
run reduce_ceiling 200 reduce_ceiling.py
# NVIDIA only, with a second Python that has cupy and torch (python3 on the H100 machine)
run reduce_cupti 200 reduce_cupti.py
run gemm 200 gemm.py
run gemm_shapes 300 gemm_shapes.py
run fusion 300 fusion.py
run nengo 600 nengo_like.py --ensembles ${NENGO_E:-500} --steps 200 ${NENGO_CACHE:+--cache $NENGO_CACHE}
run cmdbuf 300 cmdbuf.py
run vm_launch_cost 300 vm_launch_cost.py
run lenet 600 lenet.py --json "$out/lenet-$tag.json"
run lstm 900 lstm.py $quick --json "$out/lstm-$tag.json"
run minibatch 300 minibatch.py
# torch eager references (a Python with torch and CUDA; not the theano_ocl one)
if ${TORCH_PYTHON:-python3} -c "import torch" 2>/dev/null; then
  echo "== torch_ref"; ${TORCH_PYTHON:-python3} torch_ref.py $quick --json "$out/torch-ref.json" | tee "$out/torch-ref.txt"
fi
