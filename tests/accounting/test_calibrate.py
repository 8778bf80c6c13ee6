"""Noise calibration: feasible (never above the target) and within 1 % of the smallest valid σ."""

import pytest

from privaudit.accounting import Composition, Gaussian, SubsampledGaussian
from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.calibrate import calibrate_noise
from privaudit.errors import InvalidParameterError


def dpsgd(q, steps):
    return lambda sigma: Composition.of(SubsampledGaussian(sigma, q), steps)


def test_rdp_reference_noise_multipliers():
    # PrivateFL's settings (001 §5), σ independently computed with dp-accounting RDP: LDP MNIST ε=8 (q=0.1, 1500 steps) σ=2.15; CDP MNIST ε=8 (q=1, 150) σ=6.37
    assert calibrate_noise(dpsgd(0.1, 1500), 8, 1e-3, accountant="rdp").noise_multiplier == pytest.approx(2.15, abs=0.01)
    cdp = calibrate_noise(lambda s: Composition.of(Gaussian(s), 150), 8, 1e-3, accountant="rdp")
    assert cdp.noise_multiplier == pytest.approx(6.37, abs=0.01)


@pytest.mark.parametrize(("q", "target", "optimal"), [(0.01, 8, 0.5871), (0.1, 3, 4.4965)])
def test_tight_calibration_within_one_percent_of_optimal(q, target, optimal):
    # optimal = dp-accounting 0.6.0 PLD calibration, independently measured (T = 1000, δ = 1e-5). That search stopped
    # short of the target (its σ gives PLD ε = 7.96 for 8), so a tight calibration may land slightly below it:
    # at ctd's σ = 0.58648 dp-accounting's pessimistic PLD gives 7.9906 ≤ 8 (vdi 1e-4 and 2e-5 alike).
    cal = calibrate_noise(dpsgd(q, 1000), target, 1e-5)
    assert cal.epsilon_at_noise.epsilon <= target
    assert optimal * 0.995 <= cal.noise_multiplier <= optimal * 1.01


def test_exact_gaussian_calibration_is_tight():
    cal = calibrate_noise(lambda s: Composition.of(Gaussian(s), 150), 8, 1e-3)
    exact = get_accountant("prv").epsilon(Composition.of(Gaussian(cal.noise_multiplier), 150), 1e-3).epsilon
    assert exact <= 8 and exact > 8 * 0.995


def test_calibrate_then_epsilon_round_trip_rdp():
    for q, steps, target in ((0.02, 300, 2.0), (0.3, 50, 5.0), (1.0, 10, 1.0)):
        cal = calibrate_noise(dpsgd(q, steps), target, 1e-5, accountant="rdp", rtol=1e-4)
        rdp = get_accountant("rdp")
        assert rdp.epsilon(dpsgd(q, steps)(cal.noise_multiplier), 1e-5).epsilon <= target
        assert rdp.epsilon(dpsgd(q, steps)(cal.noise_multiplier * (1 - 2e-3)), 1e-5).epsilon > target


def test_gdp_is_never_used_for_calibration():
    with pytest.raises(InvalidParameterError, match="approximation"):
        calibrate_noise(dpsgd(0.01, 100), 1.0, 1e-5, accountant="gdp")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("q", "target", "optimal"),
    [(0.01, 1, 1.4147), (0.01, 3, 0.8136), (0.1, 1, 11.8656), (0.1, 8, 2.0509)],
)
def test_calibration_rechecked_with_pld(q, target, optimal):
    cal = calibrate_noise(dpsgd(q, 1000), target, 1e-5)
    assert get_accountant("pld").epsilon(dpsgd(q, 1000)(cal.noise_multiplier), 1e-5).epsilon <= target
    assert cal.noise_multiplier <= optimal * 1.01
