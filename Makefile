# theano_ocl: the two commands for a fresh machine are `make demo` and `make test`.
# Both first run scripts/bootstrap.sh (creates .venv with Python 3.11, installs the pinned
# stack and this checkout, the start-up hook, and PoCL if no OpenCL platform is visible).
#
#   make demo        bench/demo.py in .venv
#   make test        the CI suite: pytest tests/ (less the tests marked full; in parallel
#                    over the cores, TEST_WORKERS) + the quick Theano conformance subset
#   make test-full   pytest tests/ (all of it) + the full Theano conformance run (hours on 2 cores)
#   make info        python -m theano_ocl info (the OpenCL devices)
#   make bench       python -m theano_ocl bench $(BENCH_ARGS) (e.g. BENCH_ARGS='--quick --record')
#   make sanitize    the kernel families' tests (small sizes) on Oclgrind, the OpenCL device
#                    simulator, with its out-of-bounds and data-race checks; fails on any
#                    Oclgrind report (scripts/sanitize.sh: installs oclgrind with apt-get when
#                    missing; SANITIZE_ARGS='tests/test_x.py -k y' runs another selection)
#   make docs        the documentation site (Sphinx, docs/ -> docs/_build/html; warnings fail)
#   make pth         regenerate theano_ocl_startup.pth from theano_ocl/_startup.py
#   make bootstrap   only set up .venv
#   make clean-venv  remove .venv
SHELL := /bin/bash
VENV ?= $(CURDIR)/.venv
PY := $(VENV)/bin/python
CONFORMANCE := tests/conformance/run.py

.PHONY: all bootstrap demo test test-full info bench sanitize docs pth clean-venv

all: test

bootstrap:
	@VENV="$(VENV)" scripts/bootstrap.sh

demo: bootstrap
	@if [ ! -f bench/demo.py ]; then echo "bench/demo.py is missing from this checkout" >&2; exit 1; fi
	$(PY) bench/demo.py

# Runs both parts even when the first fails; exits non-zero when either failed. The
# conformance run (interpreters that spend much of their time in g++ and in waiting for
# them) goes beside pytest, its output kept until pytest ends: on 2 cores both end sooner
# than one after the other. It compiles into its own Theano compiledir
# (CONFORMANCE_COMPILEDIR): sharing pytest's, the two waited on one compile lock, and
# Theano's module cache, refreshed by both, once removed a directory the other was
# writing (FileNotFoundError: .../tmpXXXX/key.pkl, six tests failing). The slowest tests
# are listed at the end of pytest's output.
CONFORMANCE_COMPILEDIR ?= $(HOME)/.theano/conformance
# pytest runs in TEST_WORKERS processes (pytest-xdist; the cores, at most 4): on this 2-core
# machine the suite ran 1,635 s in one process, a core idle once the conformance run ended
# (359 s). Each worker compiles Theano's C code into a directory of its own under TEST_WORK
# (no worker waits on another's compile lock), and the modules g++ links go through one
# cache (scripts/g++-cache, TEST_WORK.g++-cache: a module is compiled once, not once per
# worker, and the conformance run uses it too); the longest tests go first
# (tests/durations_cpu.tsv, as timed on this machine), so that the workers end together.
# TEST_WORKERS=1: one process, Theano's compiledir. Theano's own module keys hold the
# checkout's path (the -I of .venv's numpy), so a clone at a new path finds none of its
# modules; the g++ cache's keys write that path as one name (G_CACHE_ROOT), so a new clone
# on a machine that ran the suite before copies its modules instead of compiling them (CI
# clones anew each run: 2,194 s when every module was compiled again, against 14-18 min
# for a second run in the same clone).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 4 ] && n=4; echo $$n)
TEST_WORK ?= $(HOME)/.theano/pytest-workers
test: bootstrap
	@rc=0; log=$$(mktemp); pid=; \
	export G_CACHE_DIR="$(TEST_WORK).g++-cache" G_CACHE_ROOT="$(CURDIR)" \
	    G_CACHE_STRIP="$(TEST_WORK)/[^/]+|$(CONFORMANCE_COMPILEDIR)"; \
	gxx="cxx=$(CURDIR)/scripts/g++-cache"; \
	if [ -f $(CONFORMANCE) ]; then \
	    THEANO_FLAGS="$${THEANO_FLAGS:+$$THEANO_FLAGS,}$$gxx" \
	    $(PY) $(CONFORMANCE) --quick --compiledir "$(CONFORMANCE_COMPILEDIR)" > $$log 2>&1 & pid=$$!; \
	    trap 'kill $$pid 2>/dev/null; rm -f $$log' INT TERM; \
	fi; \
	par=; \
	if [ "$(TEST_WORKERS)" -gt 1 ] && $(PY) -c 'import xdist' 2>/dev/null; then \
	    export THEANO_OCL_TEST_WORKER_COMPILEDIR="$(TEST_WORK)" \
	        THEANO_FLAGS="$${THEANO_FLAGS:+$$THEANO_FLAGS,}$$gxx"; \
	    if [ -z "$${THEANO_OCL_TEST_ORDER:-}" ] && [ -f tests/durations_cpu.tsv ]; then \
	        export THEANO_OCL_TEST_ORDER="$(CURDIR)/tests/durations_cpu.tsv"; fi; \
	    par="-n $(TEST_WORKERS) --dist worksteal"; \
	fi; \
	echo "== pytest tests/ (less those marked full; $${par:-one process})"; \
	$(PY) -m pytest -q -m "not full" --durations=15 $$par tests || rc=1; \
	if [ -n "$$pid" ]; then \
	    wait $$pid || rc=1; \
	    echo "== $(CONFORMANCE) --quick (ran beside pytest)"; cat $$log; \
	fi; \
	rm -f $$log; exit $$rc

test-full: bootstrap
	@rc=0; \
	echo "== pytest tests/"; \
	$(PY) -m pytest -q tests || rc=1; \
	if [ -f $(CONFORMANCE) ]; then \
	    echo "== $(CONFORMANCE) --group all"; \
	    $(PY) $(CONFORMANCE) --group all || rc=1; \
	fi; \
	exit $$rc

info: bootstrap
	$(PY) -m theano_ocl info

bench: bootstrap
	$(PY) -m theano_ocl bench $(BENCH_ARGS)

sanitize: bootstrap
	@PY="$(PY)" scripts/sanitize.sh $(SANITIZE_ARGS)

docs: bootstrap
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

pth:
	python3 scripts/render_pth.py

clean-venv:
	rm -rf "$(VENV)"
