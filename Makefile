# privaudit — two commands do all the set-up on a fresh machine:
#   make demo   bootstrap .venv (torch first, then the project) and run the main job
#   make test   the same bootstrap, then lint and the fast test suite (what CI runs)
# TORCH_SPEC overrides the torch requirement (default: the CPU build that lies on local disk here).

PYTHON     ?= python3
VENV       ?= .venv
TORCH_SPEC ?= torch==2.13.0
EXTRAS     ?= dev,data,flower
BIN        := $(VENV)/bin
STAMP      := $(VENV)/.privaudit-installed
PYTEST_ARGS ?=

.PHONY: demo test lint test-slow bench claims claims-report evidence validity browser clean-venv

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e ".[$(EXTRAS)]"
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m privaudit.cli.demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) lint browser
	$(BIN)/python -m pytest -m "not slow" -q $(PYTEST_ARGS)

# Best effort: Debian's chromium for the report's headless-browser check. Without it (no root, no apt),
# that one test is skipped with its reason; nothing else depends on it.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	    (timeout 600 apt-get install -y -qq chromium >/dev/null 2>&1 || \
	     { timeout 300 apt-get update -qq >/dev/null 2>&1 && timeout 600 apt-get install -y -qq chromium >/dev/null 2>&1; }) && \
	    echo "installed chromium for the report's browser check"; } || \
	  echo "chromium not installed: the report's headless-browser test will be skipped"

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow -q $(PYTEST_ARGS)

bench: $(STAMP)
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# The full paper-claims audit at larger trial counts (progress shown), then its report:
# reports/claims-audit.md (+ reports/claims-audit/: HTML, merged JSON, figures). Trials resume from audits/claims.
# `make claims-report` renders the report again from its committed merged JSON (reports/claims-audit/results.json),
# without auditing (CLAIMS_FROM=audits/claims renders it from a fresh audit, as `make claims` does).
CLAIMS_EXECUTOR ?= process
CLAIMS_FROM ?= reports/claims-audit
CLAIMS_NOTE := Regenerate: `make claims-report` re-renders this report from its committed merged results (`reports/claims-audit/results.json`) without auditing; `make claims` re-runs the audit (`privaudit audit --suite claims --out audits/claims`) and renders it.
claims: $(STAMP)
	$(BIN)/privaudit audit --suite claims --executor $(CLAIMS_EXECUTOR) --out audits/claims
	$(MAKE) --no-print-directory claims-report CLAIMS_FROM=audits/claims

claims-report: $(STAMP)
	$(BIN)/python -m privaudit report $(CLAIMS_FROM) --out reports/claims-audit --title "privaudit — the papers' privacy claims" \
	  --note '$(CLAIMS_NOTE)'
	sed 's#](figures/#](claims-audit/figures/#g' reports/claims-audit/report.md > reports/claims-audit.md

# Every evidence page re-rendered from its committed result file, no training: reports/<name>.md and its figures
# ← reports/evidence/<name>.json (privaudit report FILE --out PAGE.md; each paper declares its pages). Each page names
# the command that re-runs its experiment (python benchmarks/evidence_<name>.py ...), which writes the result file and
# renders the page.
evidence: $(STAMP)
	@for result in reports/evidence/*.json; do \
	  $(BIN)/python -m privaudit report $$result --out reports/$$(basename $$result .json).md || exit 1; done

# The validity suite's full grid: coverage P[ε_lb > ε_true] ≤ α of every route × strategy × score shape × design,
# each route's tightness on the Gaussian mechanism, and the verdict gate P[consistent | true ε ≥ 2 × claim] ≤ 0.2
# (20 cells × 200 audits, about 5 of the run's minutes) → reports/validity.md (VALIDITY_ARGS="--json PATH" adds the
# raw numbers). 11.8 and 14.3 min wall with 2 workers on this shared 2-core machine; the fast subset runs in `make test`
# (tests/stats/test_validity_suite.py).
VALIDITY_ARGS ?=
validity: $(STAMP)
	$(BIN)/python benchmarks/validity_grid.py --out reports/validity.md $(VALIDITY_ARGS)

clean-venv:
	rm -rf $(VENV)
