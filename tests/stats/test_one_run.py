import itertools
import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from privaudit.audit import Guesses, RouteOptions, epsilon_one_run, epsilon_one_run_fdp
from privaudit.errors import InvalidParameterError
from privaudit.stats.guess_selection import correct_guesses, ranked_membership
from privaudit.stats.one_run import one_run_epsilon, one_run_p_value
from privaudit.stats.one_run_fdp import fdp_falsified, one_run_fdp_epsilon


def _naive_p_value(m, r, v, eps, delta):
    """Steinke et al. 2023 Thm 5.2 transcribed term by term (slow reference)."""
    q = math.exp(eps) / (1 + math.exp(eps))
    tail = stats.binom.sf(v - 1, r, q)
    pmf = stats.binom.pmf(np.arange(r + 1), r, q)
    best, window = 0.0, 0.0
    for i in range(1, v + 1):  # window = P[v − i ≤ Bin(r, q) < v]
        window += pmf[v - i]
        best = max(best, window / i)
    return min(1.0, tail + 2 * m * delta * best)


@pytest.mark.parametrize(("m", "r", "v"), [(10, 10, 10), (100, 40, 33), (1000, 100, 80), (1000, 100, 12), (50, 7, 0)])
@pytest.mark.parametrize("eps", [0.0, 0.7, 2.5])
@pytest.mark.parametrize("delta", [0.0, 1e-5, 1e-2])
def test_p_value_matches_the_theorem_term_by_term(m, r, v, eps, delta):
    assert one_run_p_value(m, r, v, eps, delta) == pytest.approx(_naive_p_value(m, r, v, eps, delta), rel=1e-9, abs=1e-15)


def test_p_value_window_is_exact_for_long_guess_lists():
    m, r, v = 20_000, 2_000, 1_300
    for eps in (0.2, 0.5, 1.0):
        assert one_run_p_value(m, r, v, eps, 1e-6) == pytest.approx(_naive_p_value(m, r, v, eps, 1e-6), rel=1e-9)


@pytest.mark.parametrize(("r", "v"), [(10, 10), (200, 200), (200, 170), (1000, 640)])
def test_delta_zero_is_the_randomised_response_tail(r, v):
    alpha = 0.05
    if v == r:
        expected = special.logit(alpha ** (1 / r))
    else:
        expected = optimize.brentq(lambda e: stats.binom.sf(v - 1, r, special.expit(e)) - alpha, 0.0, 20.0, xtol=1e-12)
    found = one_run_epsilon(r, r, v, alpha, 0.0)
    assert found == pytest.approx(expected, abs=1e-5)
    assert found <= expected  # the search rounds down


@pytest.mark.parametrize(
    ("m", "delta", "expected"),
    [(100, 0.0, 3.49), (1000, 0.0, 5.81), (1000, 1e-5, 5.78), (10_000, 0.0, 8.11), (10_000, 1e-5, 7.83)],
)
def test_perfect_attack_ceilings_match_spec_table(m, delta, expected):
    # independently computed reference values: all m guesses correct, α = 0.05
    assert one_run_epsilon(m, m, m, 0.05, delta) == pytest.approx(expected, abs=0.006)


def test_the_2m_delta_term_caps_the_bound_at_large_delta():
    # at δ = 1e-3 even a perfect attack gets ≈ 3.57 at m = 200 and m = 500 (the peak, 3.61, is near m = 300)
    assert one_run_epsilon(200, 200, 200, 0.05, 1e-3) == pytest.approx(3.57, abs=0.005)
    assert one_run_epsilon(500, 500, 500, 0.05, 1e-3) == pytest.approx(3.57, abs=0.005)
    curve = [one_run_epsilon(m, m, m, 0.05, 1e-3) for m in (100, 200, 300, 400, 500, 1000, 10_000)]
    assert max(curve) < 3.62
    assert curve[-1] < curve[1]


def test_ceiling_reported_by_the_estimator():
    # every count is tested at ½ of its share of α (privaudit.stats.one_run_ties): all 1000 right at 0.025, not 0.05
    rng = np.random.default_rng(0)
    x, member = rng.normal(size=1000), rng.random(1000) < 0.5
    result = epsilon_one_run(x[member], x[~member], route_options=RouteOptions(strategy=Guesses(int(member.sum()), int((~member).sum()))))
    assert round(result.ceiling, 2) == 5.56
    assert result.ceiling == pytest.approx(one_run_epsilon(1000, 1000, 1000, 0.025, 1e-5))


def test_p_value_is_non_decreasing_in_epsilon_where_it_matters():
    for m, r, v, delta in [(1000, 100, 90, 1e-5), (5000, 2000, 1500, 1e-4), (100, 100, 95, 1e-3)]:
        values = [one_run_p_value(m, r, v, eps, delta) for eps in np.linspace(0, 6, 301)]
        assert all(b >= a - 1e-12 for a, b in itertools.pairwise(values))


def test_ties_are_broken_against_the_auditor():
    # scores: in = [2, 1, 1], out = [1, 0]; the three 1's tie.
    values = np.array([1.0, 0.0, 2.0, 1.0, 1.0])
    is_in = np.array([False, False, True, True, True])
    ranked = ranked_membership(values, is_in)
    np.testing.assert_array_equal(ranked, [True, False, True, True, False])
    # top 2: the in-canary at 2 and, of the tied block, the out-canary → 1 correct
    assert correct_guesses(ranked, np.array([2]), np.array([0]))[0] == 1
    # bottom 2: the out at 0 and, of the tied block, an in-canary → 1 correct
    assert correct_guesses(ranked, np.array([0]), np.array([2]))[0] == 1
    assert correct_guesses(ranked, np.array([1]), np.array([1]))[0] == 2


def test_too_many_guesses_and_two_sided_one_run_are_rejected():
    with pytest.raises(InvalidParameterError, match="only 3 canaries"):
        epsilon_one_run([1.0, 2.0], [0.0], route_options=RouteOptions(strategy=Guesses(2, 2)))
    with pytest.raises(InvalidParameterError, match="one-sided"):
        from privaudit.audit import estimate

        estimate("one-run", [1.0, 2.0], [0.0], route_options=RouteOptions(two_sided=True))
    with pytest.raises(InvalidParameterError, match="GuessGrid"):
        from privaudit.audit import Bonferroni

        epsilon_one_run([1.0, 2.0], [0.0], route_options=RouteOptions(strategy=Bonferroni()))


def test_fdp_bound_grows_with_correct_guesses_and_is_zero_without_any():
    values = [one_run_fdp_epsilon(1000, 200, v, 0.05, 1e-5) for v in (100, 120, 150, 180, 200)]
    assert values[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(values))
    assert values[-1] > 2.0
    assert one_run_fdp_epsilon(1000, 200, 0, 0.05, 1e-5) == 0.0


def test_fdp_falsification_is_harder_for_less_private_claims():
    m, r, v = 1000, 200, 190
    verdicts = [fdp_falsified(m, r, v, 0.05, mu) for mu in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)]
    assert verdicts[0] and not verdicts[-1]
    assert verdicts == sorted(verdicts, reverse=True)


def test_fdp_needs_positive_delta():
    with pytest.raises(InvalidParameterError, match="delta > 0"):
        epsilon_one_run_fdp([1.0, 2.0], [0.0, 1.0], mechanism="gaussian", delta=0.0)
