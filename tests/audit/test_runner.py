"""The audit runner's mechanics on synthetic readings: α split, pilot thresholds, verdicts, seeds, executors."""

import dataclasses
import json
import math

import numpy as np
import pytest

from privaudit.audit.claims import get_claim
from privaudit.audit.plan import Analysis, EstimatorChoice, Reading, Role, TrialPlan
from privaudit.audit.recipes.trial_results import paired_scores
from privaudit.audit.runner import AuditSettings, ReadingOutcome, overall_verdict, run_reading
from privaudit.audit.verdict import AccountingEvidence, Verdict, VerdictResult
from privaudit.errors import InvalidParameterError
from privaudit.stats.strategies import Explicit

CLAIM = get_claim("pfa-heterogeneous-calibration")  # any registered claim: the runner only uses its id here


def gaussian_trial(spec, seed):
    """Scores of a μ-GDP mechanism's likelihood-ratio test: in ~ N(μ, 1), out ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    return {"in": float(rng.normal(spec["mu"], 1.0)), "out": float(rng.normal(0.0, 1.0))}


def scores_only(results):
    in_s, out_s = paired_scores(results)
    return Analysis(in_scores=in_s, out_scores=out_s)


def gaussian_reading(mu=3.0, count=200, claimed=1.0, estimators=(EstimatorChoice("cp"), EstimatorChoice("gdp")), **kw):
    kw.setdefault("mechanism", "gaussian")
    return Reading("synthetic", "synthetic Gaussian", Role.PAPER, "in ~ N(μ, 1), out ~ N(0, 1)", claimed, 1e-5,
                   scores_only, trials=TrialPlan(gaussian_trial, {"mu": mu}, count, "synthetic"), estimators=estimators, **kw)


def settings(**kw):
    return AuditSettings(progress=False, power_trials=30, bootstrap_resamples=30, **kw)


def test_alpha_is_split_over_the_estimators_and_a_strong_attack_refutes():
    outcome = run_reading(CLAIM, gaussian_reading(), settings(significance=0.1))
    assert [b.significance for b in outcome.bounds] == [pytest.approx(0.05), pytest.approx(0.05)]
    assert outcome.verdict.verdict is Verdict.REFUTED and outcome.verdict.family_confidence == pytest.approx(0.9)
    assert outcome.metrics["auc"]["estimate"] > 0.9 and len(outcome.metrics["roc"]["fpr"]) <= 256
    record = outcome.to_dict()
    assert record["lower_bounds"][0]["reading"] == "synthetic" and record["attack"] is None


def test_a_route_invalid_for_the_reading_is_not_run_and_says_why():
    """gdp converts through the Gaussian curve: on a reading of 'any' mechanism it is listed, not run; α stays split."""
    outcome = run_reading(CLAIM, gaussian_reading(mechanism="any"), settings(significance=0.1))
    assert [b.estimator for b in outcome.bounds] == ["cp"] and outcome.bounds[0].significance == pytest.approx(0.05)
    record = outcome.to_dict()
    assert record["mechanism"] == "any"
    assert [r["estimator"] for r in record["routes_not_run"]] == ["gdp"]
    assert "Gaussian-shaped" in record["routes_not_run"][0]["reason"]


def test_null_attack_is_not_refuted():
    outcome = run_reading(CLAIM, gaussian_reading(mu=0.0, claimed=0.5), settings())
    assert outcome.verdict.verdict is not Verdict.REFUTED


def test_pilot_trials_choose_an_explicit_threshold_on_separate_runs():
    reading = gaussian_reading(estimators=(EstimatorChoice("cp", pilot=20),))
    outcome = run_reading(CLAIM, reading, settings())
    bound = outcome.bounds[0]
    assert bound.n_in == 180 and isinstance(bound.strategy, Explicit)
    assert bound.details["pilot_trials"] == 20 and bound.strategy.threshold == bound.details["threshold_from_pilot"]


def test_same_seed_same_scores_and_another_seed_differs():
    a = run_reading(CLAIM, gaussian_reading(count=20), settings(seed=3))
    b = run_reading(CLAIM, gaussian_reading(count=20), settings(seed=3))
    c = run_reading(CLAIM, gaussian_reading(count=20), settings(seed=4))
    assert np.array_equal(a.analysis.in_scores, b.analysis.in_scores)
    assert not np.array_equal(a.analysis.in_scores, c.analysis.in_scores)


def test_process_pool_gives_the_in_process_scores():
    local = run_reading(CLAIM, gaussian_reading(count=12), settings(seed=5))
    pooled = run_reading(CLAIM, gaussian_reading(count=12), settings(seed=5, executor="process", workers=2))
    assert np.array_equal(local.analysis.in_scores, pooled.analysis.in_scores)
    assert np.array_equal(local.analysis.out_scores, pooled.analysis.out_scores)


def test_accounting_only_reading_explains_an_inconclusive_verdict():
    evidence = (AccountingEvidence("upper only", "rdp", upper=3.0, lower=1.5, implementation=True),)
    reading = Reading("acct", "accounting", Role.PAPER, "", 2.0, 1e-5, lambda _: Analysis(evidence))
    outcome = run_reading(CLAIM, reading, settings())
    assert outcome.verdict.verdict is Verdict.INCONCLUSIVE and outcome.trials == 0
    assert "certified ε ≥ 1.5 and ε ≤ 3 (an upper bound, which refutes nothing) vs claimed 2" in outcome.verdict.reason


def test_scores_without_estimators_are_refused():
    reading = gaussian_reading(count=4, estimators=())
    with pytest.raises(InvalidParameterError, match="names no estimator"):
        run_reading(CLAIM, reading, settings())


def _outcome(role, verdict):
    reading = Reading(f"{role.value}-{verdict.value}", "", role, "", 1.0, 1e-5, lambda _: Analysis())
    return ReadingOutcome(reading, Analysis(), [], VerdictResult(verdict, f"because {verdict.value}"), None, 0, 0.0)


def test_overall_verdict_rules():
    refuted, reason, _ = overall_verdict([_outcome(Role.PAPER, Verdict.CONSISTENT), _outcome(Role.IMPLEMENTATION, Verdict.REFUTED)])
    assert refuted is Verdict.REFUTED and reason.startswith("implementation-refuted: because refuted")
    consistent, _, _ = overall_verdict([_outcome(Role.PAPER, Verdict.CONSISTENT), _outcome(Role.VALIDITY, Verdict.INCONCLUSIVE)])
    assert consistent is Verdict.CONSISTENT
    mixed, _, _ = overall_verdict([_outcome(Role.PAPER, Verdict.CONSISTENT), _outcome(Role.PAPER, Verdict.INCONCLUSIVE)])
    assert mixed is Verdict.INCONCLUSIVE
    verdict, _, notes = overall_verdict([_outcome(Role.VALIDITY, Verdict.REFUTED), _outcome(Role.PAPER, Verdict.CONSISTENT)])
    assert verdict is Verdict.CONSISTENT and notes and notes[0].startswith("validity check failed")


def test_the_claim_verdict_names_its_basis():
    from privaudit.audit.runner import verdict_basis, verdicts_by_role

    outcomes = [_outcome(Role.PAPER, Verdict.CONSISTENT), _outcome(Role.IMPLEMENTATION, Verdict.REFUTED),
                _outcome(Role.VALIDITY, Verdict.CONSISTENT)]
    by_role = verdicts_by_role(outcomes)
    assert list(by_role) == ["implementation", "paper", "validity"]
    assert by_role["implementation"] == {"verdict": "refuted", "basis": "as implemented",
                                         "reason": "implementation-refuted: because refuted",
                                         "readings": {"implementation-refuted": "refuted"}}
    assert verdict_basis(by_role) == "refuted (as implemented), consistent (as stated)"  # validity checks aside
    # within a basis: refuted if any reading is, consistent only if all are, and the reason lists the readings
    mixed = verdicts_by_role([_outcome(Role.PAPER, Verdict.CONSISTENT), _outcome(Role.PAPER, Verdict.INCONCLUSIVE)])
    assert mixed["paper"]["verdict"] == "inconclusive" and mixed["paper"]["reason"].startswith("paper-inconclusive")
    assert "paper-consistent consistent" in mixed["paper"]["reason"]
    assert verdict_basis(verdicts_by_role([_outcome(Role.VALIDITY, Verdict.CONSISTENT)])) == \
        "no paper or implementation reading ran"


@pytest.mark.parametrize("bad", [{"trials": 0}, {"trials": -3}, {"significance": 1.5}, {"executor": "threads"},
                                 {"power_trials": 0}, {"workers": 0}, {"seed": -1}, {"torch_threads": 0}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(InvalidParameterError):
        AuditSettings(**bad)


def test_result_data_is_json_with_infinities_as_strings(tmp_path):
    from privaudit.audit.runner import run_claim

    audit = run_claim("pfa-heterogeneous-calibration", settings(out=tmp_path, trials=1))
    raw = json.loads(audit.path.read_text())
    assert raw["kind"] == "claim-audit" and raw["data"]["verdict"] == "refuted"
    assert all(isinstance(e["upper"], float) or e["upper"] == "inf" for e in raw["data"]["accountant"])
    assert math.isfinite(raw["data"]["seconds"]) and raw["config"]["significance"] == 0.05
    assert raw["config"]["device"].startswith("cpu (")  # where the trials trained (privaudit audit --device)
    assert dataclasses.asdict(audit.settings)["seed"] == 0
