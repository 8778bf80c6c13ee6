import numpy as np
import pytest
from scipy import stats

from privaudit.audit import attack_metrics, auc, bootstrap_auc, bootstrap_tpr_at_fpr, roc_curve, tpr_at_fpr
from privaudit.errors import InvalidParameterError
from privaudit.stats.bootstrap import _Sorted
from privaudit.stats.scores import AuditScores
from tests.audit.helpers import deterministic_normal


def test_roc_curve_by_hand():
    roc = roc_curve([1.0, 3.0], [0.0, 2.0])
    np.testing.assert_array_equal(roc.thresholds, [np.inf, 3.0, 2.0, 1.0, 0.0])
    np.testing.assert_array_equal(roc.fpr, [0.0, 0.0, 0.5, 0.5, 1.0])
    np.testing.assert_array_equal(roc.tpr, [0.0, 0.5, 0.5, 1.0, 1.0])
    assert roc.to_dict()["thresholds"][0] == float("inf")


def test_auc_counts_ties_as_half_and_matches_mann_whitney():
    assert auc([0.0, 4.0, 6.0, 7.0], [1.0, 2.0, 3.0, 5.0]) == pytest.approx(11 / 16)  # 0 + 3 + 4 + 4 pairs
    assert auc([1.0, 1.0], [1.0]) == pytest.approx(0.5)
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.5, 1, 300), rng.integers(0, 3, 200).astype(float)
    u = stats.mannwhitneyu(a, b).statistic
    assert auc(a, b) == pytest.approx(u / (300 * 200))


def test_tpr_at_fpr_is_the_best_rule_within_the_fpr_budget():
    in_scores, out_scores = [1.0, 3.0], [0.0, 2.0]
    assert [tpr_at_fpr(in_scores, out_scores, f) for f in (0.0, 0.25, 0.5, 0.75, 1.0)] == [0.5, 0.5, 1.0, 1.0, 1.0]
    assert tpr_at_fpr([0.0] * 5, [1.0] * 5, 0.5) == 0.0
    assert tpr_at_fpr([1.0, 1.0], [1.0, 1.0], 0.5) == 0.0  # a tie cannot be split by a threshold
    with pytest.raises(InvalidParameterError, match="fpr"):
        tpr_at_fpr([1.0], [0.0], 1.5)


def _brute_jackknife(statistic, in_scores, out_scores):
    loo_in = [statistic(np.delete(in_scores, i), out_scores) for i in range(in_scores.size)]
    loo_out = [statistic(in_scores, np.delete(out_scores, j)) for j in range(out_scores.size)]
    return np.array(loo_in), np.array(loo_out)


@pytest.mark.parametrize("seed", range(3))
def test_closed_form_jackknife_matches_leave_one_out(seed):
    rng = np.random.default_rng(seed)
    in_scores, out_scores = rng.integers(0, 6, 23).astype(float), rng.integers(0, 5, 31).astype(float)
    data = _Sorted(AuditScores.of(in_scores, out_scores))
    expected_in, expected_out = _brute_jackknife(auc, data.in_sorted, data.out_sorted)
    got_in, got_out = data.jackknife_auc()
    np.testing.assert_allclose(got_in, expected_in)
    np.testing.assert_allclose(got_out, expected_out)
    for fpr in (0.0, 0.1, 0.3, 0.97):
        expected_in, expected_out = _brute_jackknife(lambda a, b, f=fpr: tpr_at_fpr(a, b, f), data.in_sorted, data.out_sorted[::-1])
        got_in, got_out = data.jackknife_tpr(fpr)
        np.testing.assert_allclose(got_in, expected_in)
        np.testing.assert_allclose(got_out, expected_out)


