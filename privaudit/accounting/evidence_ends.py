"""Which end of an accountant's ε holds, for which mechanism, and how to say so without contradicting the verdict.

An accounting result (:class:`privaudit.audit.verdict.AccountingEvidence`, or its JSON form in a result file) has
an upper end ``upper`` (``inf``: none), a lower end ``lower`` (``None``: none), ``implementation`` (it is about the
mechanism the reading examines, the code as run) and ``assumptions_hold``. :func:`privaudit.audit.verdict.decide`
reads the two ends separately, and everything that prints evidence reads them the same way:

* the **lower end** of implementation evidence is a certified lower bound on the examined mechanism's ε — it is
  attained by a constructed worst case (a dataset, or neighbouring clients, the code can meet), so it refutes a
  smaller claim whatever ``assumptions_hold`` says (verdict rule (b));
* the **upper end** certifies only when ``assumptions_hold``: an upper bound that rests on an assumption that fails
  (e.g. a clip norm computed from unprivatised data) proves nothing;
* evidence under the paper's assumptions (``implementation`` false) describes the mechanism the paper analyses;
  where those assumptions fail for the code, *neither* end is about the code (and neither decides a verdict).

So a refuting value is never marked "rests on assumptions that fail": only the upper end beside it may be.
:func:`ends` applies the rules, :func:`cell_text` writes them compactly (the CLI table), :func:`sentence` in words
(the report), and :func:`contradictions` finds a holding lower end above a holding upper end for the examined
mechanism — always a bug in whatever computed them, never something to render.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

#: Relative slack when comparing two certified ends (both are rounded up/down by their accountants' own margins).
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Ends:
    """The two ends of one accounting result. ``upper`` is ``None`` when the accountant gives no upper end (an
    upper of ``inf`` beside a finite lower end: the lower end alone is known); ``inf`` means "no finite bound"."""

    lower: float | None
    upper: float | None
    lower_holds: bool
    upper_holds: bool
    implementation: bool

    @property
    def exact(self) -> bool:
        """Both ends given and equal (e.g. the exact ε of a Gaussian composition)."""
        return self.lower is not None and self.upper is not None and self.lower >= self.upper * (1 - TOLERANCE)

    def refutes(self, claimed: float | None) -> bool:
        """The lower end holds and exceeds ``claimed`` (only implementation evidence refutes, as in the verdict)."""
        return (self.implementation and self.lower_holds and claimed is not None and self.lower is not None
                and self.lower > claimed * (1 + TOLERANCE))


def _number(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity"):
        return math.inf
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def ends(lower: object, upper: object, *, implementation: bool, assumptions_hold: bool) -> Ends:
    """The ends of one accounting result (numbers, ``"inf"`` strings of result files and ``None`` accepted)."""
    low, high = _number(lower), _number(upper)
    if low is not None and math.isfinite(low) and high == math.inf:
        high = None  # ∞ beside a finite lower end: the accountant gave the lower end alone
    if low is not None and high is None and low == math.inf:
        high = math.inf
    return Ends(low, high, low is not None and (implementation or assumptions_hold), high is not None and assumptions_hold,
                implementation)


class Evidence(Protocol):
    """An accounting result as read here: the fields of :class:`privaudit.audit.verdict.AccountingEvidence` (which
    lives above this layer)."""

    lower: float | None
    upper: float
    implementation: bool
    assumptions_hold: bool


def of_evidence(evidence: Evidence | Mapping[str, Any]) -> Ends:
    """:func:`ends` of an ``AccountingEvidence`` or of its dict form (``upper``, ``lower``, ``implementation``, …;
    a key left out reads as ``None``)."""
    if isinstance(evidence, Mapping):
        return ends(evidence.get("lower"), evidence.get("upper"), implementation=bool(evidence.get("implementation")),
                    assumptions_hold=evidence.get("assumptions_hold") is not False)
    return ends(evidence.lower, evidence.upper, implementation=bool(evidence.implementation),
                assumptions_hold=evidence.assumptions_hold is not False)


def default_format(value: float) -> str:
    return "∞" if value == math.inf else f"{value:.3g}"


def cell_text(e: Ends, fmt: Callable[[float], str] = default_format) -> str:
    """Compact: ``=0.887``, ``[9.18, 10.6]``, ``≥271``, ``≤16.6*``, ``≥15.1, ≤15.1*`` (``*``: that end rests on
    assumptions that fail or cannot be checked; a lower end of implementation evidence never carries it). No space
    after a sign, so a terminal never wraps a sign away from its number."""
    if e.lower is None and e.upper is None:
        return "—"
    if e.lower is not None and e.upper is not None and e.lower_holds == e.upper_holds:
        star = "" if e.upper_holds else "*"
        same = e.exact or fmt(e.lower) == fmt(e.upper)  # equal at the precision shown
        return f"={fmt(e.upper)}{star}" if same else f"[{fmt(e.lower)}, {fmt(e.upper)}]{star}"
    parts = []
    if e.lower is not None:
        parts.append(f"≥{fmt(e.lower)}" + ("" if e.lower_holds else "*"))
    if e.upper is not None:
        parts.append((f"≤{fmt(e.upper)}" if math.isfinite(e.upper) else "∞") + ("" if e.upper_holds else "*"))
    return ", ".join(parts)


def sentence(e: Ends, fmt: Callable[[float], str] = default_format) -> str:
    """In words, saying which end rests on what, e.g. ``ε ≥ 15.1 (certified lower bound: holds for a constructed worst
    case); the upper bound 15.1 rests on assumptions that fail``."""
    if e.lower is None and e.upper is None:
        return "—"
    where = "" if e.implementation else " under the paper's assumptions"
    if e.lower is not None and e.upper is not None and e.lower_holds == e.upper_holds:
        same = e.exact or fmt(e.lower) == fmt(e.upper)  # equal at the precision shown
        value = f"ε = {fmt(e.upper)} (exact)" if same else f"{fmt(e.lower)} ≤ ε ≤ {fmt(e.upper)}"
        if e.upper_holds:
            return value + ("" if same or where else " (certified lower and upper bound)") + where
        return value + (f"{where}, which fail for the code" if where else ", resting on assumptions that fail")
    parts = []
    if e.lower is not None:
        parts.append(f"ε ≥ {fmt(e.lower)} (certified lower bound: holds for a constructed worst case)" if e.implementation
                     else f"ε ≥ {fmt(e.lower)}{where}" + ("" if e.lower_holds else ", which fail for the code"))
    if e.upper is not None:
        value = ("no finite upper bound" if e.upper == math.inf else f"the upper bound {fmt(e.upper)}" if parts
                 else f"ε ≤ {fmt(e.upper)}")
        if e.upper_holds:
            value += ("" if e.upper == math.inf else " (certified upper bound)") + where
        elif not e.implementation:
            value += f"{where}, which fail for the code"
        elif e.upper == math.inf:
            value += " (the accounting rests on assumptions that fail)"
        else:
            value += (" rests on assumptions that fail" if parts else ", an upper bound resting on assumptions that fail")
        parts.append(value)
    return "; ".join(parts)


def contradictions(evidence: Iterable[Evidence | Mapping[str, Any]], label: str = "") -> list[str]:
    """Every holding lower end above a holding upper end of the examined mechanism (implementation evidence): a bug.

    Evidence under the paper's assumptions is about another mechanism and is not compared with it.
    """
    found = [of_evidence(e) for e in evidence]
    lowers = [e.lower for e in found if e.implementation and e.lower_holds and e.lower is not None]
    uppers = [e.upper for e in found if e.implementation and e.upper_holds and e.upper is not None]
    if not lowers or not uppers or max(lowers) <= min(uppers) * (1 + TOLERANCE):
        return []
    prefix = f"{label}: " if label else ""
    return [f"{prefix}a certified lower bound ε ≥ {max(lowers):.6g} lies above a certified upper bound ε ≤ "
            f"{min(uppers):.6g} for the same mechanism"]
