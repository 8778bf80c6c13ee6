"""What a PFA-family run fixes before round 1 (004 Alg. 2 lines 1–3, Alg. 7): budgets, τ schedule, σ_m, the division.

:func:`plan_federation` draws every client's budget ε_m (:mod:`privaudit.papers.pfa.budgets`), takes the budget its
noise is calibrated for (its *operating* ε: its own, or min/max ε for the Minimum/Maximum baselines), realises τ
local steps as whole Poisson epochs per client or exactly (:func:`~privaudit.papers.pfa.budget_calibration.local_schedule`),
calibrates σ_m for the planned steps (:func:`~privaudit.papers.pfa.budget_calibration.calibrate_clients`, private
runs only) and, with the population scope, divides all clients into public and private once
(:mod:`privaudit.papers.pfa.public_private`). The result is a :class:`FederationPlan`, recorded in the run's
report under ``"plan"``. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.budget_calibration import ClientCalibration, calibrate_clients, local_schedule
from privaudit.papers.pfa.budgets import PrivacyBudgets, resolve_budgets
from privaudit.papers.pfa.public_private import Split, SplitMethod, SplitScope, split_clients
from privaudit.papers.pfa.settings import PFASettings

#: Operating budgets from the clients' own ones (identity for the paper's heterogeneous DP).
OperatingBudgets = Callable[[list[float]], list[float]]


@dataclass(frozen=True)
class FederationPlan:
    """K per round, R, B, each client's epochs E_m and steps E_m·⌈1/q_m⌉, budgets, operating ε, σ_m, the division."""

    clients_per_round: int
    rounds: int
    batch_size: int
    epochs: tuple[int, ...]
    steps: tuple[int, ...]
    preferences: PrivacyBudgets
    operating_eps: tuple[float, ...]
    calibrations: tuple[ClientCalibration, ...]
    population_split: Split | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "clients_per_round": self.clients_per_round,
            "rounds": self.rounds,
            "batch_size": self.batch_size,
            "local_epochs": list(self.epochs),
            "local_steps_per_round": list(self.steps),
            "budgets": self.preferences.to_dict(),
            "operating_epsilons": list(self.operating_eps),
            "calibration": [c.to_dict() for c in self.calibrations],
            "population_split": None if self.population_split is None else self.population_split.to_dict(),
        }


def clients_per_round(rate: float, num_clients: int) -> int:
    """K = max(⌊q·M⌋, 1): the family samples K of the M clients per round."""
    return max(math.floor(rate * num_clients + 1e-9), 1)


def plan_federation(settings: PFASettings, *, rounds: int, rate: float, seed: int, client_sizes: Sequence[int], batch_size: int,
                    split_seed: int, operating: OperatingBudgets, private: bool) -> FederationPlan:
    """The plan of a run of ``rounds`` rounds sampling a fraction ``rate`` of the clients (sizes ``client_sizes``)."""
    budget, split = settings.budget, settings.split
    num_clients = len(client_sizes)
    per_round = clients_per_round(rate, num_clients)
    preferences = resolve_budgets(budget.budgets, num_clients, seed if budget.budget_seed is None else int(budget.budget_seed),
                                  delta=budget.delta, nonpositive=budget.nonpositive, second_parameter=budget.second_parameter)
    operating_eps = operating(list(preferences.epsilons))
    if split.split is SplitMethod.TOPK and split.public_clients > min(per_round, num_clients):
        raise InvalidParameterError(f"{split.public_clients} public clients is more than the {per_round} sampled per round")
    schedules = [local_schedule(n, batch_size, settings.local_steps, settings.local_step_rule) for n in client_sizes]
    steps = [s for _, _, s in schedules]
    calibrations: list[ClientCalibration] = []
    if private:
        dp = settings.local_dp
        calibrations = calibrate_clients(operating_eps, [q for q, _, _ in schedules], steps, delta=budget.delta,
                                         clients_per_round=per_round, rounds=rounds, method=dp.calibration, planned=dp.planned)
    population = None
    if split.split_scope is SplitScope.POPULATION:
        population = split_clients(operating_eps, split.split, public_clients=split.public_clients, seed=split_seed)
    return FederationPlan(per_round, rounds, batch_size, tuple(e for _, e, _ in schedules), tuple(steps), preferences,
                          tuple(operating_eps), tuple(calibrations), population)
