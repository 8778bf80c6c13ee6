"""pFedMe (T Dinh, Tran & Nguyen 2020, Alg. 1): personalisation with Moreau envelopes.

Each client keeps a personalised model θ_i; per mini-batch it takes K gradient steps (personal lr) on
f_i(θ) + (λ/2)‖θ − w_i‖², then moves its local model w_i along λ(w_i − θ_i)
(:class:`~privaudit.fl.engine.local_training.MoreauEnvelope`). Server: w̄ ← (1 − β)w̄ + β Σ_i p_i w_i.
Defaults λ = 15, K = 5, personal lr 0.1, β = 1 (Upcycled-FL ``--pfedme_lambda 15 --k 5 --per_lr 0.1
--pfedme_beta 1``; 003 §7.2 sets K = 5). The personalised models are evaluated separately
(``personalised_accuracy`` in the round metrics); the global accuracy is that of w̄.
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import example_weighted_average
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.capabilities import LocalStepForm, PersonalModels, ServerStepForm
from privaudit.fl.engine.local_training import LocalObjective, MoreauEnvelope
from privaudit.fl.engine.params import State


class PFedMe(Algorithm, LocalStepForm, ServerStepForm, PersonalModels):
    name = "pfedme"
    #: The local step is a Moreau-envelope inner loop, so ``--privacy dp-sgd`` (which swaps in DP-SGD) is refused.
    dp_sgd_compatible = False
    #: w̄ ← (1 − β)w̄ + β·(private mean) is post-processing of the server-side private release; the personalised
    #: models θ_i stay on the clients (they are never released), so ``--privacy cdp|ddp`` is sound.
    server_dp_compatible = True

    def __init__(self, lam: float = 15.0, inner_steps: int = 5, personal_lr: float = 0.1, beta: float = 1.0) -> None:
        if not 0 < beta <= 2:
            raise InvalidParameterError(f"pFedMe β must lie in (0, 2], got {beta}")
        self.solver = MoreauEnvelope(lam=float(lam), inner_steps=int(inner_steps), personal_lr=float(personal_lr))
        self.beta = float(beta)

    def setup(self, context: SetupContext) -> None:
        super().setup(context)
        self.personal: dict[int, State] = {}

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return LocalObjective(solver=self.solver)

    def finish(self, global_state, client, outcome) -> ClientResult:
        if outcome.personal is not None:
            self.personal[client.client_id] = {**outcome.state, **outcome.personal}
        return super().finish(global_state, client, outcome)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return P.clone(global_state)
        average = example_weighted_average(results)
        return {k: (1 - self.beta) * global_state[k] + self.beta * average[k] for k in global_state}

    def personal_states(self) -> dict[int, State]:
        return dict(self.personal)

    def hyperparameters(self) -> dict:
        return {"lam": self.solver.lam, "inner_steps": self.solver.inner_steps, "personal_lr": self.solver.personal_lr, "beta": self.beta}
