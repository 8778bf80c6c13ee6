"""FedReg (Xu, Hong, Huang, Jiang, ICLR 2022): local steps regularised by pseudo and perturbed data, and MG.

Client i in round t, from the global model θ^{(t−1)} (002 §3.2–3.3, Alg. D.1; Zoesgithub/FedReg@34b081f:
FedUtils/fed/fedreg.py):

* pseudo data (§3.2): x^s_j = x^s_{j−1} + η_s·sign(∇_x L_{θ^{(t−1)}}(x^s_{j−1}, y)), j = 1..E, from x^s_0 = x for
  each local example, soft labels y^s = softmax f_{θ^{(t−1)}}(x^s); perturbed data: the same with
  η_p = 0.01·η_s and the true labels y^p = y;
* each local step on mini-batch B (eq. 11):
  θ_γ = γθ + (1−γ)θ^{(t−1)};  θ ← θ − η·g_γ(B)  (the data gradient at θ_γ);
  θ_β = ½(θ + θ^{(t−1)});  w_s = max(0, ⟨θ − θ^{(t−1)}, g_β(D^s)⟩/‖g_β(D^s)‖²);  θ ← θ − w_s g_β(D^s);
  w_p = max(0, ⟨θ − θ^{(t−1)}, g_β(D^p)⟩/‖g_β(D^p)‖²);  θ ← θ − w_p g_β(D^p)   (eq. 10–11),
  with D^s, D^p the pseudo and perturbed copies of B;
* FedReg+MG (``modified_gradient=True``, eq. 12): g_γ(B) is replaced by g_γ(B) − v·g_γ(B^{s'}),
  v = ⟨g_γ(B), g_γ(B^{s'})⟩/‖g_γ(B^{s'})‖², B^{s'} = the pseudo inputs of B with the uniform label (1/n)Σ_j e_j.

The server averages the local models as FedAvg does (example-weighted; the reference code weighs every
sampled client 1.0 in Zoesgithub/FedReg@34b081f:FedUtils/fed/server.py — identical for equal client sizes). The pure mathematics is
:mod:`privaudit.papers.fedreg.local_step` (shared with the inversion attacks).

Implementation notes:

* The pseudo and perturbed data depend only on θ^{(t−1)} and x, so they are generated once per client and
  round for every local example (as the reference code's ``generate_fake`` does for every batch of its
  loader) and indexed by the mini-batch; FGSM takes the sign of the summed loss's input gradient, each
  example's own sign, so this equals generating them at every step.
* FGSM outputs are **clamped to the data range** (``fgsm_clamp="data-range"``, the dataset's range mapped
  to model space). The reference code's ``FSGM`` calls ``clamp`` and discards the result, so it never
  clamps (audit point R6); ``fgsm_clamp="none"`` reproduces that.
* Mini-batches come from the trainer's seeded ``"shuffle"`` stream, the same batches FedAvg's clients use;
  the data step uses the run's SGD (momentum on the data gradient if configured; the reference code has
  none). With γ = 1 and the regulariser off, a FedReg client computes FedAvg's sequential update exactly.
* Privacy: FedReg and FedReg+MG add no noise. Each client's round is recorded in the ledger as
  ``PureDP(ε = ∞)`` with the assumption text "no DP guarantee" (audit point R1): MG's protection is an
  empirical PSNR statement against one gradient-inversion attack, not differential privacy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.engine.algorithm import ClientContext, ClientResult
from privaudit.fl.engine.capabilities import LocalStepForm
from privaudit.fl.engine.local_solver import ClientSolver, LocalOutcome
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State
from privaudit.fl.engine.seeding import seeded_torch_global
from privaudit.papers.fedreg.local_step import (
    fgsm_pseudo_inputs,
    interpolate,
    modified_gradient,
    regulariser_step,
    soft_cross_entropy,
)

if TYPE_CHECKING:
    from privaudit.fl.engine.local_solver import LocalOutcome, LocalTask
    from privaudit.fl.engine.trainer import ClientTrainer

FGSM_CLAMPS = ("data-range", "none")
#: Examples per FGSM chunk when generating a client's pseudo data.
_FGSM_CHUNK = 2048


@dataclass(frozen=True)
class FedRegConfig:
    """γ, η_s, η_p (default 0.01·η_s), FGSM steps E, MG on/off, the FGSM clamp and the regulariser switch.

    ``regularise=False`` drops eq. (10)'s pseudo/perturbed-data terms (an ablation; with γ = 1 it is FedAvg).
    """

    gamma: float = 0.5
    eta_s: float = 0.1
    eta_p: float | None = None
    fgsm_steps: int = 10
    modified_gradient: bool = False
    fgsm_clamp: str = "data-range"
    regularise: bool = True
    eps: float = 1e-30

    def __post_init__(self) -> None:
        gamma = float(self.gamma)
        if not 0.0 <= gamma <= 1.0:
            raise InvalidParameterError(f"FedReg γ must lie in [0, 1], got {self.gamma}")
        eta_s = float(self.eta_s)
        if not eta_s >= 0 or math.isinf(eta_s):
            raise InvalidParameterError(f"FedReg η_s must be a finite number ≥ 0, got {self.eta_s}")
        if self.eta_p is not None and (not float(self.eta_p) >= 0 or math.isinf(float(self.eta_p))):
            raise InvalidParameterError(f"FedReg η_p must be a finite number ≥ 0, got {self.eta_p}")
        if isinstance(self.fgsm_steps, bool) or int(self.fgsm_steps) != self.fgsm_steps or int(self.fgsm_steps) < 0:
            raise InvalidParameterError(f"FedReg needs a whole number of FGSM steps E ≥ 0, got {self.fgsm_steps}")
        clamp = str(self.fgsm_clamp).strip().lower()
        if clamp not in FGSM_CLAMPS:
            raise InvalidParameterError(f"unknown FGSM clamp {self.fgsm_clamp!r}; use {', '.join(FGSM_CLAMPS)}")
        object.__setattr__(self, "gamma", gamma)
        object.__setattr__(self, "eta_s", eta_s)
        object.__setattr__(self, "fgsm_steps", int(self.fgsm_steps))
        object.__setattr__(self, "fgsm_clamp", clamp)
        object.__setattr__(self, "modified_gradient", bool(self.modified_gradient))

    @property
    def perturb_step(self) -> float:
        """η_p: the given value, else 0.01·η_s (§3.2)."""
        return 0.01 * self.eta_s if self.eta_p is None else float(self.eta_p)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["eta_p"] = self.perturb_step
        out.pop("eps")
        return out


class FedRegSolver(ClientSolver):
    """A client's whole FedReg round (run by ``ClientTrainer.train_one`` through ``train_client``)."""

    kind = "fedreg"

    def __init__(self, config: FedRegConfig, bounds: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        self.config = config
        self.bounds = bounds

    def with_solver(self, solver: Any) -> Any:
        raise InvalidParameterError(
            "FedReg's local step (eq. 11) has no DP-SGD form here; train FedAvg with --privacy dp-sgd for the DP-SGD baseline"
        )

    def pseudo_data(self, forward, theta0: State, x: torch.Tensor, y: torch.Tensor, num_classes: int
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(x^s, y^s, x^p) for every local example, from the global model θ^{(t−1)} (§3.2)."""
        cfg = self.config
        box = self.bounds if cfg.fgsm_clamp == "data-range" else None
        targets = F.one_hot(y, num_classes).to(x.dtype)
        xs, ys, xp = [], [], []
        for start in range(0, len(y), _FGSM_CHUNK):
            chunk = slice(start, start + _FGSM_CHUNK)
            pseudo = fgsm_pseudo_inputs(forward, theta0, x[chunk], targets[chunk], cfg.eta_s, cfg.fgsm_steps, box)
            with torch.no_grad():
                ys.append(torch.softmax(forward(theta0, pseudo), dim=-1))
            xs.append(pseudo)
            xp.append(fgsm_pseudo_inputs(forward, theta0, x[chunk], targets[chunk], cfg.perturb_step, cfg.fgsm_steps, box))
        return torch.cat(xs), torch.cat(ys), torch.cat(xp)

    def train_client(self, trainer: ClientTrainer, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        """One client's round (eq. 10–12): pseudo and perturbed data from θ^{(t−1)}, then the regularised local steps."""
        model, names = trainer.model, list(trainer.names)
        fixed = {k: v.clone() for k, v in global_state.items() if k not in names}

        def forward(params, inputs):
            return functional_call(model, {**fixed, **dict(params)}, (inputs,))

        x = torch.from_numpy(task.data.x_train)
        y = torch.from_numpy(task.data.y_train)
        theta0 = {n: global_state[n].detach().clone() for n in names}
        schedule = trainer.schedule(task, training_round)
        local = _LocalRound(self.config, forward, names, theta0, trainer.num_classes)

        def run():
            x_s, y_s, x_p = self.pseudo_data(forward, theta0, x, y, trainer.num_classes)
            return local.steps(schedule, (x, y, x_s, y_s, x_p), trainer.local.lr, trainer.local.momentum), x_s

        (theta, trace), x_s = seeded_torch_global(trainer.seeds.integer("dropout", training_round, task.client_id), run)
        state = {k: v.clone() for k, v in global_state.items()}
        for n, t in zip(names, theta, strict=True):
            state[n] = t.detach().clone()
        return LocalOutcome(task.client_id, state, steps=schedule.steps, epochs=task.epochs,
                            mean_loss=float(np.mean(trace["losses"])) if trace["losses"] else float("nan"),
                            info=_round_info(trace, x_s, x, len(y)))


def _round_info(trace: dict[str, list[float]], x_s: torch.Tensor, x: torch.Tensor, examples: int) -> dict[str, Any]:
    """What a FedReg round reports: the mean regulariser weights w_s, w_p (eq. 10), how often w_s was 0, the pseudo
    data's distance from the data, and (FedReg+MG) the mean projection coefficient v of eq. 12."""
    w_s, w_p = trace["w_s"], trace["w_p"]
    info: dict[str, Any] = {
        "fedreg_w_s_mean": float(np.mean(w_s)) if w_s else 0.0,
        "fedreg_w_p_mean": float(np.mean(w_p)) if w_p else 0.0,
        "fedreg_w_s_zero_fraction": float(np.mean([w == 0.0 for w in w_s])) if w_s else 1.0,
        "fedreg_pseudo_distance": float((x_s - x).flatten(1).norm(dim=1).mean()) if examples else 0.0,
    }
    if trace["projections"]:
        info["fedreg_mg_v_mean"] = float(np.mean(trace["projections"]))
    return info


class _LocalRound:
    """The local steps of one FedReg client round (eq. 11, with MG's eq. 12 and the regulariser of eq. 10)."""

    def __init__(self, config: FedRegConfig, forward, names: list[str], theta0: State, num_classes: int) -> None:
        self.config, self.forward, self.names, self.theta0 = config, forward, names, theta0
        self.num_classes = num_classes

    def steps(self, schedule, data, lr: float, momentum: float) -> tuple[list[torch.Tensor], dict[str, list[float]]]:
        """θ after the schedule's steps, and the trace (losses, w_s, w_p, MG projections)."""
        x, y, x_s, y_s, x_p = data
        theta = [self.theta0[n].clone() for n in self.names]
        buffers = [torch.zeros_like(t) for t in theta] if momentum > 0 else None
        trace: dict[str, list[float]] = {"losses": [], "w_s": [], "w_p": [], "projections": []}
        for step in range(schedule.steps):
            rows = torch.from_numpy(schedule.indices[step, : int(schedule.sizes[step])])
            grads = self.data_gradient(theta, x[rows], y[rows], x_s[rows], trace)
            with torch.no_grad():
                if buffers is not None:
                    torch._foreach_mul_(buffers, momentum)
                    torch._foreach_add_(buffers, grads)
                    torch._foreach_add_(theta, buffers, alpha=-lr)
                else:
                    torch._foreach_add_(theta, grads, alpha=-lr)
            if self.config.regularise:
                theta = self.regularise(theta, (x_s[rows], y_s[rows]), (x_p[rows], y[rows]), trace)
        return theta, trace

    def data_gradient(self, theta: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, pseudo: torch.Tensor,
                      trace: dict[str, list[float]]) -> list[torch.Tensor]:
        """g_γ(B) at θ_γ = γθ + (1−γ)θ^{(t−1)} (eq. 11); with MG, g_γ(B) − v·g_γ(B^{s'}) (eq. 12)."""
        cfg, names = self.config, self.names
        gamma_point = interpolate(dict(zip(names, theta, strict=True)), self.theta0, cfg.gamma)
        leaves = [gamma_point[n].detach().requires_grad_() for n in names]
        at_gamma = dict(zip(names, leaves, strict=True))
        loss = F.cross_entropy(self.forward(at_gamma, x), y)
        grads = list(torch.autograd.grad(loss, leaves))
        trace["losses"].append(float(loss.detach()))
        if not cfg.modified_gradient:
            return grads
        uniform = torch.full((len(y), self.num_classes), 1.0 / self.num_classes, dtype=pseudo.dtype)
        g_u = torch.autograd.grad(soft_cross_entropy(self.forward(at_gamma, pseudo), uniform), leaves)
        norm = sum(float((g * g).sum()) for g in g_u)
        trace["projections"].append(sum(float((a * b).sum()) for a, b in zip(grads, g_u, strict=True)) / (norm + cfg.eps))
        moved = modified_gradient(dict(zip(names, grads, strict=True)), dict(zip(names, g_u, strict=True)), cfg.eps)
        return [moved[n] for n in names]

    def regularise(self, theta: list[torch.Tensor], pseudo: tuple[torch.Tensor, torch.Tensor],
                   perturbed: tuple[torch.Tensor, torch.Tensor], trace: dict[str, list[float]]) -> list[torch.Tensor]:
        """The steps along g_β(D^s) and g_β(D^p) at θ_β = ½(θ + θ^{(t−1)}) with weights w_s, w_p (eq. 10–11)."""
        names = self.names
        current = dict(zip(names, theta, strict=True))
        beta_point = interpolate(current, self.theta0, 0.5)
        beta_leaves = [beta_point[n].detach().requires_grad_() for n in names]
        at_beta = dict(zip(names, beta_leaves, strict=True))
        g_s = torch.autograd.grad(soft_cross_entropy(self.forward(at_beta, pseudo[0]), pseudo[1]), beta_leaves)
        g_p = torch.autograd.grad(F.cross_entropy(self.forward(at_beta, perturbed[0]), perturbed[1]), beta_leaves)
        with torch.no_grad():
            updated, weights = regulariser_step(
                current, self.theta0, [dict(zip(names, g_s, strict=True)), dict(zip(names, g_p, strict=True))], self.config.eps
            )
        trace["w_s"].append(float(weights[0]))
        trace["w_p"].append(float(weights[1]))
        return [updated[n] for n in names]


NO_GUARANTEE = "no DP guarantee"


def no_guarantee_event(client: ClientContext, algorithm: str, reason: str) -> PrivacyEvent:
    """A release with no differential-privacy guarantee, recorded honestly as ε = ∞ (PureDP(∞))."""
    return PrivacyEvent.no_guarantee(str(client.client_id), client.round, f"{algorithm} {reason} (ε = ∞)")


class FedReg(FedAvg, LocalStepForm):
    """FedReg / FedReg+MG clients (see the module docstring), FedAvg's server."""
    #: The local step is the algorithm's own, so ``--privacy dp-sgd`` (which swaps in DP-SGD) is refused.
    dp_sgd_compatible = False

    def __init__(self, config: FedRegConfig | None = None, **options: Any) -> None:
        if config is not None and options:
            raise InvalidParameterError("give FedReg either a FedRegConfig or its options, not both")
        self.config = config if config is not None else FedRegConfig(**options)

    @property
    def name(self) -> str:  # type: ignore[override]
        return "fedreg-mg" if self.config.modified_gradient else "fedreg"

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        bounds = self.context.input_bounds
        if self.config.fgsm_clamp == "data-range" and bounds is None:
            raise InvalidParameterError("FedReg's FGSM clamp needs the data range; use --fgsm-clamp none for data without one")
        return LocalObjective(solver=FedRegSolver(self.config, bounds))

    def finish(self, global_state: State, client: ClientContext, outcome: LocalOutcome) -> ClientResult:
        result = super().finish(global_state, client, outcome)
        reason = (
            "adds no noise: the released model is a deterministic function of the client's data and the global model; "
            + ("MG (eq. 12) removes one gradient direction, an empirical defence against one inversion attack (audit point R1)"
               if self.config.modified_gradient else "the pseudo-data regulariser is not a privacy mechanism")
        )
        return replace(result, events=(*result.events, no_guarantee_event(client, self.name, reason)))

    def hyperparameters(self) -> dict[str, Any]:
        return self.config.to_dict()
