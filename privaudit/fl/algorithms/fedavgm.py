"""FedAvgM (Hsu, Qi & Brown 2019): FedAvg with server momentum on the averaged pseudo-gradient.

Δ^t = ω̄^t − Σ_i p_i ω_i^t;  v^t = β v^{t−1} + Δ^t;  ω̄^{t+1} = ω̄^t − η_s v^t.
Defaults β = 0.3 (Upcycled-FL ``--server_momentum``) and η_s = 1.
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import example_weighted_average
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import ClientResult, SetupContext
from privaudit.fl.engine.params import State


class FedAvgM(FedAvg):
    name = "fedavgm"

    def __init__(self, server_momentum: float = 0.3, server_lr: float = 1.0) -> None:
        if not 0 <= server_momentum < 1:
            raise InvalidParameterError(f"server momentum must lie in [0, 1), got {server_momentum}")
        if not server_lr > 0:
            raise InvalidParameterError(f"server learning rate must be positive, got {server_lr}")
        self.server_momentum = float(server_momentum)
        self.server_lr = float(server_lr)

    def setup(self, context: SetupContext) -> None:
        super().setup(context)
        self.velocity = P.zeros_like(context.initial_state)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return P.clone(global_state)
        pseudo_gradient = P.sub(global_state, example_weighted_average(results))
        self.velocity = P.add(P.scale(self.velocity, self.server_momentum), pseudo_gradient)
        return P.add(global_state, self.velocity, -self.server_lr)

    def hyperparameters(self) -> dict:
        return {"server_momentum": self.server_momentum, "server_lr": self.server_lr}
