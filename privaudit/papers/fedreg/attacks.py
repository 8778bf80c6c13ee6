"""Adaptive inversion of FedReg-with-MG updates (privaudit audit point R4): the ``adaptive-mg`` inversion attack.

FedReg's privacy claim (Xu et al., ICLR 2022, §3.3 and App. B.4) was tested only against attackers
that assume plain FedAvg. An adaptive attacker knows the protocol — FedReg with modified gradients and
its hyper-parameters (γ, η_s, FGSM steps) — and simulates it for its candidate inputs: pseudo data by
FGSM from the candidates (sign differentiated with a straight-through estimator, or the FGSM
displacement held constant with ``fgsm_gradient="identity"``), the MG projection of
eq. (12) and, by default, the regulariser of eq. (10). It then runs Inverting Gradients on that forward
model (:class:`privaudit.papers.fedreg.forward.FedRegLocalTraining`). The paper registers it as a plug-in attack
(``PAPER.attacks["adaptive-mg"]``), so :func:`attacks.inversion.registry.build_attack` builds it by name; against a
FedReg release in an experiment the attacker assumes that release's hyper-parameters
(:meth:`AdaptiveMGAttack.options_for_defence`).

:func:`naive_and_adaptive` runs both attackers on the same payload so reports can show the gap.

Against plain FedReg (``use_modified_gradient=False``) the same class simulates FedReg without MG, so the two
defences can be compared under one attack. The simulation is exact: run on the true example it reproduces the
released update to float precision (``tests/attacks/test_adaptive_fedreg.py``; measured per attacked example by
:mod:`privaudit.papers.fedreg.update_anatomy`). What limits the attack is the objective, not the model: for one
example and one step, eq. (10) subtracts from the SGD step its component along the pseudo-data gradient, which
is nearly parallel to it, leaving about a tenth of the step, and the rest depends on the input largely through
which LeakyReLU units change sign between θ_0 and θ_β. On the LeakyReLU ConvNet the matching loss at the true
image plus small noise is then of the same order as at random starts, so gradient descent does not lead to the
image (``reports/inversion.md``: the update anatomy and the adaptive rows).

Options beyond Inverting Gradients' loop (:class:`AdaptiveMGConfig`; the defaults keep that loop unchanged):

* ``start="analytic"`` — an *analytic-seeded* adaptive attack: on an FC-first model the closed-form first-layer
  recovery (Phong et al. 2018) read from the FedReg update is close to the input (FedReg's pseudo and perturbed data
  differ from x by at most η_s·E per pixel, so every first-layer row ratio is nearly x), and the descent through the
  exact simulation refines it. This inverts plain FedReg where random starts do not (``tests/attacks/
  test_adaptive_fedreg.py``; ``reports/inversion.md``, rows "adaptive, analytic start").
* ``smooth_temperature`` — continuation through a smooth surrogate of the (Leaky)ReLU
  (:mod:`attacks.inversion.smooth_activation`), annealed to the exact activation, so that the descent sees the
  jumps; on the ConvNet it lowers the matching loss and raises PSNR, but not to an inversion (rows "adaptive,
  continuation").
* ``keep_best_iterate`` — return the iterate with the lowest exact matching loss, not the last one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar

import torch

from attacks.inversion.analytic import AnalyticAttack, AnalyticConfig
from attacks.inversion.client_simulation import ClientSimulator
from attacks.inversion.convergence import finite_loss
from attacks.inversion.descent import descent_step, step_milestones
from attacks.inversion.functional_model import FunctionalModel
from attacks.inversion.inverting_gradients import (
    InvertingGradientsAttack,
    InvertingGradientsConfig,
    check_update_kind,
)
from attacks.inversion.limits import MAX_ITERATIONS, count, finite
from attacks.inversion.objectives import total_variation
from attacks.inversion.smooth_activation import annealed_temperature, smoothed_copy
from attacks.inversion.threat_model import InversionPayload, InversionResult
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.defences import FedRegMGRelease
from privaudit.papers.fedreg.forward import FedRegLocalTraining

#: Where each restart of the adaptive attack starts (see :class:`AdaptiveMGConfig`).
STARTS = ("random", "analytic")
#: The FedReg hyper-parameters the attacker takes from a FedReg release it attacks (the protocol is public).
RELEASE_SETTINGS = ("gamma", "pseudo_step", "perturb_step", "fgsm_steps", "use_modified_gradient", "regularize", "clamp_fgsm")
#: FedReg's algorithm options where a trained run's recipe leaves one out (``privaudit.papers.fedreg.specs``).
RUN_DEFAULTS = {"fedreg_gamma": 0.5, "fedreg_eta_s": 0.1, "fedreg_eta_p": None, "fgsm_steps": 10, "fgsm_clamp": "data-range"}


@dataclass(frozen=True)
class AdaptiveMGConfig(InvertingGradientsConfig):
    """Inverting-Gradients settings plus the FedReg hyper-parameters the attacker assumes.

    The client's lr, local steps and batch size come from the payload's
    :class:`~attacks.inversion.threat_model.ClientKnowledge`.

    How the optimisation runs (the defaults are Inverting Gradients' own loop):

    * ``start``: ``"random"`` (standard normal clamped to the data range, every restart) or ``"analytic"`` — the
      first restart starts at the closed-form first-layer recovery (:class:`~attacks.inversion.analytic.AnalyticAttack`,
      Phong et al. 2018) read from the same update, the others at random; FC-first models only. The descent then
      refines it through the exact FedReg simulation ("analytic-seeded adaptive"); use a small ``lr`` so that the
      first signed steps do not leave the seed.
    * ``smooth_temperature`` τ_0 > 0: continuation — the simulation runs with the smooth surrogate activation of
      :mod:`attacks.inversion.smooth_activation`, τ annealed geometrically from τ_0 to τ_0·1e-3 over the first
      ``smooth_fraction`` of the iterations, then exact (τ = 0) to the end; the restart's score is always the exact
      matching loss.
    * ``keep_best_iterate``: return the iterate with the lowest exact matching loss seen (checked at every exact
      step and at the end) instead of the last one.
    """

    gamma: float = 0.5
    pseudo_step: float = 0.1
    perturb_step: float | None = None
    fgsm_steps: int = 10
    use_modified_gradient: bool = True
    regularize: bool = True
    clamp_fgsm: bool = True
    fgsm_gradient: str = "straight-through"
    start: str = "random"
    smooth_temperature: float = 0.0
    smooth_fraction: float = 0.5
    keep_best_iterate: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.start not in STARTS:
            raise InvalidParameterError(f"unknown start {self.start!r}; choose one of: {', '.join(STARTS)}")
        finite("smooth_temperature", self.smooth_temperature, positive=False)
        if not 0.0 < self.smooth_fraction <= 1.0:
            raise InvalidParameterError(f"smooth_fraction must lie in (0, 1], got {self.smooth_fraction}")
        tuned = self.start != "random" or self.smooth_temperature > 0 or self.keep_best_iterate
        if tuned and self.bn_stats is not None:
            raise InvalidParameterError("the adaptive attack's start, continuation and best-iterate options do not "
                                        "combine with the BatchNorm prior (bn_stats)")
        if not 0.0 <= self.gamma <= 1.0:
            raise InvalidParameterError(f"FedReg γ must lie in [0, 1], got {self.gamma}")
        count("FedReg fgsm_steps", self.fgsm_steps, 0, MAX_ITERATIONS)
        finite("FedReg pseudo_step", self.pseudo_step, positive=False)
        if self.perturb_step is not None:
            finite("FedReg perturb_step", self.perturb_step, positive=False)
        if self.fgsm_gradient not in ("straight-through", "identity"):
            raise InvalidParameterError(
                f"unknown FGSM gradient {self.fgsm_gradient!r}; choose straight-through or identity"
            )


def fedreg_simulator(
    payload: InversionPayload, cfg: AdaptiveMGConfig, device: torch.device | str = "cpu"
) -> FedRegLocalTraining:
    """FedReg-with-MG local training as the attacker models it for ``payload``'s client."""
    knowledge = payload.knowledge
    if knowledge.update_kind != "delta" or knowledge.lr is None:
        raise InvalidParameterError("the adaptive MG attack needs a parameter-delta update and the client's lr")
    return FedRegLocalTraining(
        lr=knowledge.lr,
        local_steps=knowledge.local_steps,
        batch_size=knowledge.batch_size,
        gamma=cfg.gamma,
        pseudo_step=cfg.pseudo_step,
        perturb_step=cfg.perturb_step,
        fgsm_steps=cfg.fgsm_steps,
        use_modified_gradient=cfg.use_modified_gradient,
        regularize=cfg.regularize,
        box=payload.data.box(device) if cfg.clamp_fgsm else None,
        fgsm_gradient=cfg.fgsm_gradient,
    )


class AdaptiveMGAttack(InvertingGradientsAttack):
    """Inverting Gradients through a simulation of FedReg with modified gradients."""

    name: ClassVar[str] = "adaptive-mg"
    description: ClassVar[str] = (
        "Inverting Gradients through FedReg's MG step (eq. 12) and regulariser, FGSM with a straight-through sign"
    )
    config_class: ClassVar[type] = AdaptiveMGConfig

    def __init__(self, config: AdaptiveMGConfig | None = None, device: torch.device | str = "cpu") -> None:
        super().__init__(config or AdaptiveMGConfig(), device)

    @classmethod
    def options_for_defence(cls, defence: Any) -> dict[str, Any]:
        """Against a FedReg release (plain or with MG) the attacker assumes its hyper-parameters (:data:`RELEASE_SETTINGS`);
        against any other defence, none."""
        if not isinstance(defence, FedRegMGRelease):
            return {}
        return {key: getattr(defence, key) for key in RELEASE_SETTINGS}

    simulates_runs: ClassVar[str | None] = "FedReg runs"

    @classmethod
    def options_for_run(cls, algorithm: str, algorithm_options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A checkpoint of a FedReg run: the run's own γ, η_s, η_p, E, clamp and MG switch (:data:`RUN_DEFAULTS` where its
        recipe leaves one out). For a run that is not FedReg the attacker falls back to FedReg-with-MG defaults, which
        the returned note says."""
        if algorithm not in ("fedreg", "fedreg-mg"):
            return {}, [f"algorithm {algorithm} is not FedReg: the adaptive-mg attacker simulates FedReg with MG at its defaults"]
        opts = {**RUN_DEFAULTS, **{k: v for k, v in algorithm_options.items() if k in RUN_DEFAULTS}}
        return {
            "gamma": float(opts["fedreg_gamma"]),
            "pseudo_step": float(opts["fedreg_eta_s"]),
            "perturb_step": None if opts["fedreg_eta_p"] is None else float(opts["fedreg_eta_p"]),
            "fgsm_steps": int(opts["fgsm_steps"]),
            "clamp_fgsm": opts["fgsm_clamp"] != "none",
            "use_modified_gradient": algorithm == "fedreg-mg",
        }, []

    def simulator(self, payload: InversionPayload) -> ClientSimulator:
        return fedreg_simulator(payload, self.config, self.device)

    def _run(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> InversionResult:
        cfg: AdaptiveMGConfig = self.config
        if cfg.start == "random" and cfg.smooth_temperature == 0 and not cfg.keep_best_iterate:
            return super()._run(payload, model, generator)  # Inverting Gradients' loop, unchanged
        return self._run_continuation(payload, model, generator)

    def _analytic_start(self, payload: InversionPayload, model: FunctionalModel, seed: int) -> torch.Tensor:
        """The closed-form first-layer recovery from the released update, in the model's dtype (raises on models
        whose first trainable layer is not fully connected)."""
        cfg: AdaptiveMGConfig = self.config
        seeded = AnalyticAttack(AnalyticConfig(label_strategy=cfg.label_strategy), self.device).reconstruct(payload, seed=seed)
        return seeded.images.to(self.device, model.dtype)

    def _run_continuation(
        self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator
    ) -> InversionResult:
        """IG's signed-Adam descent with the options of :class:`AdaptiveMGConfig` (start, continuation, best iterate)."""
        cfg: AdaptiveMGConfig = self.config
        simulator = self.simulator(payload)
        check_update_kind(payload, simulator)
        seed_start = (
            self._analytic_start(payload, model, int(torch.randint(2**31 - 1, (1,), generator=generator)))
            if cfg.start == "analytic" else None
        )
        problem = self.matching_problem(payload, model, generator)
        labels, rule, targets, target_update = problem.labels, problem.label_rule, problem.targets, problem.target_update
        distance, box, shape = problem.distance, problem.box, problem.shape
        smooth_model, temperature = smoothed_copy(model) if cfg.smooth_temperature > 0 else (model, None)
        anneal = round(cfg.smooth_fraction * cfg.iterations) if temperature is not None else 0

        def exact_loss(x: torch.Tensor) -> float:
            if temperature is not None:
                temperature.value = 0.0
            return float(self.matching_loss(simulator, model, x, targets, target_update, distance).detach())

        best: tuple[float, torch.Tensor, list[float], int] | None = None
        restart_losses, restart_starts = [], []
        for restart in range(cfg.restarts):
            x = torch.randn(shape, generator=generator, device=self.device, dtype=model.dtype)
            if restart == 0 and seed_start is not None:
                x = seed_start.reshape(shape).clone()
            restart_starts.append("analytic" if restart == 0 and seed_start is not None else "random")
            if box is not None:
                x = torch.maximum(torch.minimum(x, box[1]), box[0])
            x.requires_grad_(True)
            optimizer = torch.optim.Adam([x], lr=cfg.lr)
            scheduler = (torch.optim.lr_scheduler.MultiStepLR(optimizer, step_milestones(cfg.iterations), gamma=0.1)
                         if cfg.lr_schedule else None)
            # the trace starts with the exact matching loss (under continuation the loop's values are the surrogate's), the
            # reference the optimisation's status is judged against (attacks.inversion.convergence)
            trace: list[float] = [] if temperature is None else [exact_loss(x)]
            kept: tuple[float, torch.Tensor, int] | None = None
            for iteration in range(cfg.iterations):
                tau = annealed_temperature(cfg.smooth_temperature, iteration, anneal)
                if temperature is not None:
                    temperature.value = tau
                matching = self.matching_loss(simulator, smooth_model if tau > 0 else model, x, targets, target_update,
                                              distance)
                objective = matching + cfg.tv_weight * total_variation(x) if cfg.tv_weight > 0 else matching
                (grad,) = torch.autograd.grad(objective, x)
                if cfg.keep_best_iterate and tau == 0 and (kept is None or float(matching.detach()) < kept[0]):
                    kept = (float(matching.detach()), x.detach().clone(), iteration)
                descent_step(x, grad, optimizer, scheduler, box, signed=cfg.signed)
                if iteration % cfg.trace_every == 0 and (iteration > 0 or temperature is None):
                    trace.append(float(matching.detach()))
            final = exact_loss(x)
            trace.append(final)
            chosen = (final, x.detach().clone(), cfg.iterations)
            if kept is not None and kept[0] < finite_loss(final):
                chosen = kept
            restart_losses.append(chosen[0])
            if best is None or finite_loss(chosen[0]) < finite_loss(best[0]):  # a diverged restart never wins
                best = (chosen[0], chosen[1], trace, chosen[2])
        assert best is not None
        notes = {
            **self.restart_notes(rule, simulator, restart_losses),
            "restart_starts": restart_starts,
            "continuation": ({"surrogate": "softplus-smoothed (Leaky)ReLU", "temperature_start": cfg.smooth_temperature,
                              "temperature_end": cfg.smooth_temperature * 1e-3, "annealed_iterations": anneal,
                              "exact_iterations": cfg.iterations - anneal} if temperature is not None else None),
            "returned_iterate": best[3],
        }
        return InversionResult(attack=self.name, images=best[1].to(torch.float32).cpu(), labels=labels.cpu(),
                               settings=notes, matching_loss=best[0], loss_trace=best[2])


def naive_and_adaptive(
    payload: InversionPayload,
    config: AdaptiveMGConfig,
    *,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> dict[str, InversionResult]:
    """Run the FedAvg-assuming ("naive") and the FedReg-simulating ("adaptive") attack with the same
    optimisation settings and seed; keys ``"naive"`` and ``"adaptive"``."""
    ig_fields = {f.name for f in fields(InvertingGradientsConfig)}
    naive_config = InvertingGradientsConfig(**{k: getattr(config, k) for k in ig_fields})
    return {
        "naive": InvertingGradientsAttack(naive_config, device).reconstruct(payload, seed=seed),
        "adaptive": AdaptiveMGAttack(config, device).reconstruct(payload, seed=seed),
    }
