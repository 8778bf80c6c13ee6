"""Inverting Gradients' descent on the candidate inputs: its step and its learning-rate schedule.

Geiping, Bauermeister, Dröge, Moeller, "Inverting Gradients — How easy is it to break privacy in federated
learning?", NeurIPS 2020, §4: Adam on the *signed* gradient, the learning rate ×0.1 at 3/8, 5/8 and 7/8 of the
iterations, and a box constraint projecting the candidates back onto the data range after every step. Shared by the
one-by-one attack (:mod:`attacks.inversion.inverting_gradients`), its lanes (:mod:`attacks.inversion.batched`) and
the attacks built on its loop (plug-ins included).
"""

from __future__ import annotations

import torch


def step_milestones(iterations: int) -> list[int]:
    """Iterations at which the learning rate drops ×0.1: 3/8, 5/8 and 7/8 of the run (Geiping et al.)."""
    return sorted({max(1, int(iterations * f)) for f in (3 / 8, 5 / 8, 7 / 8)})


def descent_step(x: torch.Tensor, gradient: torch.Tensor, optimizer, scheduler, box, *, signed: bool) -> None:
    """One step of IG's descent on the dummy images ``x``: Adam on the (signed) gradient, the step schedule, and the
    projection onto the data range ``box`` (Geiping et al. 2020, §4: signed gradients, box constraint)."""
    x.grad = gradient.sign() if signed else gradient
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    if box is not None:
        with torch.no_grad():
            x.copy_(torch.maximum(torch.minimum(x, box[1]), box[0]))
