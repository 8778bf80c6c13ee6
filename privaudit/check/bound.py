"""A certified ε lower bound from a measured noise scale: the declared releases, with less noise, composed as the
ledger composes them.

If the noise of the checked rounds has std at most ρ_U times the declared one (an upper confidence limit, from the
noise check's χ² statistic), the mechanism as implemented is the declared one with every noise multiplier z replaced
by ρ_U·z or less. ε is decreasing in z for the Gaussian and subsampled Gaussian mechanisms (a larger multiplier is a
post-processing of a smaller one: add independent noise), so ε(ρ_U·z, composed) is a lower bound on the implemented
mechanism's ε with the limit's confidence — under the declared sensitivity (some client's update reaches the clip C,
which is what the declared ε assumes) and Gaussian noise (the declared family).

A pooled limit assumes one ratio ρ for all checked rounds. For plain Gaussian compositions a ratio that varies by
round only raises ε: μ² = Σ_r 1/(ρ_r z_r)² and, for equal z_r, Σ 1/ρ_r² ≥ R²/Σ ρ_r² (Cauchy–Schwarz), while the
pooled χ² estimates the mean of ρ_r².

ε is computed by privaudit's own accountants: exactly for plain Gaussian compositions (Balle & Wang 2018, Thm 8; Dong,
Roth & Su 2022, Cor. 2.13 and 3.3: :func:`privaudit.accounting.gaussian.gaussian_epsilon`), and as the PRV accountant's
certified lower end otherwise (Gopi, Lee & Wutschitz 2021; :mod:`privaudit.accounting.prv`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from privaudit.accounting.gaussian import gaussian_epsilon, plain_gaussian_mu
from privaudit.accounting.ledger import PrivacyLedger
from privaudit.accounting.mechanisms import Composition, Gaussian, Mechanism, SubsampledGaussian
from privaudit.errors import NumericalFailure, PrivauditError

#: Below this effective multiplier the release carries no noise to speak of: ε is reported as ∞.
NO_NOISE = 1e-6


def scaled(mechanism: Mechanism, ratio: float) -> Mechanism | None:
    """``mechanism`` with its noise multiplier times ``ratio`` (None below :data:`NO_NOISE`: no noise)."""
    if isinstance(mechanism, Gaussian):
        z = mechanism.noise_multiplier * ratio
        return None if z / mechanism.sensitivity < NO_NOISE else Gaussian(z, mechanism.sensitivity)
    if isinstance(mechanism, SubsampledGaussian):
        z = mechanism.noise_multiplier * ratio
        return None if z < NO_NOISE else SubsampledGaussian(z, mechanism.sample_rate, mechanism.sampling)
    raise PrivauditError(f"{mechanism.describe()} has no noise multiplier to scale")


def lower_epsilon(ledger: PrivacyLedger, events: Sequence[int], ratio: float, delta: float) -> tuple[float, str]:
    """(ε lower end, how it was computed) of ledger events ``events`` (indices) with their noise scaled by ``ratio``.

    Where the PRV accountant fails numerically (a tiny multiplier), the ratio is doubled until it answers: ε decreases
    in the noise, so the answer is still a lower bound, only a looser one (the note says at which ratio).
    """
    scale = ratio
    while True:
        try:
            epsilon, how = _lower_epsilon(ledger, events, scale, delta)
        except NumericalFailure:
            if scale >= 1.0:
                raise
            scale = min(1.0, max(2.0 * scale, 1e-3))
            continue
        if scale != ratio:
            how += f"; computed at ratio {scale:.3g} ≥ the limit {ratio:.3g}, where the accountant answers (still a lower bound)"
        return epsilon, how


def _lower_epsilon(ledger: PrivacyLedger, events: Sequence[int], ratio: float, delta: float) -> tuple[float, str]:
    entries = []
    for index in events:
        event = ledger.events[index]
        mechanism = scaled(event.mechanism, ratio)
        if mechanism is None:
            return math.inf, "the measured noise is zero: ε = ∞"
        entries.append((mechanism, event.count))
    composition = Composition(entries, ledger.neighbouring)
    mu = plain_gaussian_mu(composition)
    if mu is not None:
        return gaussian_epsilon(mu, delta), "exact (Gaussian composition, μ-GDP)"
    # prv-accountant takes ~1 s to import: only when needed
    from privaudit.accounting.prv import PrvAccountant

    result = PrvAccountant().epsilon(composition, delta)
    if result.lower is None:
        raise NumericalFailure("the PRV accountant gave no lower end")
    return float(result.lower), "prv (certified lower end)"


def claimed_epsilon(ledger: PrivacyLedger, subject: str, delta: float, accountant: str = "auto") -> float | None:
    """The ε the ledger states for ``subject`` at ``delta`` (its accountant's upper bound), None when it cannot say."""
    try:
        return float(ledger.epsilon_for(subject, delta, accountant).epsilon)
    except PrivauditError:
        return None
