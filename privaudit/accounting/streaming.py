"""A streaming accountant: add releases as they happen, ask for ε (or δ) at any time.

    acct = StreamingAccountant()                       # accountant "auto", add/remove neighbours
    for step in range(steps):
        acct.add(SubsampledGaussian(sigma_t, q))       # equal consecutive releases are merged
        if acct.epsilon(1e-5).epsilon > budget: ...
    acct.would_exceed(SubsampledGaussian(1.0, q), 100, epsilon=8, delta=1e-5)   # a pre-check before releasing

Releases are kept as a :class:`~privaudit.accounting.mechanisms.Composition` (mechanism → count), so the state is
small however long the stream; answers are memoised per (state, δ) and recomputed only after new releases. The
stream speaks dp-accounting's vocabulary too: :meth:`add_dp_event` and :meth:`to_dp_event`
(:mod:`privaudit.accounting.dp_events`).
"""

from __future__ import annotations

from typing import Any

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult, check_delta, check_epsilon
from privaudit.accounting.dp_events import from_dp_event, to_dp_event
from privaudit.accounting.mechanisms import Composition, Mechanism, Neighbouring
from privaudit.errors import InvalidParameterError


class StreamingAccountant:
    """Releases added one at a time; ε(δ) and δ(ε) of everything so far on demand."""

    def __init__(self, accountant: str | Accountant = "auto", neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE) -> None:
        self.accountant = get_accountant(accountant)
        self.neighbouring = Neighbouring.parse(neighbouring)
        self._counts: dict[Mechanism, int] = {}
        self._memo: dict[tuple, EpsilonResult | DeltaResult] = {}
        self.releases = 0

    # -- recording -----------------------------------------------------------------------------------
    def add(self, mechanism: Mechanism, count: int = 1) -> None:
        """Record ``count`` runs of ``mechanism`` (validated now, so a bad release never enters the state)."""
        if isinstance(count, bool) or int(count) != count or count < 1:
            raise InvalidParameterError(f"count must be a positive integer, got {count!r}")
        Composition([(mechanism, int(count))], self.neighbouring)  # validates the mechanism
        self._counts[mechanism] = self._counts.get(mechanism, 0) + int(count)
        self.releases += int(count)
        self._memo.clear()

    def add_composition(self, composition: Composition) -> None:
        if composition.neighbouring is not self.neighbouring:
            raise InvalidParameterError("cannot add releases stated for another neighbouring relation")
        for mechanism, count in composition:
            self.add(mechanism, count)

    def add_dp_event(self, event: Any) -> None:
        """Record a dp-accounting ``DpEvent`` (refused, unchanged state, if it has no privaudit mechanism)."""
        self.add_composition(from_dp_event(event, self.neighbouring))

    # -- queries -------------------------------------------------------------------------------------
    @property
    def composition(self) -> Composition:
        return Composition(list(self._counts.items()), self.neighbouring)

    def epsilon(self, delta: float) -> EpsilonResult:
        key = ("epsilon", check_delta(delta))
        if key not in self._memo:
            self._memo[key] = self.accountant.epsilon(self.composition, delta)
        return self._memo[key]  # type: ignore[return-value]

    def delta(self, epsilon: float) -> DeltaResult:
        key = ("delta", check_epsilon(epsilon))
        if key not in self._memo:
            self._memo[key] = self.accountant.delta(self.composition, epsilon)
        return self._memo[key]  # type: ignore[return-value]

    def would_exceed(self, mechanism: Mechanism, count: int, epsilon: float, delta: float) -> bool:
        """Would ``count`` more runs of ``mechanism`` push ε(δ) above ``epsilon``? (The state is unchanged.)"""
        after = Composition([*self._counts.items(), (mechanism, int(count))], self.neighbouring)
        return self.accountant.epsilon(after, delta).epsilon > float(epsilon) * (1 + 1e-12)

    def to_dp_event(self, dataset_size: int | None = None) -> Any:
        """The releases so far as one dp-accounting ``DpEvent`` (:func:`privaudit.accounting.dp_events.to_dp_event`)."""
        return to_dp_event(self.composition, dataset_size)
