"""``check`` on Flower federations (examples/check_flower.py, recorded by the audit tap): Flower's fixed-clipping
wrappers pass, and each seeded Flower bug is caught."""

from __future__ import annotations

import pytest

from privaudit.check import CheckRequest, Status, run_check

CAUGHT_BY = {
    "sigma-squared": "noise",
    "per-tensor-clip": "noise",
    "unnoised-bias": "noise",
    "no-clipping": "clipping",
    "noise-before-clipping": "noise",
    "same-seed": "randomness",
    "realised-divisor": "noise",
}


def _results(path):
    report = run_check(CheckRequest(path, summary=False))
    return report, {r.name: r for r in report.results}


@pytest.mark.parametrize("variant", ["server-side", "client-side"])
def test_flowers_own_wrappers_pass(tmp_path, flower_examples, variant):
    report, results = _results(flower_examples.run_flower(tmp_path / variant, variant=variant, seed=0))
    assert not report.failed, report.reading
    assert results["noise"].status is Status.PASSED and results["sampling"].status is Status.PASSED
    assert (results["clipping"].status is Status.PASSED) == (variant == "client-side")
    # a fixed-size sample is an exact count: it spends no α, and noise and randomness share it
    assert results["sampling"].level == 0 and report.statistical == 2 and results["noise"].level == pytest.approx(0.025)


#: the fast subset (CI); the others are the same kinds of bug as the loop's, which the fast suite covers
FAST = ("sigma-squared", "no-clipping", "same-seed")


@pytest.mark.parametrize("bug", [b if b in FAST else pytest.param(b, marks=pytest.mark.slow) for b in sorted(CAUGHT_BY)])
def test_each_flower_bug_is_caught(tmp_path, flower_examples, bug):
    report, results = _results(flower_examples.run_flower(tmp_path / bug, bug=bug, seed=0))
    assert report.exit_code == 1
    assert results[CAUGHT_BY[bug]].status is Status.FAILED, results[CAUGHT_BY[bug]].reason


def test_in_process_grid_runs_flowers_own_round_loop(tmp_path, flower_examples):
    from privaudit.fl.engine.checkpoint import TrainedFederation

    path = flower_examples.run_flower(tmp_path / "fl", seed=3)
    federation = TrainedFederation(path)
    assert federation.rounds == 6 and federation.manifest["recorded"]["framework"] == "flwr"
    assert all(len(m["clients"]) == 5 for m in federation.manifest["metrics"])  # Flower's fixed-size sample of 5 of 10
