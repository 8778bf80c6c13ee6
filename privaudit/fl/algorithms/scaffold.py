"""SCAFFOLD (Karimireddy et al. 2020, Alg. 1 with option II control variates).

Client i corrects every local gradient by c − c_i (here: the linear term ⟨c − c_i, ω⟩ of the local
objective), then updates its control variate c_i⁺ = c_i − c + (x − y_i)/(K·η_eff) and releases y_i and
Δc_i = c_i⁺ − c_i. Server: x ← x + η_g Σ_i p_i (y_i − x) (example-weighted, as every algorithm here) and
c ← c + (|S|/N)·mean_i Δc_i.

With heavy-ball momentum m the displacement after K steps is ≈ K·η/(1−m) times the mean gradient, so
η_eff = η/(1−m) (the paper's plain SGD is m = 0). Buffers (batch-norm statistics) carry no control variate.
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import example_weighted_average
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.capabilities import ServerStepForm
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State


class Scaffold(Algorithm, ServerStepForm):
    name = "scaffold"
    server_dp_compatible = False
    server_dp_reason = ("SCAFFOLD's clients also release their control-variate changes Δc_i, which the server adds "
                        "un-noised to c and sends to every client")

    def __init__(self, server_lr: float = 1.0) -> None:
        if not server_lr > 0:
            raise InvalidParameterError(f"SCAFFOLD's global learning rate must be positive, got {server_lr}")
        self.server_lr = float(server_lr)

    def setup(self, context: SetupContext) -> None:
        super().setup(context)
        self.trainable = context.trainable
        self.server_control = {n: context.initial_state[n].new_zeros(context.initial_state[n].shape) for n in self.trainable}
        self.client_controls: dict[int, State] = {}

    def _control(self, client_id: int) -> State:
        return self.client_controls.get(client_id) or P.zeros_like(self.server_control)

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        correction = P.sub(self.server_control, self._control(client.client_id))
        linear = {k: (correction[k] if k in correction else v.new_zeros(v.shape)) for k, v in global_state.items()}
        return LocalObjective(linear=linear)

    def finish(self, global_state, client, outcome) -> ClientResult:
        result = super().finish(global_state, client, outcome)
        effective_lr = self.context.local_lr / (1.0 - self.context.local_momentum)
        old = self._control(client.client_id)
        factor = 1.0 / (outcome.steps * effective_lr)
        new = {n: old[n] - self.server_control[n] + factor * (global_state[n] - outcome.state[n]) for n in self.trainable}
        self.client_controls[client.client_id] = new
        return ClientResult(
            client_id=result.client_id,
            num_examples=result.num_examples,
            state=result.state,
            train_loss=result.train_loss,
            steps=result.steps,
            epochs=result.epochs,
            extras={"control_delta": P.sub(new, old)},
            info=result.info,
        )

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return P.clone(global_state)
        average = example_weighted_average(results)
        new_global = {k: global_state[k] + self.server_lr * (average[k] - global_state[k]) for k in global_state}
        fraction = len(results) / self.context.num_clients
        mean_delta = P.weighted_average([r.extras["control_delta"] for r in results], [1.0] * len(results))
        self.server_control = P.add(self.server_control, mean_delta, fraction)
        return new_global

    def hyperparameters(self) -> dict:
        return {"server_lr": self.server_lr}
