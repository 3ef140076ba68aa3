#!/usr/bin/env bash
# Set up .venv for `make demo` / `make test` on a fresh machine. Safe to rerun: skips what
# is already done.
#
#   1. find Python 3.11 ($PYTHON, python3.11 on PATH, or pyenv) and create .venv with it;
#   2. pip-install the stack pinned by constraints.txt (skipped when the stamp file matches
#      the requirements, constraints.txt, setup.py and the Python version);
#   3. install this checkout into .venv (editable: the checkout's code is what runs) and
#      copy theano_ocl_startup.pth into .venv's site-packages (an editable install does not
#      carry it), so THEANO_FLAGS=linker=ocl / mode=OCL work on unchanged scripts;
#   4. make sure an OpenCL platform is visible; if not, install PoCL with apt-get
#      (pocl-opencl-icd), else fall back to `pip install pocl-binary-distribution`;
#   5. optional, for theano_ocl.distributed (the `mpi` extra): an MPI launcher and library
#      (Open MPI with apt-get: openmpi-bin libopenmpi-dev, else the `mpich` wheel) and
#      mpi4py. What cannot be installed is said, and the MPI tests skip; it does not fail.
# Exits non-zero, after saying what is missing, when any step could not be done.
#
# Environment: PYTHON=/path/to/python3.11  VENV=path (default .venv)
#              BOOTSTRAP_NO_APT=1 (never use apt-get)  BOOTSTRAP_FORCE=1 (reinstall the stack)
#              BOOTSTRAP_NO_MPI=1 (skip step 5)
# Theano's compiledir is left at Theano's default (one per machine) unless THEANO_FLAGS
# sets one.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO=$(pwd)
VENV=${VENV:-$REPO/.venv}
# what to install; the versions, of these and of everything they pull in, are the ones in
# constraints.txt (one file, which `pip install -c constraints.txt .` users take too).
# tqdm, matplotlib: bench/demo.py's model comes from theano_ocl.benchmarks, whose CLI
# (python -m theano_ocl bench / render) draws a progress bar and plots; sphinx, myst-parser:
# make docs, and tests/test_docs.py builds the site in the CI suite; pytest-xdist: make test
# runs the suite over the cores
REQS=(numpy theano scipy pyopencl mako pytest pytest-xdist pynose parameterized six tqdm
      matplotlib sphinx myst-parser)
CONSTRAINTS=$REPO/constraints.txt
PTH=theano_ocl_startup.pth
STAMP="$VENV/.theano_ocl-bootstrap.stamp"

say()  { printf '[bootstrap] %s\n' "$*"; }
warn() { printf '[bootstrap] WARNING: %s\n' "$*" >&2; }
missing=()

is_py311() {  # usable: Python 3.11 with venv + ensurepip
    "$1" -c 'import sys, venv, ensurepip; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' \
        >/dev/null 2>&1
}

find_python() {
    local c
    if [ -n "${PYTHON:-}" ]; then
        if is_py311 "$PYTHON"; then echo "$PYTHON"; return 0; fi
        warn "PYTHON=$PYTHON is not a Python 3.11 with the venv module"
        return 1
    fi
    for c in python3.11 python3 python; do
        if command -v "$c" >/dev/null 2>&1 && is_py311 "$(command -v "$c")"; then
            command -v "$c"; return 0
        fi
    done
    local roots=()
    if command -v pyenv >/dev/null 2>&1; then roots+=("$(pyenv root 2>/dev/null || true)"); fi
    roots+=("${PYENV_ROOT:-$HOME/.pyenv}")
    for r in "${roots[@]}"; do
        [ -n "$r" ] || continue
        for c in "$r"/versions/3.11*/bin/python3.11; do
            if [ -x "$c" ] && is_py311 "$c"; then echo "$c"; return 0; fi
        done
    done
    for c in /usr/bin/python3.11 /usr/local/bin/python3.11; do
        if [ -x "$c" ] && is_py311 "$c"; then echo "$c"; return 0; fi
    done
    return 1
}

# ---- 1. the virtual environment -----------------------------------------------------------
VPY="$VENV/bin/python"
if [ -x "$VPY" ] && is_py311 "$VPY"; then
    say "using $VENV ($("$VPY" -c 'import sys; print(sys.version.split()[0])'))"
