# One-command set-up: `make repro` and `make test` create .venv on a fresh clone.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SCALE ?= mini

.PHONY: repro test export check-sync nbtest pytest book bench gpu-check clean

# Python compiles a module when it is first imported and keeps the bytecode in .venv: the 4,000 of its 19,000 modules
# that the tests import, instead of all of them at install (32 s of 2 cores). A machine that sets
# PYTHONDONTWRITEBYTECODE would compile them again in every process the tests start, so it is not passed on
unexport PYTHONDONTWRITEBYTECODE
$(STAMP): settings.ini setup.py
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --no-compile -e ".[dev]"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# the default jobs on embedded data: each paper's `default_jobs` (its headline table; FedReg's with the quickstart and Figure 1;
# FedGC's Figure 7, the forgetting it fights: its Tables 1, 2 and 4 and Figures 2, 3 and 6 run FedReg, whose runs alone
# take about two hours of two cores at five seeds),
# in the book's order, at five seeds (REPRO=names runs others), then the book, whose report chapter is judged on what they
# wrote (and on the committed mini runs for every other artefact). Time on 2 cores: see the README.
REPRO ?=
repro: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/fedrepro reproduce $(REPRO) --scale $(SCALE) --out repro_out
	$(BIN)/fedrepro book --results repro_out

# fedrepro/ and README.md must equal what the notebooks export, notebooks must be clean and pass ruff, then every test
test: $(STAMP) check-sync pytest

check-sync: $(STAMP)
	$(BIN)/nbdev_export
	$(BIN)/nbdev_clean
	$(BIN)/fedrepro readme >/dev/null
	@changed="$$(git status --porcelain -- fedrepro nbs README.md)"; \
	if [ -n "$$changed" ]; then echo "Out of sync with the notebooks (run nbdev_export, nbdev_clean and fedrepro readme, then commit):"; echo "$$changed"; exit 1; fi
	$(BIN)/ruff check
	$(BIN)/ruff format --check

# every notebook in one process, in order: nbdev_test's workers each run several notebooks, so what one leaves in the
# library's registries reaches the next; running them all together makes that reproducible instead of a chance pairing.
# `make test` runs them in two fixed parts, each in one process, as two of pytest's tests (tests/test_notebooks.py)
nbtest: $(STAMP)
	$(BIN)/nbdev_test --n_workers 0

# on every core (pytest-xdist; TEST_WORKERS=1 runs one), one torch thread each; tests/conftest.py groups the tests
# that share a fixture. A worker more than the cores gained nothing on 2 cores (fresh clones: 570 s against 567 s)
TEST_WORKERS ?= auto
pytest: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest tests -q -n $(TEST_WORKERS) --dist loadgroup --durations=12

book: $(STAMP)
	$(BIN)/fedrepro book

bench: $(STAMP)
	$(BIN)/python bench/engine_overhead.py
	$(BIN)/python bench/parallel_runs.py
	$(BIN)/python bench/evaluation.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/pooling.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/fedreg_floor.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/fedreg_steps.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/fedcurv_round.py
	OMP_NUM_THREADS=1 $(BIN)/python bench/method_cost.py
	$(BIN)/python bench/startup.py

# every paper-scale setting of the five papers on a GPU, without data: runs, CPU agreement, seconds a round, peak memory
# (bench/gpu_check.py; its docstring has the one-line command for a machine without the venv). On a CPU, at tiny shapes:
# make gpu-check DEVICE=cpu GPU_SCALE=smoke GPU_OUT=/tmp/gpu_check. RESUME=bench/results/gpu_check.csv keeps the rows an
# earlier run on the same GPU measured and measures the rest (the committed one: an H200's)
DEVICE ?= cuda
GPU_SCALE ?= paper
BUDGET ?= 300
GPU_OUT ?= bench/results
RESUME ?=
gpu-check: $(STAMP)
	$(BIN)/python bench/gpu_check.py --device $(DEVICE) --scale $(GPU_SCALE) --budget-s $(BUDGET) --out $(GPU_OUT) $(if $(RESUME),--resume $(RESUME))

clean:
	rm -rf _docs _proc repro_out runs
