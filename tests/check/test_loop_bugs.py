"""``check`` on the plain PyTorch loop of examples/check_loops.py: the textbook loop passes, every seeded bug is caught by
the check that tests it, and a check that cannot run says what it needed (the fast subset of benchmarks/check_bugs.py)."""

from __future__ import annotations

import math

import pytest

from privaudit.check import CheckRequest, Status, run_check

#: bug → the check that must catch it (others may fail too)
CAUGHT_BY = {
    "sigma-squared": "noise",
    "per-tensor-clip": "noise",
    "unnoised-bias": "noise",
    "no-clipping": "noise",
    "noise-before-clipping": "noise",
    "fixed-size-as-poisson": "sampling",
    "same-seed": "randomness",
    "realised-divisor": "noise",
}


def _check(path, **options):
    return run_check(CheckRequest(path, summary=False, **options))


def _by_name(report):
    return {r.name: r for r in report.results}


def test_the_textbook_loop_passes_every_check_that_runs(recorded):
    report = _check(recorded["correct"])
    results = _by_name(report)
    assert report.exit_code == 0 and not report.failed, report.reading
    assert {r.name for r in report.ran} == {"noise", "randomness", "sampling", "accounting"}
    assert results["clipping"].status is Status.NOT_RUN and "clipped-at client" in results["clipping"].reason
    assert report.statistical == 3 and all(results[n].level == pytest.approx(0.05 / 3) for n in ("noise", "sampling"))
    assert results["noise"].bound is None  # the measured noise is not below the declared one
    assert "consistent with its declaration" in report.reading


@pytest.mark.parametrize("bug", sorted(CAUGHT_BY))
def test_each_seeded_bug_is_caught(recorded, bug):
    report = _check(recorded[bug])
    results = _by_name(report)
    assert report.exit_code == 1
    assert results[CAUGHT_BY[bug]].status is Status.FAILED, results[CAUGHT_BY[bug]].reason
    assert report.reading.startswith("the run does not do what it declares")


def test_the_diagnosis_names_the_bug(recorded):
    noise = {bug: _by_name(_check(recorded[bug], only=("noise",)))["noise"] for bug in
             ("sigma-squared", "per-tensor-clip", "unnoised-bias", "no-clipping", "noise-before-clipping")}
    assert "σ²C used for σC" in noise["sigma-squared"].reason
    assert "deviation: per-tensor clipping" in noise["per-tensor-clip"].reason
    assert "tensor 1.bias" in noise["unnoised-bias"].reason and "no noise" in noise["unnoised-bias"].reason
    assert "deviation: no clipping" in noise["no-clipping"].reason
    assert "no noise" in noise["noise-before-clipping"].reason
    sampling = _by_name(_check(recorded["fixed-size-as-poisson"], only=("sampling",)))["sampling"]
    assert "a constant count" in sampling.reason
    randomness = _by_name(_check(recorded["same-seed"], only=("randomness",)))["randomness"]
    assert "the same noise drawn again" in randomness.reason


def test_less_noise_than_declared_gives_a_certified_bound_that_refutes_the_ledger(recorded):
    report = _check(recorded["sigma-squared"])
    bound = _by_name(report)["noise"].bound
    assert bound is not None and bound.ratio_upper < 0.75 and bound.refutes
    assert bound.claimed is not None and bound.epsilon > bound.claimed
    assert report.claim.startswith("refuted (as implemented)")
    unnoised = _by_name(_check(recorded["unnoised-bias"]))["noise"].bound
    assert unnoised is not None and math.isinf(unnoised.epsilon) and "1.bias" in unnoised.scope


def test_a_run_without_client_releases_lists_what_the_noise_checks_needed(tmp_path, loops):
    path = loops.run_loop(tmp_path / "bare", seed=1, record_releases=False)
    results = _by_name(_check(path))
    for name in ("noise", "randomness"):
        assert results[name].status is Status.NOT_RUN
        assert any("client_releases" in need for need in results[name].needs)
    assert results["sampling"].status is Status.PASSED and results["accounting"].status is Status.PASSED


def test_a_stated_clip_site_makes_the_clipping_check_run(recorded):
    results = _by_name(_check(recorded["correct"], clipped_at="client", only=("clipping",)))
    # the loop's clients send unclipped models (the server clips): declared client-side, they exceed C
    assert results["clipping"].status is Status.FAILED and "exceed the clip" in results["clipping"].reason


def test_only_and_alpha_are_validated():
    from privaudit.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="unknown check"):
        CheckRequest("x", only=("power",))
    with pytest.raises(InvalidParameterError, match="alpha"):
        CheckRequest("x", alpha=1.5)