else
    if ! PY=$(find_python); then
        cat >&2 <<EOF
[bootstrap] ERROR: Python 3.11 not found (needed: Theano 1.0.5 + numpy 1.23 run on <= 3.11).
[bootstrap]   Looked at \$PYTHON, python3.11/python3/python on PATH, pyenv versions, /usr/bin.
[bootstrap]   Install one, e.g.:  sudo apt-get install -y python3.11 python3.11-venv
[bootstrap]                   or:  pyenv install 3.11
[bootstrap]   then rerun, or point at it:  PYTHON=/path/to/python3.11 make test
EOF
        exit 1
    fi
    if [ -e "$VENV" ]; then
        warn "$VENV exists but is not a working Python 3.11 venv: recreating it"
        rm -rf "$VENV"
    fi
    say "creating $VENV with $PY"
    if ! "$PY" -m venv "$VENV"; then
        rm -rf "$VENV"
        printf '[bootstrap] ERROR: could not create %s with %s (on Debian/Ubuntu: sudo apt-get install -y python3.11-venv)\n' \
            "$VENV" "$PY" >&2
        exit 1
    fi
fi

# ---- 2. the pinned stack ---------------------------------------------------------------------
if [ ! -f "$CONSTRAINTS" ]; then
    printf '[bootstrap] ERROR: %s is missing: it pins every package the bootstrap installs\n' \
        "$CONSTRAINTS" >&2
    exit 1
