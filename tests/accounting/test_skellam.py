"""The Skellam mechanism's RDP accounting (Agarwal, Kairouz & Liu 2021) and how the other accountants refuse it."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privaudit.accounting import rdp_math
from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.calibrate import calibrate_noise
from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Neighbouring,
    Skellam,
    mechanism_from_dict,
    mechanism_to_dict,
)
from privaudit.accounting.rdp import RdpAccountant
from privaudit.errors import InvalidParameterError, UnsupportedMechanismError

INTEGER_ORDERS = np.arange(2, 257, dtype=float)


def test_rdp_curve_is_theorem_3_5_at_integer_orders():
    mu, l2, l1 = 50.0, 3.0, 7.0
    curve = rdp_math.rdp_skellam(mu, l2, l1, np.array([2.0, 3.0, 10.0]))
    for alpha, value in zip((2, 3, 10), curve, strict=True):
        expected = alpha * l2**2 / (2 * mu) + min(((2 * alpha - 1) * l2**2 + 6 * l1) / (4 * mu**2), 3 * l1 / (2 * mu))
        assert value == pytest.approx(expected, rel=1e-12)


def test_fractional_orders_use_the_next_integer_order():
    orders = np.array([1.5, 2.0, 2.3, 3.0])
    curve = rdp_math.rdp_skellam(10.0, 1.0, 1.0, orders)
    assert curve[0] == curve[1] and curve[2] == curve[3]
    assert np.all(np.diff(rdp_math.rdp_skellam(10.0, 1.0, 1.0, rdp_math.DEFAULT_ORDERS)) >= 0)


def test_skellam_accounting_approaches_the_gaussian_one_as_the_variance_grows():
    """At a fixed noise multiplier √μ/Δ₂ = 2 the Skellam correction vanishes as the scale (and μ) grows."""
    acct = RdpAccountant(orders=INTEGER_ORDERS)
    gaussian = acct.epsilon(Composition.of(Gaussian(2.0), 100), 1e-5).epsilon
    gaps = []
    for scale in (1.0, 10.0, 100.0, 1000.0):
        l2 = 3.0 * scale
        skellam = Skellam(variance=(2.0 * l2) ** 2, l2_sensitivity=l2, l1_sensitivity=math.sqrt(64) * l2)
        eps = acct.epsilon(Composition.of(skellam, 100), 1e-5).epsilon
        assert eps >= gaussian - 1e-9
        gaps.append(eps - gaussian)
    assert gaps[0] > 0.01 and gaps[-1] < 1e-4 * gaussian
    assert all(b < a for a, b in itertools.pairwise(gaps))


def test_more_variance_means_less_epsilon_and_replace_one_doubles_the_sensitivities():
    rdp = get_accountant("rdp")
    eps = [rdp.epsilon(Composition.of(Skellam(v, 5.0), 10), 1e-5).epsilon for v in (100.0, 400.0, 1600.0)]
    assert eps[0] > eps[1] > eps[2]
    mech = Skellam(400.0, 5.0, 30.0)
    replace = rdp.epsilon(Composition.of(mech, 10, Neighbouring.REPLACE_ONE), 1e-5).epsilon
    doubled = rdp.epsilon(Composition.of(Skellam(400.0, 10.0, 60.0), 10), 1e-5).epsilon
    assert replace == pytest.approx(doubled, rel=1e-12)


def test_default_l1_sensitivity_is_the_integer_bound_and_parameters_are_validated():
    assert Skellam(10.0, 3.0).l1_sensitivity == 9.0
    for bad in ({"variance": 0.0, "l2_sensitivity": 1.0}, {"variance": 1.0, "l2_sensitivity": -1.0},
                {"variance": 1.0, "l2_sensitivity": 1.0, "l1_sensitivity": 0.0}):
        with pytest.raises(InvalidParameterError):
            Skellam(**bad)


@pytest.mark.parametrize("name", ["prv", "pld", "gdp", "pure"])
def test_other_accountants_declare_skellam_unsupported(name):
    composition = Composition.of(Skellam(100.0, 5.0), 3)
    accountant = get_accountant(name)
    reason = accountant.unsupported_reason(composition)
    assert reason is not None and "Skellam" in reason
    with pytest.raises(UnsupportedMechanismError, match="Skellam"):
        accountant.epsilon(composition, 1e-5)


def test_auto_falls_back_to_rdp_and_says_why():
    result = get_accountant("auto").epsilon(Composition.of(Skellam(100.0, 5.0), 3), 1e-5)
    assert result.accountant == "rdp"
    assert any("prv" in note and "Skellam" in note for note in result.notes)


def test_json_round_trip_and_ledger():
    mech = Skellam(123.0, 4.5, 20.0)
    assert mechanism_from_dict(mechanism_to_dict(mech)) == mech
    assert mechanism_from_dict({"type": "skellam", "variance": 1.0, "l2_sensitivity": 1.0}) == Skellam(1.0, 1.0)
    ledger = PrivacyLedger()
    ledger.record(PrivacyEvent("server", 1, mech, count=4))
    again = PrivacyLedger.from_dict(ledger.to_dict())
    assert again.summary(1e-5, "rdp").max_epsilon == pytest.approx(ledger.summary(1e-5, "rdp").max_epsilon)


def test_calibration_through_skellam():
    calibration = calibrate_noise(lambda z: Composition.of(Skellam((10.0 * z) ** 2, 10.0, 100.0), 20), 4.0, 1e-5, accountant="rdp")
    eps = get_accountant("rdp").epsilon(Composition.of(Skellam((10.0 * calibration.noise_multiplier) ** 2, 10.0, 100.0), 20), 1e-5)
    assert eps.epsilon <= 4.0 and eps.epsilon > 3.95
