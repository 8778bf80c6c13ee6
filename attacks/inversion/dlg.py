"""Deep Leakage from Gradients (Zhu, Liu, Han, NeurIPS 2019), with iDLG labels (Zhao et al. 2020).

Minimise Σ_layers ‖U(x, y) − U*‖² (eq. 4 of DLG) with L-BFGS over dummy inputs x. Labels:

* ``label_strategy="auto"`` (default) — the true labels when the threat model leaks them (only x is
  optimised); otherwise inferred analytically from the logit layer's update before the optimisation
  (iDLG for one example, bias-corrected counts for a batch: :func:`attacks.inversion.labels.infer_labels`);
  if the model has no final linear logit layer to read them from, optimised jointly as in DLG.
* ``"joint"`` — DLG's original form: dummy labels y = softmax(ℓ) with free logits ℓ optimised with x.
  It refuses a payload whose labels are known (it would ignore them; breaching's joint attacker refuses too).
* ``"given"``, ``"idlg"``, ``"bias-corrected"`` — that rule only.

The result's ``settings`` record the rule used (``label_strategy``), the one asked for
(``label_strategy_requested``) and the optimiser's settings (``optimizer``).

Optimiser (:mod:`attacks.inversion.lbfgs_descent`): torch's L-BFGS without line search, as in the DLG
script and breaching's ``deep-leakage`` attack (20 iterations per outer step, history 100;
JonasGeiping/breaching@3e4d336:breaching/config/attack/deepleakage.yaml,
JonasGeiping/breaching@891f01d:breaching/common.py ``optimizer_lookup``), returning the evaluated candidate with the lowest matching loss, restarting the
L-BFGS memory after a non-finite or stalled step, and starting afresh from a new random candidate when a
descent has not improved for ``patience`` outer steps, until ``steps`` outer steps are spent or a descent
has brought the loss below ``solved_relative_loss`` × ‖U*‖². Step size 0.25 instead of DLG's 1: on the
small LeakyReLU CNN of privaudit's tests (20 single-image FedSGD updates) 19 of 20 reconstructions reach
40 dB with 0.25 and 17 of 20 with 1. ``line_search=True`` switches on torch's strong-Wolfe line search, which is monotone but
stalls at the loss's jumps on ReLU-type networks (the jumps: :mod:`attacks.inversion.lbfgs_descent`); it
suits smooth networks such as DLG's sigmoid LeNet. On privaudit's 140k-parameter ``convnet`` (six LeakyReLU
convolutions), single-image FedSGD updates of lfw faces (25×25 grey), labels inferred by iDLG, 150 outer steps:
45.96 / 41.65 / 40.10 / 50.88 dB (Inverting Gradients, 300 iterations, on the same four updates: 31.89 / 40.34 /
39.18 / 30.42 dB; ``privaudit attack inversion --dataset lfw --model convnet --defense fedsgd --attack dlg|ig
--images 4``; ``tests/attacks/test_quality_targets.py``). On 32×32 colour images (scikit-image samples) the same
network stalls near 25 dB in 300 outer steps whatever the form (Inverting Gradients' cosine + TV + box: 28–32 dB). Candidates are not box-constrained (as in DLG);
``clamp_final`` only clips the returned images to the data range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from privaudit.errors import InvalidParameterError

from .base import InversionAttack
from .client_simulation import ClientSimulator, plain_simulator
from .functional_model import FunctionalModel, one_hot
from .inverting_gradients import check_update_kind, prepare_target
from .labels import infer_labels, uniform_in_box
from .lbfgs_descent import LBFGSSettings, descend_with_fresh_starts
from .limits import MAX_EVALUATIONS, MAX_ITERATIONS, count, finite
from .objectives import get_distance
from .threat_model import InversionPayload, InversionResult

LABEL_STRATEGIES: tuple[str, ...] = ("auto", "joint", "given", "idlg", "bias-corrected")


@dataclass(frozen=True)
class DLGConfig:
    steps: int = 300
    lr: float = 0.25
    max_inner_iterations: int = 20
    history_size: int = 100
    line_search: bool = False
    tolerance_grad: float = 1e-7
    tolerance_change: float = 1e-9
    patience: int | None = 25
    solved_relative_loss: float = 1e-8
    label_strategy: str = "auto"
    distance: str = "l2"
    init: str = "randn"
    precision: str = "float32"
    clamp_final: bool = True

    def __post_init__(self) -> None:  # ranges: attacks.inversion.limits
        count("DLG steps", self.steps, 1, MAX_ITERATIONS)
        self.lbfgs()  # validates the optimiser's settings
        if self.steps * self.max_inner_iterations > MAX_EVALUATIONS:
            raise InvalidParameterError(f"DLG steps × max_inner_iterations must be at most {MAX_EVALUATIONS:,} matching-loss "
                                        f"evaluations, got {self.steps} × {self.max_inner_iterations}")
        finite("DLG solved_relative_loss", self.solved_relative_loss, positive=False)
        if self.label_strategy not in LABEL_STRATEGIES:
            raise InvalidParameterError(
                f"unknown DLG label strategy {self.label_strategy!r}; choose {', '.join(LABEL_STRATEGIES)}"
            )
        get_distance(self.distance)
        if self.init not in ("randn", "uniform"):
            raise InvalidParameterError(f"unknown DLG init {self.init!r}; choose randn or uniform")

    def lbfgs(self) -> LBFGSSettings:
        return LBFGSSettings(
            lr=self.lr,
            max_iter=self.max_inner_iterations,
            history_size=self.history_size,
            line_search=self.line_search,
            tolerance_grad=self.tolerance_grad,
            tolerance_change=self.tolerance_change,
            patience=self.patience,
        )

    def optimizer_record(self) -> dict[str, Any]:
        """The optimiser's settings as run (torch.optim.LBFGS argument names)."""
        return {
            **self.lbfgs().record(),
            "outer_steps": self.steps,
            "solved_relative_loss": self.solved_relative_loss,
            "precision": self.precision,
        }


