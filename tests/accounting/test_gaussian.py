"""Exact Gaussian / μ-GDP profile (Balle & Wang 2018, Thm 8; Dong, Roth & Su 2022, Cor. 2.13)."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.accounting.gaussian import gaussian_delta, gaussian_epsilon, gaussian_mu_for
from privaudit.errors import InvalidParameterError


@pytest.mark.parametrize(("mu", "expected"), [(0.5, 1.99), (1.0, 4.38), (2.0, 10.0)])
def test_gdp_reference_values(mu, expected):
    # Dong, Roth & Su 2022, Cor. 2.13, solved independently: μ=0.5 → 1.99, μ=1 → 4.38, μ=2 → 10.0 at δ=1e-5
    assert gaussian_epsilon(mu, 1e-5) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize(
    ("sigma", "steps", "expected"),
    # exact values (q = 1, dp-accounting's analytic Gaussian): T Gaussian releases = one with σ/√T
    [(0.8, 100, 130.577), (1.0, 100, 91.82), (2.0, 100, 33.1), (0.8, 1000, 948.885), (1.0, 10000, 5425.51), (0.8, 10000, 8344.63)],
)
def test_exact_composed_gaussian(sigma, steps, expected):
    assert gaussian_epsilon(math.sqrt(steps) / sigma, 1e-5) == pytest.approx(expected, abs=0.01)


def test_claim_to_mu():
    # Upcycled-FL's claim (1.4, 1e-3) corresponds to μ = 0.515
    assert gaussian_mu_for(1.4, 1e-3) == pytest.approx(0.515, abs=1e-3)


def test_matches_dp_accounting_analytic_gaussian():
    dp_accounting = pytest.importorskip("dp_accounting")
    for sigma in (0.3, 1.0, 4.0, 30.0):
        assert gaussian_epsilon(1.0 / sigma, 1e-6) == pytest.approx(dp_accounting.get_epsilon_gaussian(sigma, 1e-6), rel=1e-7, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(mu=st.floats(0.01, 50.0), delta=st.floats(1e-12, 0.5))
def test_epsilon_delta_round_trip(mu, delta):
    eps = gaussian_epsilon(mu, delta)
    assert eps >= 0
    if eps > 0:
        assert gaussian_delta(mu, eps) == pytest.approx(delta, rel=1e-6)
        assert gaussian_mu_for(eps, delta) == pytest.approx(mu, rel=1e-6)


def test_bad_delta():
    with pytest.raises(InvalidParameterError):
        gaussian_epsilon(1.0, 0.0)
    with pytest.raises(InvalidParameterError):
        gaussian_epsilon(1.0, 1.5)


def test_large_epsilon_no_overflow():
    assert math.isfinite(gaussian_epsilon(1000.0, 1e-10))
    assert gaussian_delta(1.0, 5000.0) == 0.0
