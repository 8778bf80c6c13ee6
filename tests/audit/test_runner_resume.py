"""Resumable audits: trials already in ``trials.jsonl`` are not run again; a killed run resumes; plans do not mix."""

import json

import numpy as np
import pytest

from privaudit.audit.claims import get_claim
from privaudit.audit.plan import Analysis, EstimatorChoice, Reading, Role, TrialPlan
from privaudit.audit.recipes.trial_results import paired_scores
from privaudit.audit.runner import AuditSettings, run_reading
from privaudit.errors import InvalidParameterError

CLAIM = get_claim("pfa-heterogeneous-calibration")
CALLS: list[int] = []
FAIL_AFTER: list[int] = []


class Killed(Exception):
    pass


def counted_trial(spec, seed):
    if FAIL_AFTER and len(CALLS) >= FAIL_AFTER[0]:
        raise Killed
    CALLS.append(seed)
    rng = np.random.default_rng(seed)
    return {"in": float(rng.normal(spec["mu"], 1.0)), "out": float(rng.normal(0.0, 1.0))}


def analyse(results):
    in_s, out_s = paired_scores(results)
    return Analysis(in_scores=in_s, out_scores=out_s)


def reading(count, mu=1.0):
    return Reading("resumable", "resumable", Role.PAPER, "", 2.0, 1e-5, analyse,
                   trials=TrialPlan(counted_trial, {"mu": mu}, count, "resumable"), estimators=(EstimatorChoice("gdp"),))


@pytest.fixture(autouse=True)
def reset():
    CALLS.clear()
    FAIL_AFTER.clear()


def run(tmp_path, count, **kw):
    return run_reading(CLAIM, reading(count, **kw), AuditSettings(out=tmp_path, progress=False, power_trials=10,
                                                                 bootstrap_resamples=20))


def lines(tmp_path):
    return (tmp_path / "trials" / CLAIM.claim_id / "resumable" / "trials.jsonl").read_text().splitlines()


def test_rerun_skips_finished_trials_and_more_trials_extend_them(tmp_path):
    first = run(tmp_path, 10)
    assert len(CALLS) == 10 and len(lines(tmp_path)) == 10
    again = run(tmp_path, 10)
    assert len(CALLS) == 10  # nothing recomputed
    assert np.array_equal(first.analysis.in_scores, again.analysis.in_scores)
    run(tmp_path, 15)
    assert len(CALLS) == 15 and len(lines(tmp_path)) == 15


def test_killed_run_resumes_where_it_stopped(tmp_path):
    FAIL_AFTER.append(6)
    with pytest.raises(Killed):
        run(tmp_path, 10)
    assert len(lines(tmp_path)) == 6
    path = tmp_path / "trials" / CLAIM.claim_id / "resumable" / "trials.jsonl"
    path.write_text(path.read_text() + '{"trial_id": "resumable-00006", "res')  # killed mid-write
    FAIL_AFTER.clear()
    CALLS.clear()
    resumed = run(tmp_path, 10)
    assert len(CALLS) == 4 and resumed.trials == 10
    uninterrupted = run_reading(CLAIM, reading(10), AuditSettings(progress=False, power_trials=10, bootstrap_resamples=20))
    assert np.array_equal(resumed.analysis.in_scores, uninterrupted.analysis.in_scores)
    ids = [json.loads(line)["trial_id"] for line in lines(tmp_path) if line.endswith("}")]
    assert sorted(set(ids)) == [f"resumable-{i:05d}" for i in range(10)]


def test_a_different_plan_in_the_same_directory_is_refused(tmp_path):
    run(tmp_path, 3)
    with pytest.raises(InvalidParameterError, match="holds trials of a different audit plan"):
        run(tmp_path, 3, mu=2.0)
