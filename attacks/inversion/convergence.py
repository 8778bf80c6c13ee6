"""Did an attack's optimisation do its job? One status per attack run, so that a broken attack never reads as privacy.

A reconstruction's PSNR measures a defence only when the attack's optimisation worked: an optimiser that left the
finite range, or that never descended, returns images whose low PSNR says nothing about the defence. Every
:class:`~attacks.inversion.threat_model.InversionResult` carries a status, judged from what every optimising attack
records — its matching-loss trace (first entry: the loss at the starting point), its final matching loss (the
returned iterate's) and its images:

* ``ok`` — the final matching loss is finite and below the starting one;
* ``diverged`` — the final matching loss or a returned pixel is not finite: the optimisation left the finite range
  (e.g. a learning rate or prior weight far too large);
* ``no-progress`` — the final matching loss is not below the starting one: the descent did not decrease the
  objective's matching term (e.g. every signed-Adam step threw the candidates to the corners of the data box);
* ``closed-form`` — the attack does not optimise (``analytic``, ``label``, ``imprint``: no loss trace).

:data:`FLAGGED` statuses are kept in the result files and shown beside each image's PSNR, but they are excluded
from every summary that reads as a defence's strength (mean/median PSNR and SSIM), which say how many images they
exclude (:func:`attacks.inversion.experiment.attack_and_score`, ``privaudit attack inversion``, the report).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

OK = "ok"
DIVERGED = "diverged"
NO_PROGRESS = "no-progress"
CLOSED_FORM = "closed-form"
#: Statuses whose images are excluded from PSNR/SSIM summaries.
FLAGGED: tuple[str, ...] = (DIVERGED, NO_PROGRESS)


def optimisation_status(trace: Sequence[float], final_loss: float | None,
                        images: torch.Tensor | None) -> tuple[str, str | None]:
    """``(status, reason)`` of one attack run (see the module docstring); ``reason`` is ``None`` for ``ok`` and
    ``closed-form``."""
    if not trace:
        return CLOSED_FORM, None
    start = float(trace[0])
    final = start if final_loss is None else float(final_loss)
    if images is not None and not bool(torch.isfinite(images).all()):
        bad = int((~torch.isfinite(images)).sum())
        return DIVERGED, f"{bad} of {images.numel()} reconstructed values are not finite"
    if not math.isfinite(final):
        return DIVERGED, f"the final matching loss is {final}"
    if not math.isfinite(start):
        return OK, None  # a start outside the finite range that the descent left: it descended
    if not final < start:
        return NO_PROGRESS, f"the final matching loss {final:.4g} is not below the starting {start:.4g}"
    return OK, None


def finite_loss(loss: float) -> float:
    """``loss``, with NaN as +∞: a sort key under which a diverged restart never beats a finite one."""
    return loss if not math.isnan(loss) else math.inf
