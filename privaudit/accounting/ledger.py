"""Per-client privacy ledger for federated learning.

Training code never computes ε. Privatizers emit :class:`PrivacyEvent` values — *who* paid (a client
id, or :data:`SERVER` for client-level guarantees enforced at the server), *when* (round), *what*
(a mechanism and how many times it ran) and *on which assumptions* the accounting rests (e.g.
"sensitivity τ/|D| per Upcycled-FL Thm 6.2"). The ledger stores them, composes each client's events
into a :class:`~privaudit.accounting.mechanisms.Composition`, and asks an accountant for ε.

Two rules are enforced here rather than left to callers:

* the summary of a federation is ``max`` over clients (with the mean beside it) — never ε evaluated
  at the mean client (the Upcycled-FL ε̄ mistake, audit point U8);
* an event marked ``valid=False`` (for example noise scaled by an unprivatised, data-dependent clip
  norm, audit point P2) makes that client's ε *not valid*: it is reported with the event's reason, and the
  summary never states a DP guarantee for that client (``guarantee`` ``"invalid"``), never silently used.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privaudit.accounting.base import NO_GUARANTEE, Accountant
from privaudit.accounting.dp_events import from_dp_event, to_dp_event
from privaudit.accounting.mechanisms import (
    Composition,
    Mechanism,
    Neighbouring,
    PureDP,
    mechanism_from_dict,
    mechanism_to_dict,
)
from privaudit.errors import InvalidParameterError

#: Subject id of client-level events enforced by the server (central DP over clients).
SERVER = "server"

LEDGER_SCHEMA = "privaudit.ledger/1"


@dataclass(frozen=True)
class PrivacyEvent:
    """One privatised release: ``count`` runs of ``mechanism`` charged to ``client_id`` in ``round``."""

    client_id: str
    round: int
    mechanism: Mechanism
    count: int = 1
    assumptions: tuple[str, ...] = ()
    valid: bool = True
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "client_id", str(self.client_id))
        if isinstance(self.count, bool) or int(self.count) != self.count or self.count < 1:
            raise InvalidParameterError(f"event count must be a positive integer, got {self.count!r}")
        object.__setattr__(self, "count", int(self.count))
        object.__setattr__(self, "round", int(self.round))
        object.__setattr__(self, "assumptions", tuple(str(a) for a in self.assumptions))

    def to_dict(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "round": self.round,
            "mechanism": mechanism_to_dict(self.mechanism),
            "count": self.count,
            "assumptions": list(self.assumptions),
            "valid": self.valid,
            "note": self.note,
        }

    @classmethod
    def no_guarantee(cls, client_id: str | int, round: int, reason: str, count: int = 1) -> PrivacyEvent:
        """A release without calibrated noise: recorded as ``PureDP(ε = ∞)``, so every accountant reports
        "no DP guarantee (ε = ∞)" for the client — never ε = 0 (a run that records nothing would read as private)."""
        return cls(client_id=client_id, round=round, mechanism=PureDP(math.inf), count=count,
                   assumptions=(f"{NO_GUARANTEE}: {reason}",), valid=True, note=NO_GUARANTEE)

    @property
    def has_guarantee(self) -> bool:
        return not (isinstance(self.mechanism, PureDP) and math.isinf(self.mechanism.epsilon))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyEvent:
        try:
            return cls(
                client_id=data["client_id"],
                round=data["round"],
                mechanism=mechanism_from_dict(data["mechanism"]),
                count=data.get("count", 1),
                assumptions=tuple(data.get("assumptions", ())),
                valid=bool(data.get("valid", True)),
                note=str(data.get("note", "")),
            )
        except KeyError as exc:
            raise InvalidParameterError(f"privacy event lacks field {exc}") from None


@dataclass(frozen=True)
class Budget:
    """A client's (ε, δ) budget."""

    epsilon: float
    delta: float

    def __post_init__(self) -> None:
        if not self.epsilon > 0 or math.isnan(self.epsilon):
            raise InvalidParameterError(f"a privacy budget ε must be positive, got {self.epsilon}")
        if not 0 < self.delta < 1:
            raise InvalidParameterError(f"a privacy budget δ must lie in (0, 1), got {self.delta}")


