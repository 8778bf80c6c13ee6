"""FedYogi (Reddi et al. 2021, "Adaptive Federated Optimization", Alg. 2 with the Yogi update).

Δ^t = Σ_i p_i (ω_i − ω̄^t);  m^t = β₁ m^{t−1} + (1 − β₁)Δ^t;
v^t = v^{t−1} − (1 − β₂)(Δ^t)² sign(v^{t−1} − (Δ^t)²);  ω̄^{t+1} = ω̄^t + η m^t / (√v^t + τ).
m starts at 0 and v at τ² (the paper requires v₋₁ ≥ τ²). Defaults η = 0.1, τ = 1e-3, β₁ = 0.9, β₂ = 0.99
(Upcycled-FL ``--yogi_lr 0.1 --tau 1e-3 --beta1 0.9 --beta2 0.99``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import example_weighted_average
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import ClientResult, SetupContext
from privaudit.fl.engine.params import State


class FedYogi(FedAvg):
    name = "fedyogi"

    def __init__(self, server_lr: float = 0.1, beta1: float = 0.9, beta2: float = 0.99, tau: float = 1e-3) -> None:
        if not server_lr > 0 or not tau > 0 or not 0 <= beta1 < 1 or not 0 <= beta2 < 1:
            raise InvalidParameterError("FedYogi needs η > 0, τ > 0 and β₁, β₂ in [0, 1)")
        self.server_lr, self.beta1, self.beta2, self.tau = float(server_lr), float(beta1), float(beta2), float(tau)

    def setup(self, context: SetupContext) -> None:
        super().setup(context)
        self.first = P.zeros_like(context.initial_state)
        self.second = {k: torch.full_like(v, self.tau**2) for k, v in context.initial_state.items()}

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return P.clone(global_state)
        delta = P.sub(example_weighted_average(results), global_state)
        new_state = {}
        for k, d in delta.items():
            self.first[k] = self.beta1 * self.first[k] + (1 - self.beta1) * d
            squared = d * d
            self.second[k] = self.second[k] - (1 - self.beta2) * squared * torch.sign(self.second[k] - squared)
            new_state[k] = global_state[k] + self.server_lr * self.first[k] / (self.second[k].sqrt() + self.tau)
        return new_state

    def hyperparameters(self) -> dict:
        return {"server_lr": self.server_lr, "beta1": self.beta1, "beta2": self.beta2, "tau": self.tau}
