"""A validity scenario with a declared ledger: T steps of a (Poisson-subsampled) Gaussian seen by a white-box auditor.

:class:`LedgerMechanism` is the mechanism a DP-SGD / DP-FedAvg ledger declares — T steps, each including the canary
with probability q (q = 1: every step) and adding Gaussian noise of multiplier σ to a sum of sensitivity 1 — observed
on one canary direction at every step (the all-iterates white-box view: x_t ~ N(b_t/σ, 1) in units of the noise, b_t
the canary's inclusion at step t, b_t = 0 for a canary that is "out"). The score is the privacy loss of the T outputs,
Σ_t ln(1 − q + q·e^{μx_t − μ²/2}) with μ = 1/σ, the likelihood ratio of "in" against "out": by Neyman–Pearson the
strongest attack there is (an optimal attack on the declared mechanism).

Its true ε at δ is that of the T-fold composition under add/remove neighbours: exact for q = 1 (T Gaussian steps are
one Gaussian with μ = √T/σ; Dong, Roth & Su 2022, Cor. 3.3), else the ``ctd`` accountant's certified upper bound
(relative accuracy 10⁻³), so for q < 1 the coverage measured against it can be lenient by that much. Its true claims
are ``any`` and the run's own curve family (:class:`~privaudit.stats.ledger_family.LedgerFamily` of the same T, q and
sampling), which is what route ``one-run-fdp-ledger`` audits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.ledger_family import LedgerFamily
from privaudit.stats.validity_scenarios import CLAIM_ANY


@dataclass(frozen=True)
class LedgerMechanism:
    """T steps of a Poisson-subsampled Gaussian (rate q, noise multiplier σ), scored by its privacy loss."""

    steps: int = 10
    sample_rate: float = 0.5
    noise_multiplier: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 1:
            raise InvalidParameterError(f"steps must be a positive integer, got {self.steps!r}")
        if not 0.0 < self.sample_rate <= 1.0:
            raise InvalidParameterError(f"the sampling rate must lie in (0, 1], got {self.sample_rate}")
        if not (math.isfinite(self.noise_multiplier) and self.noise_multiplier > 0):
            raise InvalidParameterError(f"the noise multiplier must be positive and finite, got {self.noise_multiplier}")

    family = "ledger"

    @property
    def ledger(self) -> LedgerFamily:
        """The declared mechanism as a curve family (the claim route ``one-run-fdp-ledger`` takes)."""
        return LedgerFamily.subsampled_gaussian(self.steps, self.sample_rate, self.noise_multiplier)

    @property
    def claims(self) -> tuple[object, ...]:
        return (CLAIM_ANY, self.ledger)

    @property
    def name(self) -> str:
        return f"ledger {self.steps}× gaussian σ={self.noise_multiplier:g} q={self.sample_rate:g}"

    def true_epsilon(self, delta: float) -> float:
        if not 0.0 <= delta < 1.0:
            raise InvalidParameterError(f"delta must lie in [0, 1), got {delta}")
        return math.inf if delta == 0.0 else self.ledger.claimed_epsilon(delta)

    def sample(self, rng: np.random.Generator, member: bool, size: int) -> np.ndarray:
        mu, q = 1.0 / self.noise_multiplier, self.sample_rate
        x = rng.normal(0.0, 1.0, (size, self.steps))
        if member:
            x += mu * (rng.random((size, self.steps)) < q)
        if q >= 1.0:
            return np.sum(mu * x - mu * mu / 2.0, axis=1)
        return np.sum(np.logaddexp(math.log1p(-q), math.log(q) + mu * x - mu * mu / 2.0), axis=1)
