"""L-BFGS for gradient matching: best-iterate tracking, memory restarts, fresh starts on a step budget.

Gradient-matching losses of ReLU-type networks are only piecewise smooth in the inputs: the backward pass
multiplies by the activation's derivative, which jumps where a pre-activation changes sign, so the matched
update (and the loss) jumps too. Near a solution the loss grows roughly linearly with the distance, and
L-BFGS's curvature pairs taken across such jumps are meaningless. Hence:

* torch's fixed-step L-BFGS (no line search) as in DLG and breaching's ``deep-leakage`` attack; it is not
  monotone, so every evaluated candidate is offered to :class:`BestIterate` and the lowest-loss one is kept
  (breaching keeps its best iterate the same way,
  JonasGeiping/breaching@0897c94:breaching/attacks/optimization_with_label_attack.py);
* an outer step that ends in a non-finite loss, or stops after at most two evaluations (no descent
  direction, or changes below the tolerances), restarts the L-BFGS memory from the best iterate;
* a descent ends when that happens twice without a better iterate (``"stalled"``), when its best loss has
  not improved for ``patience`` outer steps (``"no progress"``), or when its budget of outer steps is
  spent (``"steps"``). :func:`descend_with_fresh_starts` then starts another descent from a new random
  start while the budget lasts, unless a descent has already reached the ``solved`` loss.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from privaudit.errors import InvalidParameterError

from .limits import MAX_ITERATIONS, count, finite, learning_rate


@dataclass(frozen=True)
class LBFGSSettings:
    """torch.optim.LBFGS arguments (``max_iter`` = iterations per outer step) plus the descent's patience."""

    lr: float = 0.25
    max_iter: int = 20
    history_size: int = 100
    line_search: bool = False
    tolerance_grad: float = 1e-7
    tolerance_change: float = 1e-9
    patience: int | None = 25

    def __post_init__(self) -> None:  # ranges: attacks.inversion.limits
        learning_rate("L-BFGS lr", self.lr)
        count("L-BFGS inner iterations (max_inner_iterations)", self.max_iter, 1, MAX_ITERATIONS)
        count("L-BFGS history size", self.history_size, 1, MAX_ITERATIONS)
        finite("L-BFGS tolerance_grad", self.tolerance_grad, positive=False)
        finite("L-BFGS tolerance_change", self.tolerance_change, positive=False)
        if self.patience is not None:
            count("patience (outer steps, or none)", self.patience, 1, MAX_ITERATIONS)
        if not isinstance(self.line_search, bool):
            raise InvalidParameterError(f"line_search must be true or false, got {self.line_search!r}")

    def optimizer(self, variables: list[torch.Tensor]) -> torch.optim.LBFGS:
        return torch.optim.LBFGS(
            variables,
            lr=self.lr,
            max_iter=self.max_iter,
            history_size=self.history_size,
            tolerance_grad=self.tolerance_grad,
            tolerance_change=self.tolerance_change,
            line_search_fn="strong_wolfe" if self.line_search else None,
        )

    def record(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["line_search_fn"] = "strong_wolfe" if record.pop("line_search") else None
        return {"name": "L-BFGS", **record}


class NonFiniteLoss(Exception):
    """Raised inside the L-BFGS closure when a step leaves the finite range."""


class BestIterate:
    """The evaluated values of the variables with the lowest loss, and how many evaluations there were."""

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


@dataclass
class Descent:
    """One run from one start: its best iterate, the loss at each outer step, how it ended."""

    best: BestIterate
    trace: list[float]
    stopped: str
    memory_restarts: int
    steps: int


def descend(
    variables: list[torch.Tensor], objective: Callable[[], torch.Tensor], settings: LBFGSSettings, budget: int
) -> Descent:
    """At most ``budget`` outer L-BFGS steps on ``objective`` over ``variables`` (see the module docstring)."""
    best = BestIterate()
    optimizer = settings.optimizer(variables)

    def closure() -> torch.Tensor:
        loss = objective()
        grads = torch.autograd.grad(loss, variables)
        for variable, grad in zip(variables, grads, strict=True):
            variable.grad = grad
        value = loss.detach()
        best.offer(value.item(), variables)
        if not torch.isfinite(value):
            raise NonFiniteLoss
        return value

    trace: list[float] = []
    stopped, restarts, loss_at_restart = "steps", 0, float("nan")
    last_improvement, best_seen, steps = 0, float("inf"), 0
    for step in range(budget):
        steps += 1
        evaluations = best.evaluations
        try:
            trace.append(float(optimizer.step(closure)))
            progressed = best.evaluations - evaluations > 2
        except NonFiniteLoss:
            progressed = False
        if best.loss < best_seen:
            last_improvement, best_seen = step, best.loss
        elif settings.patience is not None and step - last_improvement >= settings.patience:
            stopped = "no progress"
            break
        if progressed:
            continue
        if not best.values or best.loss == loss_at_restart:
            stopped = "stalled" if best.values else "non-finite loss"
            break
        with torch.no_grad():
            for variable, value in zip(variables, best.values, strict=True):
                variable.copy_(value)
        optimizer, restarts, loss_at_restart = settings.optimizer(variables), restarts + 1, best.loss
    return Descent(best, trace, stopped, restarts, steps)


def descend_with_fresh_starts(
    start: Callable[[], list[torch.Tensor]],
    objective: Callable[[list[torch.Tensor]], torch.Tensor],
    settings: LBFGSSettings,
    steps: int,
    solved: float,
) -> list[Descent]:
    """Descents from successive ``start()`` values until ``steps`` outer steps are spent or a descent's
    best loss is at most ``solved`` (that descent still runs to its own end)."""
    descents: list[Descent] = []
    used = 0
    while used < steps and not any(d.best.loss <= solved for d in descents):
        variables = start()
        descents.append(descend(variables, lambda v=variables: objective(v), settings, steps - used))
        used += descents[-1].steps
    return descents
