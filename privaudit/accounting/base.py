"""The accountant protocol and its result values.

Every accountant answers two questions about a :class:`~privaudit.accounting.mechanisms.Composition`:
``epsilon(composition, delta)`` and ``delta(composition, epsilon)``. Before answering it checks that it
*supports* the composition (every mechanism, under the stated neighbouring relation); an unsupported
request raises :class:`~privaudit.errors.UnsupportedMechanismError` with the reason — never a wrong number.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from privaudit.accounting.mechanisms import (
    Composition,
    Mechanism,
    Neighbouring,
    PureDP,
    effective_pure_epsilon,
)
from privaudit.checks import probability_open
from privaudit.errors import InvalidParameterError, UnsupportedMechanismError

#: How a release without a finite guarantee is reported everywhere (ledgers, JSON, tables): never ε = 0.
NO_GUARANTEE = "no DP guarantee (ε = ∞)"


def no_guarantee_release(composition: Composition) -> str | None:
    """The description of a release with no finite DP guarantee (``PureDP(ε = ∞)``), else ``None``.

    Composing anything with such a release has no guarantee either (its output alone is part of the
    composition's output), so every accountant answers ε = ∞ (δ = 1) without running any numerics.
    """
    for mechanism, _ in composition:
        if isinstance(mechanism, PureDP) and math.isinf(effective_pure_epsilon(mechanism, composition.neighbouring) or 0.0):
            return mechanism.describe()
    return None


@dataclass(frozen=True)
class EpsilonResult:
    """ε at a given δ from one accountant.

    ``epsilon`` is the accountant's answer: a certified upper bound, unless ``approximate`` is set (GDP's
    central-limit approximation). Accountants that return an interval also fill ``lower`` and ``estimate``.
    """

    accountant: str
    epsilon: float
    delta: float
    lower: float | None = None
    estimate: float | None = None
    approximate: bool = False
    notes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def json_value(self) -> float | dict[str, float]:
        """The value as it appears under ``"epsilon"`` in ``--json`` output."""
        if self.lower is None and self.estimate is None:
            return self.epsilon
        return {"lower": self.lower, "estimate": self.estimate, "upper": self.epsilon}


@dataclass(frozen=True)
class DeltaResult:
    """δ at a given ε from one accountant (``delta`` is an upper bound unless ``approximate``)."""

    accountant: str
    delta: float
    epsilon: float
    lower: float | None = None
    estimate: float | None = None
    approximate: bool = False
    notes: tuple[str, ...] = ()

    def json_value(self) -> float | dict[str, float]:
        if self.lower is None and self.estimate is None:
            return self.delta
        return {"lower": self.lower, "estimate": self.estimate, "upper": self.delta}


def check_delta(delta: float) -> float:
    return probability_open("delta", delta)


def check_epsilon(epsilon: float) -> float:
    try:
        epsilon = float(epsilon)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"epsilon must be a number, got {epsilon!r}") from None
    if not epsilon >= 0.0 or math.isinf(epsilon):
        raise InvalidParameterError(f"epsilon must be a finite non-negative number, got {epsilon}")
    return epsilon


class Accountant(ABC):
    """An accountant: declares what it supports and answers ε(δ) and δ(ε) for compositions."""

    #: Registry name (``rdp``, ``prv``, ``pld``, ``gdp``, ``pure``).
    name: str = ""
    #: One line for listings.
    description: str = ""
    #: True when answers are approximations rather than certified upper bounds.
    approximate: bool = False
    #: True for accountants that only delegate to others (``auto``): the delegate answers ε = ∞ itself.
    delegates: bool = False

    @abstractmethod
    def unsupported_reason(self, composition: Composition) -> str | None:
        """``None`` if every entry is supported, else one sentence saying what is not and why."""

    def supports(self, composition: Composition) -> bool:
        return self.unsupported_reason(composition) is None

    def prefetch(self, mechanisms: Iterable[Mechanism], neighbouring: Neighbouring) -> None:  # noqa: B027 - a hook
        """Prepare for many compositions of ``mechanisms`` (a ledger's clients and rounds) before they are asked.

        By default nothing: accountants that compose per-mechanism quantities override it (``rdp`` computes every
        distinct mechanism's RDP curve in one vectorised batch and caches them)."""

    def check(self, composition: Composition) -> None:
        if not isinstance(composition, Composition):
            raise InvalidParameterError(f"expected a Composition, got {type(composition).__name__}")
        reason = self.unsupported_reason(composition)
        if reason is not None:
            raise UnsupportedMechanismError(f"the {self.name} accountant cannot account for this: {reason}")

    def epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        delta = check_delta(delta)
        self.check(composition)
        if composition.is_empty:
            return EpsilonResult(self.name, 0.0, delta, notes=("nothing was released",))
        release = None if self.delegates else no_guarantee_release(composition)
        if release is not None:
            return EpsilonResult(self.name, math.inf, delta, notes=(f"{NO_GUARANTEE}: {release} is released (ε is infinite at every δ < 1)",),
                                 details={"guarantee": "none"})
        return self._epsilon(composition, delta)

    def delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        epsilon = check_epsilon(epsilon)
        self.check(composition)
        if composition.is_empty:
            return DeltaResult(self.name, 0.0, epsilon, notes=("nothing was released",))
        release = None if self.delegates else no_guarantee_release(composition)
        if release is not None:
            return DeltaResult(self.name, 1.0, epsilon, notes=(f"{NO_GUARANTEE}: {release} is released",))
        return self._delta(composition, epsilon)

    @abstractmethod
    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult: ...

    @abstractmethod
    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult: ...
