"""FedProx (Li et al. 2020): FedAvg whose clients minimise F_i(ω) + (μ/2)‖ω − ω̄^t‖².

Local objective as 003 eq. 3 / FedProx eq. 2; the clients' "(approximate) minimiser" is local SGD
(Upcycled-FL code: ``FedProxOptimizer`` adds μ(ω − ω̄) to each step's gradient). μ = 0 is FedAvg.
"""

from __future__ import annotations

import math

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.algorithm import ClientContext
from privaudit.fl.engine.capabilities import ProximalTerm
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State


class FedProx(FedAvg, ProximalTerm):
    name = "fedprox"

    def __init__(self, mu: float = 0.01) -> None:
        if not mu >= 0 or math.isinf(mu):
            raise InvalidParameterError(f"FedProx μ must be a finite number ≥ 0, got {mu}")
        self.mu = float(mu)

    @property
    def proximal_mu(self) -> float:
        return self.mu

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return LocalObjective(anchor=global_state, prox=self.mu)

    def hyperparameters(self) -> dict:
        return {"mu": self.mu}
