"""Deep Leakage from Gradients (Zhu, Liu, Han, NeurIPS 2019), with iDLG labels (Zhao et al. 2020).

Minimise Σ_layers ‖U(x, y) − U*‖² (eq. 4 of DLG) with L-BFGS over dummy inputs x. Labels:

* ``label_strategy="auto"`` (default) — the true labels when the threat model leaks them (only x is
  optimised); otherwise inferred analytically from the logit layer's update before the optimisation
  (iDLG for one example, bias-corrected counts for a batch: :func:`attacks.inversion.labels.infer_labels`);
  if the model has no final linear logit layer to read them from, jointly optimised as in DLG.
* ``"joint"`` — DLG's original form: dummy labels y = softmax(ℓ) with free logits ℓ optimised with x.
  It refuses a payload whose labels are known (it would ignore them, as breaching's joint attacker does).
* ``"given"``, ``"idlg"``, ``"bias-corrected"`` — that rule only.

The result's ``settings`` record the rule actually used (``label_strategy``), the one asked for
(``label_strategy_requested``) and the optimiser's settings (``optimizer``).

Optimiser: torch's L-BFGS, ``steps`` calls of ``LBFGS.step`` with ``max_inner_iterations`` iterations
each. The default is the fixed-step form of the DLG script and breaching's ``deep-leakage`` attack (lr 1,
20 inner iterations, history 100, no line search; JonasGeiping/breaching@3e4d336:
breaching/config/attack/deepleakage.yaml, breaching/common.py ``optimizer_lookup``). Fixed steps are not
monotone, so every evaluated candidate is tracked and the one with the lowest matching loss is returned
(breaching keeps its best iterate the same way); a step that produces a non-finite loss ends the run.
``line_search=True`` switches on torch's strong-Wolfe line search: monotone, but on ReLU-type ConvNets
it stalls in the first basin it finds (8.9 dB on privaudit's ``convnet`` where the fixed-step run
reaches over 40 dB). Candidates are not box-constrained (as in DLG); ``clamp_final`` only clips the
returned images to the data range.
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
from .objectives import get_distance
from .threat_model import InversionPayload, InversionResult

LABEL_STRATEGIES: tuple[str, ...] = ("auto", "joint", "given", "idlg", "bias-corrected")


@dataclass(frozen=True)
class DLGConfig:
    steps: int = 300
    lr: float = 1.0
    max_inner_iterations: int = 20
    history_size: int = 100
    line_search: bool = False
    tolerance_grad: float = 1e-7
    tolerance_change: float = 1e-9
    label_strategy: str = "auto"
    distance: str = "l2"
    init: str = "randn"
    precision: str = "float32"
    clamp_final: bool = True

    def __post_init__(self) -> None:
        if self.steps < 1 or self.max_inner_iterations < 1 or self.history_size < 1:
            raise InvalidParameterError("DLG steps, inner iterations and history size must be at least 1")
        if not self.lr > 0:
            raise InvalidParameterError(f"DLG lr must be positive, got {self.lr}")
        if self.tolerance_grad < 0 or self.tolerance_change < 0:
            raise InvalidParameterError("DLG tolerances must be non-negative")
        if self.label_strategy not in LABEL_STRATEGIES:
            raise InvalidParameterError(
                f"unknown DLG label strategy {self.label_strategy!r}; choose {', '.join(LABEL_STRATEGIES)}"
            )
        get_distance(self.distance)
        if self.init not in ("randn", "uniform"):
            raise InvalidParameterError(f"unknown DLG init {self.init!r}; choose randn or uniform")

    def optimizer_record(self) -> dict[str, Any]:
        """The L-BFGS settings as run (torch.optim.LBFGS argument names)."""
        return {
            "name": "L-BFGS",
            "outer_steps": self.steps,
            "lr": self.lr,
            "max_iter": self.max_inner_iterations,
            "history_size": self.history_size,
            "line_search_fn": "strong_wolfe" if self.line_search else None,
            "tolerance_grad": self.tolerance_grad,
            "tolerance_change": self.tolerance_change,
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


class NonFiniteLoss(Exception):
    """Raised inside the L-BFGS closure to end the run when a step leaves the finite range."""


class BestIterate:
    """The evaluated candidate (inputs and, when jointly optimised, label logits) with the lowest loss."""

    def __init__(self) -> None:
        self.loss = float("inf")
        self.values: list[torch.Tensor] = []
        self.evaluation = -1
        self.evaluations = 0

    def offer(self, loss: float, variables: list[torch.Tensor]) -> None:
        self.evaluations += 1
        if loss < self.loss:  # never true for NaN
            self.loss = loss
            self.values = [v.detach().clone() for v in variables]
            self.evaluation = self.evaluations


class DLGAttack(InversionAttack):
    """L2 gradient matching with L-BFGS; known, inferred or jointly optimised labels; best iterate."""

    name: ClassVar[str] = "dlg"
    description: ClassVar[str] = (
        "Deep Leakage from Gradients: L2 matching with L-BFGS; known or iDLG-inferred labels, else joint"
    )

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
        x = initial_candidates(payload, count, cfg.init, generator, model).requires_grad_(True)
        variables = [x]
        if plan.targets is None:
            logits = torch.randn((count, num_classes), generator=generator, device=model.device, dtype=model.dtype)
            variables.append(logits.requires_grad_(True))
        optimizer = torch.optim.LBFGS(
            variables,
            lr=cfg.lr,
            max_iter=cfg.max_inner_iterations,
            history_size=cfg.history_size,
            tolerance_change=cfg.tolerance_change,
            tolerance_grad=cfg.tolerance_grad,
            line_search_fn="strong_wolfe" if cfg.line_search else None,
        )

        def targets(values: list[torch.Tensor]) -> torch.Tensor:
            return plan.targets if plan.targets is not None else torch.softmax(values[1], dim=-1)

        best = BestIterate()

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = distance(simulator.simulate(model, x, targets(variables), create_graph=True), target_update)
            grads = torch.autograd.grad(loss, variables)
            for variable, grad in zip(variables, grads, strict=True):
                variable.grad = grad
            value = loss.detach()
            best.offer(value.item(), variables)
            if not torch.isfinite(value):
                raise NonFiniteLoss
            return value

        trace: list[float] = []
        stopped = "steps"
        for _ in range(cfg.steps):
            try:
                trace.append(float(optimizer.step(closure)))
            except NonFiniteLoss:
                stopped = "non-finite loss"
                break
        if not best.values:
            raise InvalidParameterError("DLG found no candidate with a finite matching loss")
        images = best.values[0]
        if cfg.clamp_final:
            low, high = payload.data.box(self.device)
            images = torch.maximum(torch.minimum(images, high), low)
        out_labels = targets(best.values).argmax(dim=-1)
        notes: dict[str, Any] = {
            "label_strategy": plan.rule,
            "label_strategy_requested": cfg.label_strategy,
            "labels_paired": True,
            "client_model": simulator.describe(),
            "optimizer": cfg.optimizer_record(),
            "function_evaluations": best.evaluations,
            "best_evaluation": best.evaluation,
            "stopped": stopped,
        }
        if plan.note is not None:
            notes["label_note"] = plan.note
        return InversionResult(
            attack=self.name,
            images=images.to(torch.float32).cpu(),
            labels=out_labels.cpu(),
            settings=notes,
            matching_loss=best.loss,
            loss_trace=trace,
        )
