import itertools
import math

import numpy as np
import pytest
from scipy import stats

from privaudit.audit import Explicit, RouteOptions, epsilon_cp
from privaudit.stats.clopper_pearson import box_epsilon, cp_bound, cp_upper
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import Bonferroni, OrderStatistics
from tests.audit.helpers import deterministic_normal


@pytest.mark.parametrize("n", [1, 10, 1000])
@pytest.mark.parametrize("b", [0.2, 0.025, 1e-6])
def test_cp_upper_is_the_beta_quantile_and_inverts_the_binomial_tail(n, b):
    k = np.arange(n + 1)
    upper = cp_upper(k, n, b)
    assert upper[-1] == 1.0
    np.testing.assert_allclose(upper[:-1], stats.beta.ppf(1 - b, k[:-1] + 1, n - k[:-1]), rtol=1e-9)
    # Clopper–Pearson: at the upper bound, seeing ≤ k successes has probability exactly b.
    np.testing.assert_allclose(stats.binom.cdf(k[:-1], n, upper[:-1]), b, rtol=1e-6)


def test_box_epsilon_uses_both_inequalities_and_drops_non_positive_numerators():
    fpr = np.array([0.01, 0.5, 0.6])
    fnr = np.array([0.5, 0.01, 0.6])
    values = box_epsilon(fpr, fnr, 0.0)
    assert values[0] == pytest.approx(math.log(0.5 / 0.01))  # ln((1 − δ − FNR)/FPR)
    assert values[1] == pytest.approx(math.log(0.5 / 0.01))  # ln((1 − δ − FPR)/FNR)
    assert values[2] < 0
    assert np.isneginf(box_epsilon(np.array([1.0]), np.array([1.0]), 0.0))[0]


@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.5])
@pytest.mark.parametrize(("n_in", "n_out"), [(100, 150), (1000, 800)])
def test_explicit_threshold_equals_the_beta_quantile_formula_by_hand(threshold, n_in, n_out):
    alpha, delta = 0.1, 1e-3
    in_scores, out_scores = deterministic_normal(1.0, n_in), deterministic_normal(0.0, n_out)
    fp = int(np.sum(out_scores >= threshold))
    fn = int(np.sum(in_scores < threshold))
    fpr_u = stats.beta.ppf(1 - alpha / 2 / 2, fp + 1, n_out - fp)
    fnr_u = stats.beta.ppf(1 - alpha / 2 / 2, fn + 1, n_in - fn)
    expected = max(0.0, math.log((1 - delta - fnr_u) / fpr_u), math.log((1 - delta - fpr_u) / fnr_u))
    epsilon, details = cp_bound(AuditScores.of(in_scores, out_scores), alpha / 2, delta, Explicit(threshold))
    assert epsilon == pytest.approx(expected, rel=1e-10)
    assert (details["fp"], details["fn"]) == (fp, fn)


@pytest.mark.parametrize(("n", "expected"), [(100, 3.28), (500, 4.91), (1000, 5.60), (10_000, 7.91)])
def test_ceiling_of_one_fixed_threshold_matches_spec_table(n, expected):
    # independently computed, rounded reference values (7.905 → 7.91): perfect attack, N per side, α = 0.05, δ = 1e-5
    rng = np.random.default_rng(0)
    result = epsilon_cp(rng.normal(size=n), rng.normal(size=n), significance=0.05, delta=1e-5, route_options=RouteOptions(strategy=Explicit(0.0)))
    p = 1 - 0.025 ** (1 / n)
    assert result.ceiling == pytest.approx(math.log((1 - 1e-5 - p) / p), rel=1e-9)
    assert result.ceiling == pytest.approx(expected, abs=0.006)


def test_bonferroni_order_statistics_spends_alpha_over_min_sample_size():
    in_scores, out_scores = deterministic_normal(3.0, 400), deterministic_normal(0.0, 300)
    scores = AuditScores.of(in_scores, out_scores)
    epsilon, details = cp_bound(scores, 0.05, 0.0, Bonferroni(OrderStatistics()))
    assert details["family_size"] == 300
    assert details["test_significance"] == pytest.approx(0.05 / 300)
    explicit, _ = cp_bound(scores, 0.05 / 300, 0.0, Explicit(details["threshold"]))
    assert epsilon == pytest.approx(explicit)


def test_reverse_evidence_counts_only_when_declared_two_sided():
    low_in, high_out = deterministic_normal(-2.0, 2000), deterministic_normal(0.0, 2000)
    one_sided = epsilon_cp(low_in, high_out, significance=0.05)
    two_sided = epsilon_cp(low_in, high_out, significance=0.05, route_options=RouteOptions(two_sided=True))
    assert one_sided.epsilon_lb == 0.0
    assert two_sided.epsilon_lb > 1.0
    assert two_sided.details["direction"] == "in-scores low"
    reverse_alone = epsilon_cp(-low_in, -high_out, significance=0.025)
    assert two_sided.epsilon_lb == pytest.approx(reverse_alone.epsilon_lb)


def test_larger_delta_never_increases_the_bound():
    scores = AuditScores.of(deterministic_normal(2.0, 1000), deterministic_normal(0.0, 1000))
    values = [cp_bound(scores, 0.05, d, Bonferroni())[0] for d in (0.0, 1e-5, 1e-3, 0.1, 0.5)]
    assert all(a >= b for a, b in itertools.pairwise(values))
    assert values[0] > values[-1]
