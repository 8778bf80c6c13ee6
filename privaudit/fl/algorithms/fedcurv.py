"""FedCurv (Shoham et al. 2019, "Overcoming Forgetting in Federated Learning on Non-IID Data").

Client i minimises its loss plus an elastic-weight-consolidation penalty towards the other clients'
models (Shoham et al. eq. 5–7, with Kirkpatrick et al.'s EWC):

    L_i(θ) + λ Σ_{j ≠ i} Σ_k F_{j,k} (θ_k − θ̂_{j,k})²  =  L_i(θ) + λ [θᵀ diag(u_{−i}) θ − 2 θᵀ v_{−i}] + const,

where θ̂_j is client j's latest local model, F_j the diagonal of its (empirical) Fisher information at θ̂_j,
u = Σ_j F_j and v = Σ_j F_j ⊙ θ̂_j are the server's sums (the paper's u_t, v_t) and u_{−i} = u − F_i,
v_{−i} = v − F_i ⊙ θ̂_i exclude the client's own term. The penalty's gradient is 2λ(u_{−i} ⊙ θ − v_{−i}).

Protocol as simulated here: after local training a client computes F_i = (1/|D_i|) Σ_{(x,y)∈D_i}
(∇_θ log p_θ(y|x))² at its final local parameters (the empirical Fisher diagonal, as the FedReg paper
computes Fisher information, App. B) and releases it beside its model (``extras["fisher"]``); the server
averages the models as FedAvg does and replaces client i's previous (F_i, F_i ⊙ θ̂_i) in its sums by the new
one. Clients that have never reported contribute nothing. With λ = 0 a FedCurv client computes FedAvg's
sequential update exactly.

Local training reuses the federation's optimiser (:func:`~privaudit.fl.engine.local_training.run_lanes`, one lane)
with the penalty gradient added to each mini-batch gradient, so momentum and batching are FedAvg's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.algorithm import ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.local_solver import (
    ClientSolver,
    LocalOutcome,
    LocalSolver,
    LocalTask,
    RegularisableSolver,
    TrainerView,
)
from privaudit.fl.engine.local_training import LocalObjective, run_lanes
from privaudit.fl.engine.oracles import SequentialOracle
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import seeded_torch_global

if TYPE_CHECKING:
    from torch import nn

#: Examples per chunk of per-example gradients when computing a Fisher diagonal.
_FISHER_CHUNK = 256


def empirical_fisher_diagonal(model: nn.Module, params: State, fixed: State, x: torch.Tensor, y: torch.Tensor) -> State:
    """(1/n) Σ_i (∇_θ log p_θ(y_i|x_i))², per parameter, at ``params`` (the empirical Fisher diagonal).

    The model runs in its current mode (training mode in the federation: a dropout layer draws one mask per example).
    """
    names = list(params)

    def example_loss(p: dict[str, torch.Tensor], xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model, {**fixed, **p}, (xi.unsqueeze(0),))
        return F.cross_entropy(logits, yi.unsqueeze(0))

    per_example = vmap(grad(example_loss), in_dims=(None, 0, 0), randomness="different")  # own dropout mask per example
    sums = {n: torch.zeros_like(params[n]) for n in names}
    detached = {n: params[n].detach() for n in names}
    for start in range(0, len(y), _FISHER_CHUNK):
        grads = per_example(detached, x[start : start + _FISHER_CHUNK], y[start : start + _FISHER_CHUNK])
        for n in names:
            sums[n] += (grads[n] ** 2).sum(dim=0)
    count = max(len(y), 1)
    return {n: s / count for n, s in sums.items()}


class FedCurvSolver(ClientSolver):
    """Local SGD on L_i + the EWC penalty (gradient 2λ(u_{−i} ⊙ θ − v_{−i})), then the client's Fisher diagonal (CPU)."""

    kind = "fedcurv"

    def __init__(self, lam: float, u: State | None, v: State | None) -> None:
        self.lam, self.u, self.v = float(lam), u, v

    def with_solver(self, solver: LocalSolver) -> LocalSolver:
        """Under DP-SGD (a solver that takes a regulariser's gradient in every step): the penalised DP-SGD step."""
        if isinstance(solver, RegularisableSolver):
            return FedCurvDPSGD(self.lam, self.u, self.v, solver)
        raise InvalidParameterError(f"FedCurv's penalised local step has no form with the {type(solver).__name__} solver")

    def penalty_gradient(self, names: Sequence[str]):
        """θ ↦ 2λ(u_{−i} ⊙ θ − v_{−i}) over the trainable tensors ``names`` (in that order), or ``None`` without a penalty."""
        if not (self.lam > 0 and self.u is not None and self.v is not None):
            return None
        u = [self.u[n] for n in names]
        v = [self.v[n] for n in names]
        scale = 2.0 * self.lam

        def gradient(params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
            return [scale * (ui * p.detach() - vi) for p, ui, vi in zip(params, u, v, strict=True)]

        return gradient

    def train_client(self, trainer: TrainerView, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        names = list(trainer.names)
        fixed = {k: v.clone() for k, v in global_state.items() if k not in names}
        x, y = trainer.tensors(task.data, task.client_id)
        schedule = trainer.schedule(task, training_round)
        base = SequentialOracle(trainer.model, names, fixed, x, y, schedule)
        penalised = self.lam > 0 and self.u is not None and self.v is not None
        u = [self.u[n].unsqueeze(0) for n in names] if penalised else None
        v = [self.v[n].unsqueeze(0) for n in names] if penalised else None
        scale = 2.0 * self.lam

        def oracle(params, step, active):
            grads, losses = base(params, step, active)
            if penalised:
                with torch.no_grad():
                    for g, p, ui, vi in zip(grads, params, u, v, strict=True):
                        g.add_(ui * p - vi, alpha=scale)
            return grads, losses

        def run():
            result = run_lanes([global_state[n].unsqueeze(0) for n in names], [schedule.steps], oracle, trainer.local)
            trained = {n: p[0] for n, p in zip(names, result.params, strict=True)}
            return result, trained, empirical_fisher_diagonal(trainer.model, trained, fixed, x, y)

        # dropout masks of training and of the Fisher pass come from the seeded stream, so a run repeats bit for bit
        result, trained, fisher = seeded_torch_global(trainer.seeds.integer("dropout", training_round, task.client_id), run)
        state = {k: (trained[k] if k in trained else v.clone()) for k, v in global_state.items()}
        return LocalOutcome(
            task.client_id,
            state,
            steps=schedule.steps,
            epochs=task.epochs,
            mean_loss=float(result.loss_sum[0]) / schedule.steps,
            info={"fisher": fisher},
        )


class FedCurvDPSGD(ClientSolver):
    """FedCurv under local DP-SGD (the FedReg paper's "FedCurv+DPSGD"): noisy clipped steps on L_i plus the EWC penalty
    gradient (data-independent for client i: the other clients' Fisher sums), then the Fisher diagonal — which is a
    deterministic function of the client's records, released without noise (see :meth:`FedCurv.finish`). CPU only."""

    kind = "fedcurv-dpsgd"

    def __init__(self, lam: float, u: State | None, v: State | None, dpsgd: RegularisableSolver) -> None:
        self.penalty = FedCurvSolver(lam, u, v)
        self.dpsgd = dpsgd

    def train_client(self, trainer: TrainerView, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        names = list(trainer.names)
        solver = self.dpsgd.with_regulariser(self.penalty.penalty_gradient(names))
        outcome = solver.train_client(trainer, global_state, task, training_round)
        fixed = {k: v.clone() for k, v in global_state.items() if k not in names}
        trained = {n: outcome.state[n] for n in names}
        x, y = trainer.tensors(task.data, task.client_id)
        fisher = seeded_torch_global(trainer.seeds.integer("dropout", training_round, task.client_id),
                                     lambda: empirical_fisher_diagonal(trainer.model, trained, fixed, x, y))
        return replace(outcome, info={**outcome.info, "fisher": fisher})


class FedCurv(FedAvg):
    """FedCurv clients (EWC penalty from the server's Fisher sums) and FedAvg's model average.

    Under ``--privacy dp-sgd`` the model is trained by DP-SGD, but the Fisher diagonal each client releases beside it
    is computed from its records without noise: each such round is recorded as a release with no DP guarantee
    (ε = ∞), so the ledger states what "FedCurv+DPSGD" really protects.
    """

    name = "fedcurv"
    server_dp_compatible = False
    server_dp_reason = ("FedCurv's clients also release their Fisher diagonals, which the server sums un-noised and "
                        "sends to every other client")

    def __init__(self, lam: float = 1e-4) -> None:
        if not lam >= 0 or math.isinf(lam):
            raise InvalidParameterError(f"FedCurv λ must be a finite number ≥ 0, got {lam}")
        self.lam = float(lam)

    def setup(self, context: SetupContext) -> None:
        super().setup(context)
        trainable = {n: context.initial_state[n] for n in context.trainable}
        self.u = {n: torch.zeros_like(t) for n, t in trainable.items()}  # Σ_j F_j
        self.v = {n: torch.zeros_like(t) for n, t in trainable.items()}  # Σ_j F_j ⊙ θ̂_j
        self.reports: dict[int, tuple[State, State]] = {}  # client → its term (F_j, F_j ⊙ θ̂_j) in the sums

    def penalty_terms(self, client_id: int) -> tuple[State, State]:
        """(u_{−i}, v_{−i}): the server's sums without client i's own latest term."""
        own = self.reports.get(int(client_id))
        if own is None:
            return {n: t.clone() for n, t in self.u.items()}, {n: t.clone() for n, t in self.v.items()}
        return {n: self.u[n] - own[0][n] for n in self.u}, {n: self.v[n] - own[1][n] for n in self.v}

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        u, v = self.penalty_terms(client.client_id)
        return LocalObjective(solver=FedCurvSolver(self.lam, u, v))

    def finish(self, global_state: State, client: ClientContext, outcome: LocalOutcome) -> ClientResult:
        result = super().finish(global_state, client, outcome)
        info = dict(result.info)
        fisher = info.pop("fisher")
        events = result.events
        if "noise_multiplier" in info:  # trained by DP-SGD: the model is private, the Fisher diagonal is not
            events = (*events, PrivacyEvent.no_guarantee(
                str(client.client_id), client.round,
                f"{self.name} releases the client's empirical Fisher diagonal without noise beside its DP-SGD model (ε = ∞)"))
        return replace(result, extras={**result.extras, "fisher": fisher}, info=info, events=events)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        for r in results:
            fisher = r.extras.get("fisher")
            if fisher is None:  # a client that released no Fisher diagonal (e.g. sat the round out)
                continue
            term = ({n: fisher[n].clone() for n in self.u}, {n: fisher[n] * r.state[n] for n in self.v})
            old = self.reports.get(r.client_id)
            for n in self.u:
                if old is not None:
                    self.u[n] -= old[0][n]
                    self.v[n] -= old[1][n]
                self.u[n] += term[0][n]
                self.v[n] += term[1][n]
            self.reports[r.client_id] = term
        return super().aggregate(round, global_state, results)

    def hyperparameters(self) -> dict[str, Any]:
        return {"lam": self.lam}
