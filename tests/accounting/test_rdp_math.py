"""RDP curves against independent references: mpmath integrals, opacus, dp-accounting, spec tables."""

import math

import mpmath as mp
import numpy as np
import pytest

from privaudit.accounting import rdp_math
from privaudit.accounting.rdp_math import (
    OPACUS_ORDERS,
    delta_from_rdp,
    epsilon_from_rdp,
    rdp_gaussian,
    rdp_laplace,
    rdp_poisson_subsampled_gaussian,
    rdp_poisson_subsampled_gaussian_batch,
    rdp_pure,
    rdp_sampled_without_replacement_gaussian,
)


def _mp_rdp(q, sigma, alpha):
    """log A_α/(α−1) with A_α = E_{z~N(0,σ²)}[(1 − q + q e^{(2z−1)/(2σ²)})^α], 40 digits (MTZ 2019, §3)."""
    mp.mp.dps = 40
    q, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)
    f = lambda z: mp.npdf(z, 0, s) * (1 - q + q * mp.e ** ((2 * z - 1) / (2 * s * s))) ** a  # noqa: E731
    area = mp.quad(f, [-mp.inf, -5 * s, 0, a / 2, a, a + 5 * s, mp.inf])
    return float(mp.log(area) / (a - 1))


@pytest.mark.parametrize(
    ("q", "sigma", "alpha"),
    [(0.1, 0.8, 1.2), (0.01, 0.8, 3.5), (0.5, 0.5, 10.9), (0.1, 1.0, 1.1), (0.01, 2.0, 5.5), (0.99, 0.7, 2.3),
     (0.01, 1.0, 12), (0.1, 0.8, 40), (0.3, 2.0, 63), (1e-3, 5.0, 1.5)],
)
def test_matches_high_precision_reference(q, sigma, alpha):
    got = rdp_poisson_subsampled_gaussian(q, sigma, np.array([float(alpha)]))[0]
    assert got == pytest.approx(_mp_rdp(q, sigma, alpha), rel=1e-9)


def test_spec_mpmath_value_at_optimal_order():
    # independently checked: opacus' series matches dp-accounting's mpmath reference at α = 1.2: 0.0170782 (σ=0.8, q=0.1)
    assert rdp_poisson_subsampled_gaussian(0.1, 0.8, np.array([1.2]))[0] == pytest.approx(0.0170782, abs=1e-7)


def test_matches_opacus_on_its_orders():
    rdp = pytest.importorskip("opacus.accountants.analysis.rdp")
    worst = 0.0
    for q in (0.004, 0.01, 0.05, 0.1, 0.3, 0.7, 0.99):
        for sigma in (0.5, 0.8, 1.0, 1.3, 2.0, 5.0):
            ref = np.asarray(rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=list(OPACUS_ORDERS)))
            ours = rdp_poisson_subsampled_gaussian(q, sigma, OPACUS_ORDERS)
            mask = ref > 1e-7  # below this opacus' own float error exceeds 1e-6 relative
            worst = max(worst, float(np.max(np.abs(ours[mask] - ref[mask]) / ref[mask])))
    assert worst < 1e-6


def test_batch_equals_single():
    q = np.array([0.01, 0.1, 0.5, 1.0, 0.02])
    z = np.array([0.8, 1.5, 3.0, 2.0, np.inf])
    batch = rdp_poisson_subsampled_gaussian_batch(q, z, rdp_math.DEFAULT_ORDERS)
    for i in range(q.size):
        np.testing.assert_allclose(batch[i], rdp_poisson_subsampled_gaussian(q[i], z[i], rdp_math.DEFAULT_ORDERS), rtol=1e-12)
    np.testing.assert_allclose(batch[3], rdp_gaussian(2.0, rdp_math.DEFAULT_ORDERS))
    assert np.all(batch[4] == 0)


def test_no_nan_at_extremes():
    for q, sigma in ((1e-6, 0.3), (0.999, 0.2), (0.5, 100.0), (1e-4, 1e-1)):
        curve = rdp_poisson_subsampled_gaussian(q, sigma, rdp_math.DEFAULT_ORDERS)
        assert not np.any(np.isnan(curve)) and np.all(curve >= 0)