@dataclass(frozen=True)
class ClientEpsilon:
    """Accounting result for one client."""

    client_id: str
    epsilon: float
    budget: float | None
    rounds: int
    steps: int
    assumptions: tuple[str, ...]
    valid: bool
    accountant: str
    #: why the client's invalid events are invalid: (reason, rounds) per distinct reason, in order of first round
    failures: tuple[tuple[str, tuple[int, ...]], ...] = ()

    @property
    def over_budget(self) -> bool:
        return self.budget is not None and self.epsilon > self.budget * (1 + 1e-9)

    @property
    def guarantee(self) -> str:
        """``"none"`` (ε = ∞), ``"invalid"`` (ε rests on assumptions the ledger marks failed: no guarantee is
        established) or ``"dp"``."""
        if math.isinf(self.epsilon):
            return "none"
        return "dp" if self.valid else "invalid"

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "guarantee": self.guarantee,
            "budget": self.budget,
            "rounds": self.rounds,
            "steps": self.steps,
            "assumptions": list(self.assumptions),
            "valid": self.valid,
            "failures": [{"reason": reason, "rounds": list(rounds)} for reason, rounds in self.failures],
            "over_budget": self.over_budget,
            "accountant": self.accountant,
        }


@dataclass(frozen=True)
class LedgerSummary:
    """max / mean over clients, and every client's value. ``max_epsilon`` is the federation's guarantee."""

    accountant: str
    delta: float
    per_client: dict[str, ClientEpsilon]

    @property
    def max_epsilon(self) -> float:
        return max((c.epsilon for c in self.per_client.values()), default=0.0)

    @property
    def mean_epsilon(self) -> float:
        values = [c.epsilon for c in self.per_client.values()]
        return sum(values) / len(values) if values else 0.0

    @property
    def all_valid(self) -> bool:
        return all(c.valid for c in self.per_client.values())

    @property
    def guarantee(self) -> str:
        """``"dp"`` when every client's ε is finite and rests on valid events, ``"none"`` when some client has no DP
        guarantee (ε = ∞), ``"invalid"`` when some client's ε rests on events the ledger marks invalid (no guarantee
        is established: the ε is what the mechanism would give *if* the failed assumptions held)."""
        if math.isinf(self.max_epsilon):
            return "none"
        return "dp" if self.all_valid else "invalid"

    @property
    def statement(self) -> str:
        n = len(self.per_client)
        if self.guarantee == "none":
            bad = sum(1 for c in self.per_client.values() if math.isinf(c.epsilon))
            return f"{NO_GUARANTEE} for {bad} of {n} client(s)"
        if self.guarantee == "invalid":
            bad = [c for c in self.per_client.values() if not c.valid]
            first = next((reason for c in bad for reason, _ in c.failures), "an event is marked invalid")
            return (f"no DP guarantee established for {len(bad)} of {n} client(s): their ε rests on assumptions that fail "
                    f"({first}); ε = {self.max_epsilon:.6g} holds only if they held")
        return f"({self.max_epsilon:.6g}, {self.delta:g})-DP for every client (max over clients)"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready apart from infinities (written ``"inf"`` by privaudit's JSON writers)."""
        return {
            "accountant": self.accountant,
            "delta": self.delta,
            "max_epsilon": self.max_epsilon,
            "mean_epsilon": self.mean_epsilon,
            "guarantee": self.guarantee,
            "statement": self.statement,
            "all_valid": self.all_valid,
            "per_client": {cid: c.to_dict() for cid, c in self.per_client.items()},
        }


@dataclass
class PrivacyLedger:
    """Privacy events per client, optional per-client budgets, and per-client ε on demand."""

    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    events: list[PrivacyEvent] = field(default_factory=list)
    budgets: dict[str, Budget] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.neighbouring = Neighbouring.parse(self.neighbouring)

    # -- recording -------------------------------------------------------------------------------
    def record(self, event: PrivacyEvent) -> None:
        self.events.append(event)

    def record_all(self, events: Iterable[PrivacyEvent]) -> None:
        self.events.extend(events)

    def record_dp_event(self, client_id: str | int, round_: int, event: Any, assumptions: Iterable[str] = (),
                        valid: bool = True, note: str = "") -> None:
        """Record a dp-accounting ``DpEvent`` for ``client_id``: one :class:`PrivacyEvent` per release it contains
        (:func:`privaudit.accounting.dp_events.from_dp_event`; an event without a privaudit mechanism is refused)."""
        composition = from_dp_event(event, self.neighbouring)
        self.record_all(PrivacyEvent(str(client_id), round_, mechanism, count, tuple(assumptions), valid, note)
                        for mechanism, count in composition)

    def to_dp_events(self, dataset_size: int | None = None) -> dict[str, Any]:
        """Each client's composition as one dp-accounting ``DpEvent`` (:func:`privaudit.accounting.dp_events.to_dp_event`)."""
        return {cid: to_dp_event(self.composition_for(cid), dataset_size) for cid in self.clients()}

    def set_budget(self, client_id: str | int, epsilon: float, delta: float) -> None:
        self.budgets[str(client_id)] = Budget(float(epsilon), float(delta))

    # -- queries ---------------------------------------------------------------------------------
    def clients(self) -> list[str]:
        seen = dict.fromkeys(list(self.budgets) + [e.client_id for e in self.events])
        return sorted(seen, key=_natural_key)

    def events_for(self, client_id: str | int) -> list[PrivacyEvent]:
        cid = str(client_id)
        return [e for e in self.events if e.client_id == cid]

    def composition_for(self, client_id: str | int, extra: Iterable[tuple[Mechanism, int]] = ()) -> Composition:
        entries = [(e.mechanism, e.count) for e in self.events_for(client_id)]
        return Composition(entries + list(extra), self.neighbouring)

    def epsilon_for(self, client_id: str | int, delta: float, accountant: str = "rdp") -> ClientEpsilon:
        return self._client_epsilon(str(client_id), delta, _resolve(accountant), {})

    def _client_epsilon(self, cid: str, delta: float, acct, memo: dict[Composition, tuple[float, str]],
                        events: list[PrivacyEvent] | None = None) -> ClientEpsilon:
        events = self.events_for(cid) if events is None else events
        composition = Composition([(e.mechanism, e.count) for e in events], self.neighbouring)
        if composition.is_empty:
            eps, answered = 0.0, acct.name
        elif composition in memo:
            eps, answered = memo[composition]
        else:
            result = acct.epsilon(composition, delta)  # "auto" answers with the accountant that succeeded
            eps, answered = memo[composition] = (result.epsilon, result.accountant)
        budget = self.budgets.get(cid)
        return ClientEpsilon(
            client_id=cid,
            epsilon=eps,
            budget=budget.epsilon if budget else None,
            rounds=len({e.round for e in events}),
            steps=sum(e.count for e in events),
            assumptions=tuple(dict.fromkeys(a for e in events for a in e.assumptions)),
            valid=all(e.valid for e in events),
            accountant=answered,
            failures=_failures(events),
        )

    def summary(self, delta: float, accountant: str = "rdp") -> LedgerSummary:
        """ε of every client (identical compositions are computed once; RDP curves are batched)."""
        acct = _resolve(accountant)
        acct.prefetch({e.mechanism for e in self.events}, self.neighbouring)
        memo: dict[Composition, tuple[float, str]] = {}
        by_client: dict[str, list[PrivacyEvent]] = defaultdict(list)
        for e in self.events:
            by_client[e.client_id].append(e)
        per_client = {cid: self._client_epsilon(cid, delta, acct, memo, by_client.get(cid, [])) for cid in self.clients()}
        answered = sorted({c.accountant for c, cid in zip(per_client.values(), per_client, strict=True) if by_client.get(cid)})
        name = "+".join(answered) if answered else acct.name  # the accountant(s) that answered, never just "auto"
        return LedgerSummary(accountant=name, delta=delta, per_client=per_client)

    def can_participate(
        self,
        client_id: str | int,
        mechanism: Mechanism,
        count: int = 1,
        accountant: str = "rdp",
        delta: float | None = None,
    ) -> bool:
        """Pre-check: would ``count`` more runs of ``mechanism`` keep the client within its budget?

        Clients without a budget may always participate. ``delta`` defaults to the budget's δ.
        """
        budget = self.budgets.get(str(client_id))
        if budget is None:
            return True
        composition = self.composition_for(client_id, extra=[(mechanism, count)])
        eps = _resolve(accountant).epsilon(composition, delta if delta is not None else budget.delta).epsilon
        return eps <= budget.epsilon * (1 + 1e-12)

    def event_rounds(self) -> list[int]:
        """The distinct rounds in which any event was recorded, ascending."""
        return sorted({e.round for e in self.events})

    def composition_through(self, client_id: str | int, round_: int) -> Composition:
        """The composition of ``client_id``'s events recorded in rounds ``≤ round_`` (its guarantee after that round)."""
        cid, last = str(client_id), int(round_)
        return Composition([(e.mechanism, e.count) for e in self.events if e.client_id == cid and e.round <= last],
                           self.neighbouring)

    def epsilon_by_round(self, client_id: str | int, delta: float, rounds: Iterable[int],
                         accountant: str = "rdp") -> list[float]:
        """ε of ``client_id`` after each round in ``rounds``: the accountant applied to each round prefix of its events.

        Sequential composition: the guarantee after round r composes every release charged to the client in
        rounds 1..r (:meth:`composition_through`); a round without a release leaves ε unchanged. RDP curves of
        the client's distinct mechanisms are computed once (batched) and reused by every prefix.
        """
        acct = _resolve(accountant)
        acct.prefetch({e.mechanism for e in self.events_for(client_id)}, self.neighbouring)
        memo: dict[Composition, float] = {}
        out = []
        for r in rounds:
            composition = self.composition_through(client_id, r)
            if composition.is_empty:
                out.append(0.0)
                continue
            if composition not in memo:
                memo[composition] = acct.epsilon(composition, delta).epsilon
            out.append(memo[composition])
        return out

    def rounds_per_client(self) -> dict[str, int]:
        rounds: dict[str, set[int]] = defaultdict(set)
        for e in self.events:
            rounds[e.client_id].add(e.round)
        return {cid: len(r) for cid, r in rounds.items()}

    # -- persistence -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": LEDGER_SCHEMA,
            "neighbouring": self.neighbouring.value,
            "budgets": {cid: {"epsilon": b.epsilon, "delta": b.delta} for cid, b in self.budgets.items()},
            "events": [e.to_dict() for e in self.events],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyLedger:
        if not isinstance(data, dict) or data.get("schema") != LEDGER_SCHEMA:
            raise InvalidParameterError(f"not a privaudit ledger (expected schema {LEDGER_SCHEMA!r})")
        ledger = cls(neighbouring=data.get("neighbouring", Neighbouring.ADD_REMOVE))
        for cid, b in data.get("budgets", {}).items():
            ledger.set_budget(cid, b["epsilon"], b["delta"])
        ledger.record_all(PrivacyEvent.from_dict(e) for e in data.get("events", []))
        return ledger

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> PrivacyLedger:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InvalidParameterError(f"cannot read ledger {path}: {exc}") from None
        return cls.from_dict(data)


def _failures(events: Iterable[PrivacyEvent]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """(reason, rounds) of the invalid events, one entry per distinct reason (an event without a note says so)."""
    rounds: dict[str, list[int]] = {}
    for event in events:
        if not event.valid:
            rounds.setdefault(event.note or "marked invalid (no reason recorded)", []).append(event.round)
    return tuple((reason, tuple(sorted(set(r)))) for reason, r in rounds.items())


def _resolve(accountant: str | Accountant) -> Accountant:
    # imported here for its cost: the accountants pull numpy and scipy.special (~0.5 s), which recording, reading and
    # writing a ledger (training, reports, the CLI's start-up) never need
    from privaudit.accounting.accountants import get_accountant

    return get_accountant(accountant)


def _natural_key(cid: str) -> tuple:
    return (0, int(cid), "") if cid.isdigit() else (1, 0, cid)
