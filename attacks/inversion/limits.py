"""The ranges an inversion attack's settings must lie in, checked when its configuration is built.

A setting outside them never runs: an infinite learning rate or a NaN prior weight used to send every candidate to
a corner of the data box and return 5.7–8.5 dB reconstructions that read as a defence's effect, and
``iterations = 10**12`` ran forever. Each configuration dataclass (:mod:`attacks.inversion.registry`) checks its
fields with these functions in ``__post_init__``, so the Python API, ``--option KEY=VALUE`` and every other flag
of ``privaudit attack inversion`` refuse the same values with one :class:`~privaudit.errors.InvalidParameterError`
line, before any data loads.

Limits (``privaudit attack inversion --option`` names them in its error line):

* optimiser iterations (Inverting Gradients, adaptive MG) and L-BFGS outer steps (DLG): 1 … :data:`MAX_ITERATIONS`
  (10⁶, 40× the reference code's 24,000); DLG's matching-loss evaluations (outer steps × inner iterations) at most
  :data:`MAX_EVALUATIONS`;
* restarts: 1 … :data:`MAX_RESTARTS`;
* learning rates: > 0 and at most :data:`MAX_LR` (10⁶; the candidates live in a data box a few units wide, and torch's
  Adam overflows float32 near lr = 10³⁸, a traceback instead of an answer); other step sizes: finite and ≥ 0; prior and
  regulariser weights: finite and ≥ 0 (> 0 where 0 would switch the term off unannounced); tolerances: finite and ≥ 0.
"""

from __future__ import annotations

import math
from typing import Any

from privaudit.errors import InvalidParameterError

#: Most optimiser iterations (or L-BFGS outer steps) one attack may run.
MAX_ITERATIONS = 1_000_000
#: Most matching-loss evaluations of one DLG attack (outer steps × L-BFGS iterations per step).
MAX_EVALUATIONS = 10_000_000
#: Most restarts (independent starting points) of one attack.
MAX_RESTARTS = 1000
#: Largest optimiser learning rate.
MAX_LR = 1e6


def count(name: str, value: Any, low: int, high: int) -> int:
    """An int (never a bool or a float) in [``low``, ``high``]."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidParameterError(f"{name} must be an integer in [{low:,}, {high:,}], got {value!r}")
    return value


def finite(name: str, value: Any, *, positive: bool) -> float:
    """A finite number, > 0 (``positive``) or ≥ 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidParameterError(f"{name} must be a finite number, got {value!r}")
    if positive and not value > 0:
        raise InvalidParameterError(f"{name} must be positive, got {value!r}")
    if not positive and not value >= 0:
        raise InvalidParameterError(f"{name} must be non-negative, got {value!r}")
    return float(value)


def learning_rate(name: str, value: Any) -> float:
    """A learning rate: finite, > 0 and at most :data:`MAX_LR`."""
    rate = finite(name, value, positive=True)
    if rate > MAX_LR:
        raise InvalidParameterError(f"{name} must be at most {MAX_LR:g}, got {value!r}")
    return rate
