"""SGD as the FedReg paper runs it (FedSGD): one full-batch gradient step per client per round, then FedAvg.

"SGD corresponds to a special case of FedAvg where the local training stage consists of only one step and
all data on a client are used in a large single batch" (FedReg paper §4). Client i releases
θ_i = θ̄ − η∇L_i(θ̄) with L_i its mean cross-entropy; the example-weighted average is
θ̄ − η Σ_i (|D_i|/Σ_j |D_j|) ∇L_i(θ̄) = θ̄ − η∇L_S(θ̄), one gradient step on the union S of the sampled
clients' data (McMahan et al. 2017's FedSGD). The local epochs, batch size and momentum of the run are
not used — except under ``--privacy dp-sgd``, which runs full-batch DP-SGD (sampling rate 1, per-example clipping,
Gaussian noise): one noisy step per local epoch, the FedReg paper's "DPSGD" baseline with ``--local-epochs 1``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.func import functional_call

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.algorithm import ClientContext
from privaudit.fl.engine.capabilities import LocalStepForm
from privaudit.fl.engine.local_solver import ClientSolver, LocalOutcome, LocalSolver, LocalTask, TrainerView
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State


class FullBatchStep(ClientSolver):
    """θ − η∇L_i(θ) on all of the client's data at once (CPU; run by the trainer as a client solver)."""

    kind = "full-batch-step"

    def with_solver(self, solver: LocalSolver) -> LocalSolver:
        # DP-SGD on the full batch (q = 1) is the FedReg paper's "DPSGD" baseline: per-example clipping and noise on
        # the same full-batch gradient step (one step per local epoch; --local-epochs 1 for the paper's setting).
        if isinstance(solver, ClientSolver) and solver.full_batch:
            return solver
        raise InvalidParameterError("sgd takes full-batch steps: only full-batch DP-SGD (sampling rate 1) can replace them")

    def train_client(self, trainer: TrainerView, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        names = list(trainer.names)
        fixed = {k: v for k, v in global_state.items() if k not in names}
        x, y = trainer.tensors(task.data, task.client_id)
        leaves = [global_state[n].detach().clone().requires_grad_() for n in names]
        logits = functional_call(trainer.model, {**fixed, **dict(zip(names, leaves, strict=True))}, (x,))
        loss = F.cross_entropy(logits, y)
        grads = torch.autograd.grad(loss, leaves)
        state = {k: v.clone() for k, v in global_state.items()}
        with torch.no_grad():
            for n, p, g in zip(names, leaves, grads, strict=True):
                state[n] = (p - trainer.local.lr * g).detach()
        return LocalOutcome(task.client_id, state, steps=1, epochs=1, mean_loss=float(loss.detach()))


class FedSGD(FedAvg, LocalStepForm):
    name = "sgd"
    #: ``--privacy dp-sgd`` runs full-batch DP-SGD (sampling rate 1): the paper's "DPSGD" comparison point.
    full_batch_dp_sgd = True

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return LocalObjective(solver=FullBatchStep())
