#!/usr/bin/env bash
# `make sanitize`: the kernel families' tests (small sizes) on Oclgrind, the OpenCL 1.2 device
# simulator, with its out-of-bounds and data-race checks. Exits non-zero when pytest fails or
# when Oclgrind reports anything (a report does not fail the test that triggered it: the
# script reads Oclgrind's log).
#
#   scripts/sanitize.sh [PYTEST ARGS...]    (default: $SANITIZE_TESTS below)
#
# How: `oclgrind --data-races --log LOG python -m pytest -s ...` preloads Oclgrind's OpenCL
# runtime in place of the ICD loader, so its simulator is the only platform pyopencl sees;
# THEANO_OCL_DEVICE=oclgrind makes theano_ocl refuse any other. Oclgrind declares every
# device type; theano_ocl takes it for a GPU (device.py), without unified memory, CLBlast or
# device-scope atomics: the GPU code paths, cross-group reductions by a second launch.
# Not enabled: --uninitialized (it aborts on LLVM's `freeze` instruction).
#
# Oclgrind is installed with apt-get when missing (root or password-less sudo; not with
# BOOTSTRAP_NO_APT=1); otherwise the script says what is missing and exits 2.
# Environment: PY (default .venv/bin/python), SANITIZE_LOG (default
# .sanitize/oclgrind.log), SANITIZE_TESTS (pytest arguments, a space-separated list).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PY:-$(pwd)/.venv/bin/python}
LOG=${SANITIZE_LOG:-$(pwd)/.sanitize/oclgrind.log}
# the families' kernels at small sizes (a case of 1e6 elements costs minutes simulated);
# test_reduce: every reduction kernel (generic, rows, cols; GPU geometries; parts reduced
# across work-groups, by a second launch on Oclgrind) against Theano C
DEFAULT_TESTS=(
    "tests/test_reduce.py::test_every_op_and_axis_subset[float32]"
    "tests/test_reduce.py::test_every_op_and_axis_subset[int8]"
    "tests/test_reduce.py::test_fast_layouts_sum[device-float32-mid]"
    "tests/test_reduce.py::test_fast_layouts_sum[gpu-2cu-float32-mid]"
    "tests/test_reduce.py::test_fast_ops[gpu-2cu-float32-long-rows]"
    "tests/test_reduce.py::test_fast_argmax_nan_inf_ties[device-float32]"
    "tests/test_reduce.py::test_fast_two_stage[gpu-2cu-cols-many]"
    "tests/test_reduce.py::test_fast_parts_small[gpu-2cu]"
    "tests/test_reduce.py::test_fast_empty_and_0d[gpu-2cu]"
    "tests/test_elemwise.py::test_float_ops[float32]"
    "tests/test_elemwise.py::test_multi_dimensional_launches[float32]"
    "tests/test_elemwise.py::test_broadcasting_and_empty"
    "tests/test_subtensor.py::test_subtensor_views[float32]"
    "tests/test_subtensor.py::test_inc_subtensor[float32]"
    "tests/test_subtensor.py::test_advanced_inc_subtensor1[float32]"
    "tests/test_blas.py::test_empty_and_tiny"
    "tests/test_nnet.py::test_softmax_is_stable_and_vector_input"
)
if [ $# -gt 0 ]; then
    TESTS=("$@")
elif [ -n "${SANITIZE_TESTS:-}" ]; then
    read -r -a TESTS <<< "$SANITIZE_TESTS"
else
    TESTS=("${DEFAULT_TESTS[@]}")
fi

say() { printf '[sanitize] %s\n' "$*"; }

if [ ! -x "$PY" ]; then
    say "ERROR: $PY is missing: run make bootstrap first (or set PY=/path/to/python)" >&2
    exit 2
fi
if ! command -v oclgrind >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    fi
    if [ "${BOOTSTRAP_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1 \
            && { [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; }; then
        say "installing Oclgrind: apt-get install -y oclgrind"
        $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y oclgrind || say "apt-get install oclgrind failed" >&2
    fi
    if ! command -v oclgrind >/dev/null 2>&1; then
        cat >&2 <<'EOF'
[sanitize] ERROR: the `oclgrind` command is missing (Oclgrind, the OpenCL device simulator).
[sanitize]   Debian/Ubuntu:  sudo apt-get install -y oclgrind
[sanitize]   elsewhere:      https://github.com/jrprice/Oclgrind (put its bin/ on PATH)
EOF
        exit 2
    fi
fi

mkdir -p "$(dirname "$LOG")"
rm -f "$LOG"
say "$(oclgrind --version 2>&1 | grep -m1 .); ${#TESTS[@]} test selection(s); log: $LOG"
start=$(date +%s)
THEANO_OCL_DEVICE=oclgrind THEANO_FLAGS=${THEANO_FLAGS:-blas.ldflags=} \
    oclgrind --data-races --log "$LOG" "$PY" -m pytest -s -q -p no:cacheprovider "${TESTS[@]}"
rc=$?
took=$(( $(date +%s) - start ))
# a report is a message line followed by its indented details ("\tKernel: ...")
reports=0
if [ -s "$LOG" ]; then
    reports=$(grep -c -v -e '^[[:space:]]' -e '^$' "$LOG")
fi
say "pytest exit status $rc, ${took}s; Oclgrind reports: $reports"
if [ "$reports" != 0 ] || [ -s "$LOG" ]; then
    say "Oclgrind's reports (kinds and kernels):" >&2
    grep -v -e '^[[:space:]]' -e '^$' "$LOG" | sed -E 's/ at (global|local|private) memory address 0x[0-9a-f]+//' \
        | sort | uniq -c | sort -rn | head -20 >&2
    grep -h $'^\tKernel:' "$LOG" | sort | uniq -c | sort -rn | head -20 >&2
    say "FAILED: Oclgrind reported errors; the full log is $LOG" >&2
    exit 1
fi
exit $rc
