"""False flags, measured: correct implementations checked over many seeds are flagged at about α or less (slow; the
full measurement with ≥ 100 runs per implementation is benchmarks/check_bugs.py → reports/check-bugs.md)."""

from __future__ import annotations

import pytest
from scipy import stats

from privaudit.check import CheckRequest, run_check

pytestmark = pytest.mark.slow
RUNS, ALPHA = 40, 0.05


def _flagged(paths) -> int:
    return sum(bool(run_check(CheckRequest(p, alpha=ALPHA, summary=False)).failed) for p in paths)


def _at_most(flags: int) -> bool:
    """Consistent with a false-flag rate ≤ α: P(Binomial(RUNS, α) ≥ flags) above 0.001."""
    return stats.binom.sf(flags - 1, RUNS, ALPHA) > 1e-3


def test_the_textbook_loop_is_rarely_flagged(tmp_path, loops):
    assert _at_most(_flagged(loops.run_loop(tmp_path / str(s), seed=s) for s in range(RUNS)))


def test_flowers_wrapper_is_rarely_flagged(tmp_path, flower_examples):
    assert _at_most(_flagged(flower_examples.run_flower(tmp_path / str(s), seed=s) for s in range(RUNS)))
