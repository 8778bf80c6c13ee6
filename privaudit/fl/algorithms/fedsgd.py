"""SGD as the FedReg paper runs it (FedSGD): one full-batch gradient step per client per round, then FedAvg.

"SGD corresponds to a special case of FedAvg where the local training stage consists of only one step and
all data on a client are used in a large single batch" (FedReg paper §4). Client i releases
θ_i = θ̄ − η∇L_i(θ̄) with L_i its mean cross-entropy; the example-weighted average is
θ̄ − η Σ_i (|D_i|/Σ_j |D_j|) ∇L_i(θ̄) = θ̄ − η∇L_S(θ̄), one gradient step on the union S of the sampled
clients' data (McMahan et al. 2017's FedSGD). The local epochs, batch size and momentum of the run are
not used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.func import functional_call

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import ClientContext
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.local_training import LocalObjective
from privaudit.fl.params import State

if TYPE_CHECKING:
    from privaudit.fl.trainer import ClientTrainer, LocalOutcome, LocalTask


class FullBatchStep:
    """θ − η∇L_i(θ) on all of the client's data at once (run by ``ClientTrainer.train_one``)."""

    kind = "full-batch-step"

    def with_solver(self, solver: Any) -> Any:
        raise InvalidParameterError("sgd takes one full-batch step; use fedavg with --privacy dp-sgd for DP-SGD")

    def train_client(self, trainer: ClientTrainer, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        from privaudit.fl.trainer import LocalOutcome, _tensors

        names = list(trainer.names)
        fixed = {k: v for k, v in global_state.items() if k not in names}
        x, y = _tensors(task.data)
        leaves = [global_state[n].detach().clone().requires_grad_() for n in names]
        logits = functional_call(trainer.model, {**fixed, **dict(zip(names, leaves, strict=True))}, (x,))
        loss = F.cross_entropy(logits, y)
        grads = torch.autograd.grad(loss, leaves)
        state = {k: v.clone() for k, v in global_state.items()}
        with torch.no_grad():
            for n, p, g in zip(names, leaves, grads, strict=True):
                state[n] = (p - trainer.local.lr * g).detach()
        return LocalOutcome(task.client_id, state, steps=1, epochs=1, mean_loss=float(loss.detach()))


class FedSGD(FedAvg):
    name = "sgd"
    #: The local step is the algorithm's own, so ``--privacy dp-sgd`` (which swaps in DP-SGD) is refused.
    dp_sgd_compatible = False

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return LocalObjective(solver=FullBatchStep())
