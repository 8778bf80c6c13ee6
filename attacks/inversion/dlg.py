"""Deep Leakage from Gradients (Zhu, Liu, Han, NeurIPS 2019).

Minimise Σ_layers ‖U(x, y) − U*‖² (eq. 4 of the paper) with L-BFGS over dummy inputs x and, in the
original *joint* form, dummy labels y = softmax(ℓ) with free logits ℓ. With ``label_strategy`` other
than ``"joint"`` the labels are fixed first (given, or inferred by iDLG / bias-corrected counts), which
is iDLG (Zhao et al. 2020) and converges much faster.

The original script runs 300 ``LBFGS.step`` calls with torch's defaults (lr 1, 20 inner iterations, no
line search); ``line_search`` switches on torch's strong-Wolfe line search, which makes each outer step
safe at lr 1 and is what privaudit's benchmark uses. Candidates are not box-constrained (as in DLG);
``clamp_final`` only clips the returned images to the data range.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from privaudit.errors import InvalidParameterError

from .base import InversionAttack
from .client_simulation import ClientSimulator, plain_simulator
from .functional_model import FunctionalModel, one_hot
from .inverting_gradients import check_update_kind, prepare_target
from .labels import infer_labels, uniform_in_box
from .objectives import get_distance
from .threat_model import InversionPayload, InversionResult


@dataclass(frozen=True)
class DLGConfig:
    steps: int = 300
    lr: float = 1.0
    max_inner_iterations: int = 20
    history_size: int = 100
    line_search: bool = True
    tolerance_grad: float = 1e-7
    tolerance_change: float = 1e-9
    label_strategy: str = "joint"
    distance: str = "l2"
    init: str = "randn"
    precision: str = "float32"
    clamp_final: bool = True

    def __post_init__(self) -> None:
        if self.steps < 1 or self.max_inner_iterations < 1 or self.history_size < 1:
            raise InvalidParameterError("DLG steps, inner iterations and history size must be at least 1")
        if not self.lr > 0:
            raise InvalidParameterError(f"DLG lr must be positive, got {self.lr}")
        if self.label_strategy not in ("joint", "auto", "given", "idlg", "bias-corrected"):
            raise InvalidParameterError(
                f"unknown DLG label strategy {self.label_strategy!r}; choose joint, auto, given, idlg or bias-corrected"
            )
        get_distance(self.distance)
        if self.init not in ("randn", "uniform"):
            raise InvalidParameterError(f"unknown DLG init {self.init!r}; choose randn or uniform")


def initial_candidates(
    payload: InversionPayload, count: int, init: str, generator: torch.Generator, model: FunctionalModel
) -> torch.Tensor:
    """Dummy inputs: standard normal in model space (DLG) or uniform over the data range's box."""
    if init == "randn":
        return torch.randn((count, *payload.data.shape), generator=generator, device=model.device, dtype=model.dtype)
    return uniform_in_box(payload, count, generator, model)


class DLGAttack(InversionAttack):
    """L2 gradient matching with L-BFGS; joint label optimisation or fixed (inferred/given) labels."""

    name: ClassVar[str] = "dlg"
    description: ClassVar[str] = "Deep Leakage from Gradients: L2 matching with L-BFGS, joint or inferred labels"

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
        x = initial_candidates(payload, count, cfg.init, generator, model).requires_grad_(True)
        variables = [x]
        label_logits: torch.Tensor | None = None
        fixed_targets: torch.Tensor | None = None
        if cfg.label_strategy == "joint":
            label_logits = torch.randn(
                (count, num_classes), generator=generator, device=self.device, dtype=model.dtype
            ).requires_grad_(True)
            variables.append(label_logits)
            rule = "joint"
        else:
            labels, rule = infer_labels(payload, model, generator, cfg.label_strategy)
            fixed_targets = one_hot(labels, num_classes).to(self.device, model.dtype)
        optimizer = torch.optim.LBFGS(
            variables,
            lr=cfg.lr,
            max_iter=cfg.max_inner_iterations,
            history_size=cfg.history_size,
            tolerance_change=cfg.tolerance_change,
            tolerance_grad=cfg.tolerance_grad,
            line_search_fn="strong_wolfe" if cfg.line_search else None,
        )

        def targets() -> torch.Tensor:
            return torch.softmax(label_logits, dim=-1) if label_logits is not None else fixed_targets  # type: ignore[return-value]

        def closure() -> torch.Tensor:
            optimizer.zero_grad()
            loss = distance(simulator.simulate(model, x, targets(), create_graph=True), target_update)
            grads = torch.autograd.grad(loss, variables)
            for variable, grad in zip(variables, grads, strict=True):
                variable.grad = grad
            return loss.detach()

        trace: list[float] = []
        evaluations = 0
        for _ in range(cfg.steps):
            loss = optimizer.step(closure)
            trace.append(float(loss))
            evaluations = optimizer.state[x].get("func_evals", evaluations)
            if not torch.isfinite(loss):
                break
        final = float(distance(simulator.simulate(model, x, targets(), create_graph=True), target_update).detach())
        images = x.detach()
        if cfg.clamp_final:
            low, high = payload.data.box(self.device)
            images = torch.maximum(torch.minimum(images, high), low)
        out_labels = targets().detach().argmax(dim=-1)
        notes = {
            "label_strategy": rule,
            "labels_paired": True,
            "client_model": simulator.describe(),
            "function_evaluations": int(evaluations),
        }
        return InversionResult(
            attack=self.name,
            images=images.to(torch.float32).cpu(),
            labels=out_labels.cpu(),
            settings=notes,
            matching_loss=final,
            loss_trace=trace,
        )