def test_rdp_monotone_in_order_and_q():
    curve = rdp_poisson_subsampled_gaussian(0.05, 1.0, rdp_math.DEFAULT_ORDERS)
    assert np.all(np.diff(curve) >= -1e-12)
    lo = rdp_poisson_subsampled_gaussian(0.01, 1.0, rdp_math.DEFAULT_ORDERS)
    assert np.all(lo <= curve + 1e-15)


def test_laplace_reference():
    # independently measured: 100 × Laplace(b = 10), δ = 1e-5 → dp-accounting 0.6.0 RDP 4.533
    eps, _ = epsilon_from_rdp(rdp_math.DEFAULT_ORDERS, 100 * rdp_laplace(0.1, rdp_math.DEFAULT_ORDERS), 1e-5)
    assert eps == pytest.approx(4.533, abs=2e-3)


def test_pure_dp_is_randomized_response_divergence():
    eps, alpha = 0.7, 3.0
    p = math.exp(eps) / (1 + math.exp(eps))
    direct = math.log(p**alpha * (1 - p) ** (1 - alpha) + (1 - p) ** alpha * p ** (1 - alpha)) / (alpha - 1)
    assert rdp_pure(eps, np.array([alpha]))[0] == pytest.approx(direct, rel=1e-12)
    curve = rdp_pure(eps, rdp_math.DEFAULT_ORDERS)
    assert np.all(curve <= eps + 1e-12)
    assert np.all(curve <= rdp_math.DEFAULT_ORDERS * eps * eps / 2 + 1e-12)  # Bun & Steinke 2016, Prop. 3.3


def test_without_replacement_matches_dp_accounting_with_doubled_sensitivity():
    """Our replace-one base Gaussian has sensitivity 2; dp-accounting uses 1 (#378), i.e. z/2 here."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant as rpa

    orders = np.array([2.0, 3.0, 5.0, 8.0, 16.0, 32.0])
    acc = rpa.RdpAccountant(orders=list(orders), neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.SampledWithoutReplacementDpEvent(10_000, 100, dpa.GaussianDpEvent(0.5)), 1)
    ours = rdp_sampled_without_replacement_gaussian(0.01, 1.0, orders)
    np.testing.assert_allclose(ours, acc._rdp, rtol=1e-9)


def test_conversion_matches_opacus():
    rdp = pytest.importorskip("opacus.accountants.analysis.rdp")
    curve = 1000 * rdp_poisson_subsampled_gaussian(0.01, 1.0, OPACUS_ORDERS)
    eps_ref, order_ref = rdp.get_privacy_spent(orders=list(OPACUS_ORDERS), rdp=curve, delta=1e-5)
    eps, order = epsilon_from_rdp(OPACUS_ORDERS, curve, 1e-5)
    assert eps == pytest.approx(eps_ref, rel=1e-12) and order == order_ref


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "opacus"),
    # opacus 1.6.0 RDP, independently measured (δ = 1e-5); ours uses a superset of opacus' orders
    [(0.8, 0.01, 100, 2.185), (1.0, 0.01, 1000, 2.101), (2.0, 0.01, 100, 0.2571), (1.0, 0.1, 100, 7.899),
     (0.8, 0.1, 10000, 225.643), (1.0, 0.1, 10000, 134.502), (1.0, 1.0, 1000, 654.861)],
)
def test_spec_rdp_column(sigma, q, steps, opacus):
    on_opacus_orders, _ = epsilon_from_rdp(OPACUS_ORDERS, steps * rdp_poisson_subsampled_gaussian(q, sigma, OPACUS_ORDERS), 1e-5)
    assert on_opacus_orders == pytest.approx(opacus, rel=1e-3)
    ours, _ = epsilon_from_rdp(rdp_math.DEFAULT_ORDERS, steps * rdp_poisson_subsampled_gaussian(q, sigma, rdp_math.DEFAULT_ORDERS), 1e-5)
    assert ours <= on_opacus_orders + 1e-12


def test_delta_conversion_inverts_epsilon_conversion():
    orders = rdp_math.DEFAULT_ORDERS
    curve = 500 * rdp_poisson_subsampled_gaussian(0.02, 1.1, orders)
    eps, _ = epsilon_from_rdp(orders, curve, 1e-6)
    delta, _ = delta_from_rdp(orders, curve, eps)
    assert delta == pytest.approx(1e-6, rel=1e-6)


def test_bad_orders():
    with pytest.raises(ValueError):
        rdp_gaussian(1.0, np.array([0.5, 2.0]))
