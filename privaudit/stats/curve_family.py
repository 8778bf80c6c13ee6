"""One-parameter families of trade-off curves that a one-run f-DP audit can test, and curves from privacy profiles.

The f-DP one-run audit (Mahloujifar, Melis & Chaudhuri 2024, "Auditing f-differential privacy in one run") tests
"M is f-DP" for one trade-off curve f. An ε lower bound needs a *family* f_θ ordered from most to least private, each
member with an ε at the audited δ: the bound is the ε of the least private member the guesses still reject. A family
is a :class:`CurveFamily`: it runs that search itself (:meth:`CurveFamily.certified_epsilon`), given the test as a
function of the curve, because how finely and how cheaply its parameter can be searched depends on the family:

* :class:`EpsilonCurves` — any callable (ε, δ) ↦ g indexed by ε itself, searched with
  :func:`privaudit.stats.epsilon_search.first_unrejected_epsilon` like the Gaussian and box curves;
* :class:`privaudit.stats.ledger_family.LedgerFamily` — a run's own mechanism with its noise scaled (its curve
  comes from the accountant's privacy profile).

A curve given by its privacy profile δ(ε), ε ≥ 0, of both directions is the convex conjugate
f(x) = sup_ε max(0, 1 − δ(ε) − e^ε·x, e^{−ε}(1 − δ(ε) − x)) (Dong, Roth & Su 2022, Prop. 2.12: M is f-DP for this f
iff it is (ε, δ(ε))-DP for every ε); it is symmetric, so its inverse blow-up is g(x) = f(1 − x) =
sup_ε max(0, e^ε·x − (e^ε − 1) − δ(ε), e^{−ε}(x − δ(ε))) (:mod:`privaudit.stats.trade_off`).
:func:`profile_inverse_blow_up` evaluates that supremum exactly over a finite set of ε: the upper envelope of those
lines. Fewer ε only lower the curve (a weaker hypothesis every such mechanism satisfies), and a δ(ε) that is an upper
bound (a pessimistic accountant) only lowers it too, so the test stays valid.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.epsilon_search import first_unrejected_epsilon
from privaudit.stats.trade_off import InverseBlowUp

#: rejected(g): True when the observed guesses falsify "M is f-DP" for the curve with inverse blow-up g.
CurveTest = Callable[[InverseBlowUp], bool]


@runtime_checkable
class CurveFamily(Protocol):
    """A one-parameter family of trade-off curves, each member with an ε at every δ (the declared extension point)."""

    def certified_epsilon(self, rejected: CurveTest, delta: float, precise: bool, start: float = 0.0) -> float:
        """The ε at ``delta`` of the least private member that ``rejected`` (0 when no member is rejected).

        Valid when every member's curve lies below the true curve of any member with a larger ε, and the search
        reports a member above the true one only if a member at or below the true one was rejected. ``start``: only
        members with ε above it matter to the caller (another guess count already certified it), so the family may
        return any smaller valid value (0) when the first member above ``start`` is not rejected."""
        ...

    def describe(self) -> str:
        """One line: which curves, with what parameter."""
        ...


class EpsilonCurves:
    """A family indexed by ε itself: ``curve(ε, δ)`` returns the inverse blow-up of the member that is (ε, δ)-DP.

    The caller vouches that the audited mechanism is f-DP for the member at its true ε and that members lose
    privacy as ε grows; the search is that of the Gaussian route (inf of the unrejected ε, guarded by a scan).
    """

    def __init__(self, curve: Callable[[float, float], InverseBlowUp], name: str = "a callable curve") -> None:
        if not callable(curve):
            raise InvalidParameterError(f"the curve must be a callable (epsilon, delta) -> g, got {curve!r}")
        self.curve = curve
        self.name = name

    def certified_epsilon(self, rejected: CurveTest, delta: float, precise: bool, start: float = 0.0) -> float:
        if start > 0.0 and not rejected(self.curve(start * (1.0 + 1e-6) + 1e-9, delta)):
            return 0.0
        return first_unrejected_epsilon(lambda eps: rejected(self.curve(eps, delta)),
                                        tolerance=1e-6 if precise else 1e-3, scan=precise)

    def describe(self) -> str:
        return f"{self.name}, indexed by its ε at the audited δ"


def upper_envelope(slopes: np.ndarray, intercepts: np.ndarray) -> tuple[list[float], list[float], list[float]]:
    """The lines (slope, intercept) that reach the maximum somewhere, with the x from which each one does.

    The classic convex-hull sweep over lines sorted by slope; returns (breakpoints, slopes, intercepts) with
    breakpoints[0] = −∞, so the envelope at x is line i for the last breakpoint ≤ x.
    """
    order = np.lexsort((intercepts, slopes))
    kept_s: list[float] = []
    kept_b: list[float] = []
    starts: list[float] = []
    for s, b in zip(np.asarray(slopes, dtype=float)[order].tolist(), np.asarray(intercepts, dtype=float)[order].tolist(),
                    strict=True):
        if kept_s and kept_s[-1] == s:  # equal slopes: the later one (sorted by intercept) is higher
            kept_s.pop(), kept_b.pop(), starts.pop()
        while kept_s and (kept_b[-1] - b) / (s - kept_s[-1]) <= starts[-1]:
            kept_s.pop(), kept_b.pop(), starts.pop()  # the new line overtakes the last one before that one starts
        starts.append((kept_b[-1] - b) / (s - kept_s[-1]) if kept_s else -math.inf)
        kept_s.append(s)
        kept_b.append(b)
    return starts, kept_s, kept_b


def profile_inverse_blow_up(epsilons: np.ndarray, deltas: np.ndarray) -> InverseBlowUp:
    """g(x) = sup_i max(0, e^{ε_i}·x − (e^{ε_i} − 1) − δ_i, e^{−ε_i}(x − δ_i)) over the given (ε_i ≥ 0, δ_i) pairs."""
    eps = np.asarray(epsilons, dtype=float)
    dl = np.asarray(deltas, dtype=float)
    keep = (dl < 1.0) & (eps >= 0.0) & (eps < 700.0)
    eps, dl = eps[keep], dl[keep]
    grow, shrink = np.exp(eps), np.exp(-eps)
    slopes = np.concatenate([[0.0], grow, shrink])
    intercepts = np.concatenate([[0.0], 1.0 - grow - dl, -shrink * dl])
    starts, kept_s, kept_b = upper_envelope(slopes, intercepts)

    def g(x: float) -> float:
        if x <= 0.0:
            return 0.0
        if x >= 1.0:
            return 1.0
        i = bisect.bisect_right(starts, x) - 1
        return min(1.0, max(0.0, kept_s[i] * x + kept_b[i]))

    return g
