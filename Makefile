# privaudit — two commands do all the set-up on a fresh machine:
#   make demo   bootstrap .venv (torch first, then the project) and run the main job
#   make test   the same bootstrap, then lint and the fast test suite (what CI runs)
# TORCH_SPEC overrides the torch requirement (default: the CPU build that lies on local disk here).

PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
EXTRAS     ?= dev,data
BIN        := $(VENV)/bin
STAMP      := $(VENV)/.privaudit-installed
PYTEST_ARGS ?=

.PHONY: demo test lint test-slow bench claims clean-venv

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m privaudit.demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) lint
	$(BIN)/python -m pytest -m "not slow" -q $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -q $(PYTEST_ARGS)

bench: $(STAMP)
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean-venv:
	rm -rf $(VENV)