fi
key=$( { printf '%s\n' "${REQS[@]}"; "$VPY" -c 'import sys; print(sys.version)'; cat setup.py \
         "$CONSTRAINTS"; } \
       | "$VPY" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
if [ "${BOOTSTRAP_FORCE:-0}" != 1 ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$key" ] \
        && "$VPY" -c 'import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' numpy theano scipy pyopencl mako \
           pytest xdist nose parameterized six tqdm matplotlib sphinx myst_parser theano_ocl >/dev/null 2>&1; then
    say "Python packages up to date (stamp $STAMP)"
else
    rm -f "$STAMP"
    say "installing ${REQS[*]} (versions: constraints.txt)"
    if ! "$VPY" -m pip install --upgrade -c "$CONSTRAINTS" "${REQS[@]}"; then
        missing+=("Python packages: ${REQS[*]} (pip failed; see the output above)")
    else
        say "installing this checkout into $VENV (editable)"
        if ! "$VPY" -m pip install --no-deps -e "$REPO"; then
            missing+=("theano_ocl itself (pip install -e . failed; see the output above)")
        else
            echo "$key" > "$STAMP"
        fi
    fi
fi

# ---- 3. the start-up hook --------------------------------------------------------------------
SITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! cmp -s "$PTH" "$SITE/$PTH"; then
    cp "$PTH" "$SITE/$PTH"
    say "installed $SITE/$PTH"
fi
# the hook must see this checkout: check from outside the repository
if ! (cd / && "$VPY" -c 'import sys, os, importlib.util as u
if not any(getattr(f, "_theano_ocl_bootstrap", False) for f in sys.meta_path):
    sys.exit("hook not active")
spec = u.find_spec("theano_ocl")
where = [os.path.realpath(d) for d in (spec and spec.submodule_search_locations or ())]
sys.exit(0 if os.path.realpath(os.path.join(sys.argv[1], "theano_ocl")) in where else 3)' \
        "$REPO"); then
    missing+=("the start-up hook: $SITE/$PTH is not active, or theano_ocl does not resolve to $REPO")
fi

# ---- 4. an OpenCL platform -------------------------------------------------------------------
count_devices() {
    "$VPY" - <<'EOF' 2>/dev/null || echo 0
import pyopencl as cl
try:
    platforms = cl.get_platforms()
except cl.Error:
    platforms = []
n = 0
for p in platforms:
    try:
        n += len(p.get_devices())
    except cl.Error:
        pass
print(n)
EOF
}

ndev=$(count_devices)
if [ "${ndev:-0}" -gt 0 ]; then
    say "OpenCL: $ndev device(s) visible"
else
    warn "no OpenCL platform/device is visible to pyopencl"
    SUDO=""
    apt_ok=0
    if [ "${BOOTSTRAP_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ]; then
            apt_ok=1
        elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            SUDO="sudo -n"; apt_ok=1
        fi
    fi
    if [ $apt_ok = 1 ]; then
        say "installing PoCL: apt-get install -y pocl-opencl-icd"
        if $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive \
                apt-get install -y pocl-opencl-icd; then
            ndev=$(count_devices)
        else
            warn "apt-get install pocl-opencl-icd failed"
        fi
    elif [ "${BOOTSTRAP_NO_APT:-0}" = 1 ]; then
        warn "BOOTSTRAP_NO_APT=1: not using apt-get"
    else
        warn "apt-get cannot be used here (not Debian/Ubuntu, or not root and no password-less sudo)"
    fi
    if [ "${ndev:-0}" -eq 0 ]; then
        cat >&2 <<'EOF'
[bootstrap] ######################################################################
[bootstrap] WARNING: falling back to `pip install pocl-binary-distribution`.
[bootstrap] It is a generic PoCL build: about 8x slower than the distribution's
[bootstrap] pocl-opencl-icd. Install that (or a GPU vendor's OpenCL driver) for
[bootstrap] real use:  sudo apt-get install -y pocl-opencl-icd
[bootstrap] ######################################################################
EOF
        if "$VPY" -m pip install pocl-binary-distribution; then
            ndev=$(count_devices)
        fi
    fi
    if [ "${ndev:-0}" -gt 0 ]; then
        say "OpenCL: $ndev device(s) visible"
    else
        missing+=("an OpenCL platform: install pocl-opencl-icd (apt) or a vendor OpenCL driver")
    fi
fi

# ---- 5. MPI (optional: theano_ocl.distributed) -------------------------------------------------
have_mpi4py() { "$VPY" -c 'from mpi4py import MPI' >/dev/null 2>&1; }
mpi_note=""
if [ "${BOOTSTRAP_NO_MPI:-0}" = 1 ]; then
    mpi_note="BOOTSTRAP_NO_MPI=1: MPI not set up"
else
    if ! command -v mpirun >/dev/null 2>&1 && ! command -v mpiexec >/dev/null 2>&1; then
        apt_ok=0; SUDO=""
        if [ "${BOOTSTRAP_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
            if [ "$(id -u)" = 0 ]; then apt_ok=1
            elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
                SUDO="sudo -n"; apt_ok=1
            fi
        fi
        if [ $apt_ok = 1 ]; then
            say "installing Open MPI: apt-get install -y openmpi-bin libopenmpi-dev"
            { $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive \
                apt-get install -y openmpi-bin libopenmpi-dev; } \
                || warn "apt-get install openmpi-bin libopenmpi-dev failed"
        fi
    fi
    if ! command -v mpirun >/dev/null 2>&1 && ! command -v mpiexec >/dev/null 2>&1; then
        say "no system MPI: installing the mpich wheel into $VENV"
        "$VPY" -m pip install mpich || warn "pip install mpich failed"
    fi
    if ! have_mpi4py; then
        say "installing mpi4py (the [mpi] extra; version: constraints.txt)"
        "$VPY" -m pip install -c "$CONSTRAINTS" mpi4py || warn "pip install mpi4py failed"
    fi
    if have_mpi4py && { command -v mpirun || command -v mpiexec || [ -x "$VENV/bin/mpiexec" ]; } \
            >/dev/null 2>&1; then
        say "MPI: $("$VPY" -c 'from mpi4py import MPI; print(MPI.Get_library_version().split(chr(0))[0].splitlines()[0])' 2>/dev/null)"
    else
        mpi_note="MPI (theano_ocl.distributed) is not set up: need mpirun/mpiexec (apt-get install openmpi-bin libopenmpi-dev, or pip install mpich) and mpi4py (pip install mpi4py); tests/test_distributed.py skips"
    fi
fi
if [ -n "$mpi_note" ]; then
    warn "$mpi_note"
fi

# ---- summary ---------------------------------------------------------------------------------
if [ ${#missing[@]} -gt 0 ]; then
    printf '[bootstrap] ERROR: could not install:\n' >&2
    printf '[bootstrap]   - %s\n' "${missing[@]}" >&2
    exit 1
fi
say "ready: $VPY  (check the devices with: $VPY -m theano_ocl info)"
