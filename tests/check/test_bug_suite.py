"""The fast subset of ``benchmarks/check_bugs.py`` (what CI runs; the full measurement, 100 seeds per configuration, is
``reports/check-bugs.md``): the benchmark's own configurations and scoring, a few seeds each.

* every seeded bug — the plain loop's, the local-DP loop's and Flower's — is flagged on seeds the other tests do not
  use, by the check that tests it;
* correct implementations — the textbook loop, the local-DP loop, Flower's fixed and adaptive wrappers, 4 seeds each,
  no two runs sharing a seed — are flagged no more often than the 99 % quantile of Binomial(24, α) allows (a smoke
  test: with fixed seeds the count is deterministic; it catches a check that lost its level badly — it cannot certify
  the level, which the benchmark measures over 100 runs per implementation).
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
from scipy import stats

from tests.check.conftest import REPO

ALPHA, SEEDS = 0.05, 4
#: bug name (as the benchmark lists it) → the check that must fail
CAUGHT_BY = {
    "sigma-squared": "noise", "per-tensor-clip": "noise", "unnoised-bias": "noise", "no-clipping": "noise",
    "noise-before-clipping": "noise", "fixed-size-as-poisson": "sampling", "same-seed": "randomness",
    "realised-divisor": "noise", "same-seed (local DP: one seed for every client's release)": "randomness",
}
FLOWER_CAUGHT_BY = {**CAUGHT_BY, "no-clipping": "clipping"}
CORRECT = ("textbook DP-FedAvg", "local DP, fresh noise per release", "Flower server-side fixed clipping",
           "Flower client-side fixed clipping", "Flower server-side adaptive clipping",
           "Flower client-side adaptive clipping")


@pytest.fixture(scope="module")
def bench(loops, flower_examples):
    if "check_bugs" in sys.modules:
        return sys.modules["check_bugs"]
    spec = importlib.util.spec_from_file_location("check_bugs", REPO / "benchmarks" / "check_bugs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_bugs"] = module
    spec.loader.exec_module(module)
    return module


def _configs(bench, bug: bool):
    return {(family, name): train for family, name, is_bug, train in bench.configurations() if is_bug == bug}


def test_every_seeded_bug_is_flagged_on_fresh_seeds(tmp_path, bench):
    missed = []
    for (family, name), train in _configs(bench, True).items():
        expected = (FLOWER_CAUGHT_BY if family == "flower" else CAUGHT_BY)[name]
        for seed in (1, 2) if family == "loop" else (1,):
            found = bench.outcome(train(tmp_path / f"{family}-{len(missed)}-{name[:12]}-{seed}", seed), ALPHA)
            if not found.flagged or expected not in found.failed:
                missed.append((family, name, seed, found.failed))
    assert not missed


def test_correct_implementations_are_rarely_flagged(tmp_path, bench):
    configs = _configs(bench, False)
    assert {name for _, name in configs} >= set(CORRECT)
    flags = []
    for (family, name), train in configs.items():
        if name not in CORRECT:
            continue  # privaudit's own cdp and opacus: slower to train; the benchmark runs them
        for seed in range(100 * CORRECT.index(name), 100 * CORRECT.index(name) + SEEDS):
            found = bench.outcome(train(tmp_path / f"{family}-{seed}", seed), ALPHA)
            assert found.ran, name  # something was checked
            if found.flagged:
                flags.append((name, seed, found.failed))
    assert len(flags) <= stats.binom.ppf(0.99, SEEDS * len(CORRECT), ALPHA), flags


def test_the_benchmark_scores_and_renders(bench):
    assert bench.interval(0, 100)[1] == pytest.approx(0.0362, abs=1e-4)  # Clopper–Pearson: 1 − 0.025^(1/100)
    low, high = bench.interval(100, 100)
    assert high == 1.0 and low == pytest.approx(0.9638, abs=1e-4)
    row = bench.Row("loop", "sigma-squared", True, [bench.Outcome(True, ("noise",), {"noise": 0.0}, {"noise": -400.0}, 20.0,
                                                                  True, ("noise", "accounting"))])
    text = bench.render([row], ALPHA, 1, "python benchmarks/check_bugs.py --runs 1", 1.0)
    assert "| loop | sigma-squared | 1/1 |" in text and "10^-400" in text and "refutes in 1/1" in text