@dataclass(frozen=True)
class LabelPlan:
    """Fixed soft targets (one-hot labels) or ``None`` for joint optimisation, and the rule's name."""

    targets: torch.Tensor | None
    rule: str
    note: str | None = None


def plan_labels(
    payload: InversionPayload, model: FunctionalModel, generator: torch.Generator, strategy: str
) -> LabelPlan:
    """Resolve ``strategy`` (see the module docstring) into fixed targets or joint optimisation."""
    known = payload.knowledge.labels is not None
    if strategy == "joint":
        if known:
            raise InvalidParameterError(
                "DLG label strategy 'joint' would ignore the labels the attacker knows; use 'auto' or 'given'"
            )
        return LabelPlan(None, "joint")
    num_classes = payload.data.num_classes
    if strategy == "auto" and not known:
        try:
            labels, rule = infer_labels(payload, model, generator, "auto")
        except InvalidParameterError as exc:
            return LabelPlan(None, "joint", f"labels optimised jointly: no analytic inference ({exc})")
    else:
        labels, rule = infer_labels(payload, model, generator, strategy)
    return LabelPlan(one_hot(labels, num_classes).to(model.device, model.dtype), rule)


def initial_candidates(
    payload: InversionPayload, count: int, init: str, generator: torch.Generator, model: FunctionalModel
) -> torch.Tensor:
    """Dummy inputs: standard normal in model space (DLG) or uniform over the data range's box."""
    if init == "randn":
        return torch.randn((count, *payload.data.shape), generator=generator, device=model.device, dtype=model.dtype)
    return uniform_in_box(payload, count, generator, model)


class DLGAttack(InversionAttack):
    """L2 gradient matching with L-BFGS; known, inferred or jointly optimised labels; best iterate."""

    name: ClassVar[str] = "dlg"
    description: ClassVar[str] = (
        "Deep Leakage from Gradients: L2 matching with L-BFGS; known or iDLG-inferred labels, else joint"
    )
    config_class: ClassVar[type] = DLGConfig

    def __init__(self, config: DLGConfig | None = None, device: torch.device | str = "cpu") -> None:
        super().__init__(config or DLGConfig(), device)

    def simulator(self, payload: InversionPayload) -> ClientSimulator:
        return plain_simulator(payload.knowledge)

    def _run(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> InversionResult:
        cfg: DLGConfig = self.config
        simulator = self.simulator(payload)
        check_update_kind(payload, simulator)
        target_update = prepare_target(payload, model)
        distance = get_distance(cfg.distance)
        count, num_classes = payload.knowledge.num_examples, payload.data.num_classes
        plan = plan_labels(payload, model, generator, cfg.label_strategy)

        def targets(values: list[torch.Tensor]) -> torch.Tensor:
            return plan.targets if plan.targets is not None else torch.softmax(values[1], dim=-1)

        def start() -> list[torch.Tensor]:
            variables = [initial_candidates(payload, count, cfg.init, generator, model).requires_grad_(True)]
            if plan.targets is None:
                logits = torch.randn((count, num_classes), generator=generator, device=model.device, dtype=model.dtype)
                variables.append(logits.requires_grad_(True))
            return variables

        def objective(variables: list[torch.Tensor]) -> torch.Tensor:
            simulated = simulator.simulate(model, variables[0], targets(variables), create_graph=True)
            return distance(simulated, target_update)

        solved = cfg.solved_relative_loss * float(sum((t.double() ** 2).sum() for t in target_update.values()))
        descents = descend_with_fresh_starts(start, objective, cfg.lbfgs(), cfg.steps, solved)
        chosen = min(range(len(descents)), key=lambda i: descents[i].best.loss)
        best = descents[chosen].best
        if not best.values:
            raise InvalidParameterError("DLG found no candidate with a finite matching loss (try a smaller lr)")
        images = best.values[0]
        if cfg.clamp_final:
            low, high = payload.data.box(self.device)
            images = torch.maximum(torch.minimum(images, high), low)
        notes: dict[str, Any] = {
            "label_strategy": plan.rule,
            "label_strategy_requested": cfg.label_strategy,
            "labels_paired": True,
            "client_model": simulator.describe(),
            "optimizer": cfg.optimizer_record(),
            "function_evaluations": sum(d.best.evaluations for d in descents),
            "descents": [
                {"matching_loss": d.best.loss, "best_at_evaluation": d.best.evaluation, "evaluations": d.best.evaluations,
                 "outer_steps": d.steps, "stopped": d.stopped, "memory_restarts": d.memory_restarts}
                for d in descents
            ],
            "chosen_descent": chosen,
        }
        if plan.note is not None:
            notes["label_note"] = plan.note
        return InversionResult(
            attack=self.name,
            images=images.to(torch.float32).cpu(),
            labels=targets(best.values).argmax(dim=-1).cpu(),
            settings=notes,
            matching_loss=best.loss,
            loss_trace=descents[chosen].trace,
        )
