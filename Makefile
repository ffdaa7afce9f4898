# Two commands do everything on a fresh machine:  `make run` (the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# CPU torch, pinned: an unpinned torch pulls a CUDA build of several GB.
TORCH  ?= torch==2.13.0

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q -e '.[dev,ray,hf]'
	touch $@

.PHONY: setup run quick results test test-slow bench
setup: $(VENV)/.installed

run: setup
	$(VENV)/bin/reasonlab lab

quick: setup
	$(VENV)/bin/reasonlab lab --quick

# The committed run: first each primary's placebo at the lab's full size and seeds on PLACEBO_TASKS, then again at
# the seeds each experiment's power asks for (planned from its first five seeds, at most 10)
# (results/lab/placebo: the control run a second time on streams of its own, where the design allows; the primaries
# must not hold; its findings.json and per-seed results are kept, the report's placebo column reads them; about 20
# minutes a task on 2 cores; PLACEBO_TASKS=digits runs the digits placebos only),
# then results/lab on every task (report.md, plots, findings.json, per-seed results gzipped; finished units whose key
# is unchanged are reused, FRESH=--fresh reruns them; each experiment at the seeds its power asks for, planned from
# the placebo lab, at most 10), then the README's findings block and tasks' table.
PLACEBO_TASKS ?= all
results: setup
	$(VENV)/bin/reasonlab lab --all --placebo --tasks $(PLACEBO_TASKS) --out results/lab/placebo --pack $(FRESH)
	$(VENV)/bin/reasonlab lab --all --placebo --tasks $(PLACEBO_TASKS) --out results/lab/placebo --pack --power-seeds
	rm -f results/lab/placebo/report.md results/lab/placebo/*.png results/lab/placebo/*/*.png results/lab/placebo/*/*/*.png
	$(VENV)/bin/reasonlab lab --all --tasks all --out results/lab --pack --power-seeds $(FRESH)
	$(VENV)/bin/reasonlab findings readme

# The default suite on two worker processes of one torch thread each (pytest-xdist; tests/conftest.py pins the
# threads): two cores' worth of tests at once, where one process's two threads speed up little of it.
test: setup
	$(VENV)/bin/ruff check --quiet .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -n 2 --dist loadfile

test-slow: setup
	$(PY) -m pytest -q -m slow

bench: setup
	$(PY) benchmarks/generation.py