def test_unit_weights_reproduce_the_point_estimates():
    rng = np.random.default_rng(1)
    data = _Sorted(AuditScores.of(rng.normal(1, 1, 200), rng.integers(-2, 2, 150).astype(float)))
    ones_in, ones_out = np.ones(data.n_in, dtype=np.int64), np.ones(data.n_out, dtype=np.int64)
    fprs = (0.0, 0.01, 0.2, 1.0)
    weighted_auc, weighted_tprs = data.weighted_statistics(ones_in, ones_out, fprs)
    assert weighted_auc == pytest.approx(auc(data.in_sorted, data.out_sorted))
    assert weighted_tprs == pytest.approx([tpr_at_fpr(data.in_sorted, data.out_sorted, f) for f in fprs])


def test_weighted_statistics_equal_the_statistics_of_the_expanded_resample():
    rng = np.random.default_rng(4)
    data = _Sorted(AuditScores.of(rng.integers(0, 9, 40).astype(float), rng.integers(0, 7, 35).astype(float)))
    for _ in range(5):
        w_in, w_out = rng.multinomial(40, np.full(40, 1 / 40)), rng.multinomial(35, np.full(35, 1 / 35))
        expanded_in, expanded_out = np.repeat(data.in_sorted, w_in), np.repeat(data.out_sorted, w_out)
        fprs = (0.0, 0.05, 0.3, 1.0)
        weighted_auc, weighted_tprs = data.weighted_statistics(w_in, w_out, fprs)
        assert weighted_auc == pytest.approx(auc(expanded_in, expanded_out))
        assert weighted_tprs == pytest.approx([tpr_at_fpr(expanded_in, expanded_out, f) for f in fprs])


@pytest.mark.parametrize("method", ["bca", "percentile"])
def test_bootstrap_intervals_are_seeded_and_cover_the_truth(method):
    in_scores, out_scores = deterministic_normal(1.0, 3000), deterministic_normal(0.0, 3000)
    first = bootstrap_auc(in_scores, out_scores, n_resamples=300, seed=11, method=method)
    again = bootstrap_auc(in_scores, out_scores, n_resamples=300, seed=11, method=method)
    assert first == again
    assert first.low <= stats.norm.cdf(1 / np.sqrt(2)) <= first.high  # true AUC of N(1,1) vs N(0,1)
    assert first.high - first.low < 0.05
    tpr = bootstrap_tpr_at_fpr(in_scores, out_scores, 0.01, n_resamples=300, seed=11, method=method)
    assert tpr.low <= stats.norm.sf(stats.norm.isf(0.01) - 1.0) <= tpr.high
    assert tpr.low <= tpr.estimate <= tpr.high


def test_bca_interval_has_nominal_coverage_for_the_auc():
    """Repeated samples: the 90% BCa interval for the AUC covers the true value about 90% of the time."""
    rng = np.random.default_rng(5)
    truth = stats.norm.cdf(0.8 / np.sqrt(2))
    covered = 0
    for rep in range(60):
        interval = bootstrap_auc(rng.normal(0.8, 1, 150), rng.normal(0, 1, 150), confidence=0.9, n_resamples=200, seed=rep)
        covered += interval.low <= truth <= interval.high
    assert 0.75 <= covered / 60 <= 1.0


def test_attack_metrics_bundle_roc_auc_and_low_fpr_tprs():
    rng = np.random.default_rng(2)
    metrics = attack_metrics(rng.normal(2, 1, 1000), rng.normal(0, 1, 1000), n_resamples=100, seed=3)
    assert [i.statistic for i in metrics.tpr_at_fpr] == ["tpr_at_fpr=0.001", "tpr_at_fpr=0.01"]
    assert metrics.roc.fpr[0] == 0.0 and metrics.roc.tpr[-1] == 1.0
    assert metrics.to_dict()["auc"]["method"] == "bca"


@pytest.mark.parametrize(
    ("options", "message"),
    [({"method": "normal"}, "method"), ({"n_resamples": 5}, "n_resamples"), ({"confidence": 1.0}, "confidence")],
)
def test_bootstrap_arguments_are_validated(options, message):
    with pytest.raises(InvalidParameterError, match=message):
        bootstrap_auc([1.0, 2.0], [0.0, 1.0], **options)
