"""FedDyn (Acar et al. 2021, Alg. 1): dynamic regularisation.

Client i minimises L_i(θ) − ⟨∇L_i(θ_i^{t−1}), θ⟩ + (α/2)‖θ − θ^{t−1}‖² (linear term −g_i, proximal term α),
then updates its state g_i ← g_i − α(θ_i^t − θ^{t−1}) (the first-order condition of its objective).
Server: h^t = h^{t−1} − α·(1/N)·Σ_{i∈S}(θ_i^t − θ^{t−1});  θ^t = avg_i θ_i^t − h^t/α.

The average is example-weighted like every algorithm here (the paper averages uniformly over the sampled
clients). Default α = 0.01 (Upcycled-FL ``--dyn_alpha``); the reference code's local gradient-norm clipping
(``--max_grad_norm``) is not part of the algorithm and is not applied.
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import example_weighted_average
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import (
    AGGREGATE_OF_CLIENTS,
    Algorithm,
    ClientContext,
    ClientResult,
    SetupContext,
)
from privaudit.fl.engine.capabilities import ServerStepForm
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State


def _clients(result: ClientResult) -> float:
    """How many clients' models ``result`` stands for: 1, or a server-side private aggregate's denominator."""
    return float(result.info.get(AGGREGATE_OF_CLIENTS, 1))


class FedDyn(Algorithm, ServerStepForm):
    name = "feddyn"
    #: h and the new model are functions of the round's sum and average of client models only, and the clients'
    #: g_i stay on the clients: under ``--privacy cdp|ddp`` the server step runs on the private mean update, with
    #: Σ_{i∈S}(θ_i − θ) estimated as (clients it stands for)·(private mean update) — post-processing.
    server_dp_compatible = True

    def __init__(self, alpha: float = 0.01) -> None:
        if not alpha > 0:
            raise InvalidParameterError(f"FedDyn α must be positive, got {alpha}")
        self.alpha = float(alpha)

    def setup(self, context: SetupContext) -> None:
        super().setup(context)
        self.trainable = context.trainable
        self.h = {n: context.initial_state[n].new_zeros(context.initial_state[n].shape) for n in self.trainable}
        self.client_gradients: dict[int, State] = {}

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        gradient = self.client_gradients.get(client.client_id)
        linear = {k: (-gradient[k] if gradient is not None and k in gradient else v.new_zeros(v.shape)) for k, v in global_state.items()}
        return LocalObjective(anchor=global_state, prox=self.alpha, linear=linear)

    def finish(self, global_state, client, outcome) -> ClientResult:
        old = self.client_gradients.get(client.client_id) or P.zeros_like(self.h)
        self.client_gradients[client.client_id] = {
            n: old[n] - self.alpha * (outcome.state[n] - global_state[n]) for n in self.trainable
        }
        return super().finish(global_state, client, outcome)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return P.clone(global_state)
        drift = {n: sum(_clients(r) * (r.state[n] - global_state[n]) for r in results) for n in self.trainable}
        self.h = P.add(self.h, drift, -self.alpha / self.context.num_clients)
        average = example_weighted_average(results)
        return {k: (average[k] - self.h[k] / self.alpha if k in self.h else average[k]) for k in global_state}

    def hyperparameters(self) -> dict:
        return {"alpha": self.alpha}
