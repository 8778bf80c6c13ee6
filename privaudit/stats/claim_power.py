"""The claim an audit's power speaks to, as one value every estimator takes: :class:`ClaimPower`.

With a claimed ε, each estimator reports the power of an *optimal* attack to refute the claim if the mechanism were
``factor``× less private, simulated from the declared family's canonical mechanism (:mod:`privaudit.stats.power`:
at most ``trials`` simulated audits from ``seed``, stopping once the power is clearly above or below ``min_power``).
``attack_optimal`` records the auditor's declaration that the attack that ran is optimal for the declared mechanism —
the assumption under which that power speaks for it (and which the bounds record even without a claim).
"""

from __future__ import annotations

from dataclasses import dataclass

from privaudit.stats.power import PowerRequest


@dataclass(frozen=True)
class ClaimPower:
    """The claimed ε (``None``: no power is computed), how its power is simulated, and whether the attack is declared
    optimal. Checked when a power is asked for (:class:`~privaudit.stats.power.PowerRequest`)."""

    claimed_epsilon: float | None = None
    factor: float = 2.0
    trials: int = 200
    seed: int = 0
    min_power: float = 0.8
    progress: bool = False
    attack_optimal: bool = False

    def request(self, delta: float) -> PowerRequest:
        """The power simulation at ``delta`` (only with a claimed ε)."""
        if self.claimed_epsilon is None:
            raise ValueError("a power needs a claimed ε")
        return PowerRequest(self.claimed_epsilon, delta, self.factor, self.trials, self.seed, self.min_power, self.progress)


#: No claim: bounds without power, the attack not declared optimal.
NO_CLAIM = ClaimPower()
