"""What the report's opening figure shows, read from claim-audit results: one panel per claim, one row per reading.

A row holds, on one ε axis, the ε the claim states, the accountants' ε (an interval ``[lower, upper]``, a point
where they coincide, a lower or an upper end alone, or ∞) and the ε lower bounds the attacks certified. An attack's
lower bound to the right of the claimed ε is what refutes a claim; an accountant's lower end to the right of it does
too. Which end of an accountant's ε holds follows :mod:`privaudit.accounting.evidence_ends` (the verdict's own rules):
:func:`row_glyphs` says what the figure draws for a row — each end on its own, faded only where that end rests on
assumptions that fail, so a refuting value is never faded — and :func:`row_statement` the number that decided it.

Also the per-client ε the results record: a ledger result's ``per_client`` and the per-client tables readings keep
in their ``details`` (:func:`per_client_epsilons`). Pure functions of result data: nothing here draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from privaudit.accounting.evidence_ends import Ends, ends
from privaudit.report.results import Result


@dataclass(frozen=True)
class AccountantMark:
    """One accountant's ε for a reading: ``lower`` ``None`` = only an upper bound is known (``inf``: no bound);
    ``upper`` ``inf`` beside a finite ``lower`` = only the lower end is known."""

    label: str
    upper: float
    lower: float | None
    implementation: bool  # evidence about the code as run (else: under the paper's assumptions)
    assumptions_hold: bool

    @property
    def ends(self) -> Ends:
        """Which end holds (:func:`privaudit.accounting.evidence_ends.ends`)."""
        return ends(self.lower, self.upper, implementation=self.implementation, assumptions_hold=self.assumptions_hold)


@dataclass(frozen=True)
class LowerBoundMark:
    """An attack's certified ε lower bound (``ε ≥ value`` at confidence 1 − significance)."""

    estimator: str
    value: float


@dataclass(frozen=True)
class ClaimRow:
    """One reading of a claim (or the claim itself, for result files without readings)."""

    label: str
    verdict: str
    claimed: float | None
    accountants: tuple[AccountantMark, ...] = ()
    lower_bounds: tuple[LowerBoundMark, ...] = ()
    note: str = ""  # shown in place of marks when the row has no ε at all (e.g. a PSNR comparison)


@dataclass(frozen=True)
class ClaimPanel:
    claim_id: str
    verdict: str
    basis: str
    claimed: float | None
    delta: float | None
    rows: tuple[ClaimRow, ...] = field(default_factory=tuple)

    def values(self) -> list[float]:
        """Every ε the panel shows (finite or not): sets the shared axis."""
        out = [] if self.claimed is None else [self.claimed]
        for row in self.rows:
            out += [] if row.claimed is None else [row.claimed]
            for a in row.accountants:
                out += [a.upper] + ([] if a.lower is None else [a.lower])
            out += [b.value for b in row.lower_bounds]
        return out


def _number(value: Any) -> float | None:
    """A float (``"inf"`` strings of older files included), or ``None`` for anything that is not a number."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in ("inf", "+inf", "infinity"):
        return math.inf
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _claimed(data: Mapping[str, Any]) -> tuple[float | None, float | None]:
    claimed = data.get("claimed")
    if isinstance(claimed, Mapping):
        return _number(claimed.get("epsilon")), _number(claimed.get("delta"))
    return _number(claimed), _number(data.get("delta"))


def _verdict(data: Mapping[str, Any]) -> str:
    verdict = data.get("verdict")
    if isinstance(verdict, Mapping):
        verdict = verdict.get("verdict")
    return str(verdict or "—")


def _accountants(data: Mapping[str, Any]) -> tuple[AccountantMark, ...]:
    raw = data.get("accountant")
    if isinstance(raw, Mapping):
        raw = [raw] if ("upper" in raw or "label" in raw) else [
            {"label": str(k), **(v if isinstance(v, Mapping) else {"upper": v})} for k, v in raw.items()]
    elif raw is not None and not isinstance(raw, list):
        raw = [{"label": "accountant", "upper": raw}]
    marks = []
    for entry in raw or []:
        if not isinstance(entry, Mapping):
            continue
        upper, lower = _number(entry.get("upper")), _number(entry.get("lower"))
        if upper is None and lower is None:
            continue
        marks.append(AccountantMark(str(entry.get("accountant") or entry.get("label") or "accountant"),
                                    math.inf if upper is None else upper, lower, bool(entry.get("implementation")),
                                    entry.get("assumptions_hold") is not False))
    return tuple(marks)


def _lower_bounds(data: Mapping[str, Any]) -> tuple[LowerBoundMark, ...]:
    marks = []
    for entry in data.get("lower_bounds") or []:
        value = _number(entry.get("epsilon_lb")) if isinstance(entry, Mapping) else None
        if value is not None:
            marks.append(LowerBoundMark(str(entry.get("estimator") or "attack"), max(0.0, value)))
    return tuple(marks)


def _row(label: str, data: Mapping[str, Any], fallback_claimed: float | None) -> ClaimRow:
    claimed, _ = _claimed(data)
    row = ClaimRow(label, _verdict(data), fallback_claimed if claimed is None and "claimed" not in data else claimed,
                   _accountants(data), _lower_bounds(data))
    if row.claimed is None and not row.accountants and not row.lower_bounds:
        note = data.get("claimed", {}).get("note") if isinstance(data.get("claimed"), Mapping) else None
        row = ClaimRow(label, row.verdict, None, note=f"no ε: {note}" if note else "no ε stated or measured")
    return row


@dataclass(frozen=True)
class Glyph:
    """One thing the overview draws on a row.

    ``kind``: ``claimed`` (the row's claimed ε), ``exact`` (an accountant's lower and upper end coincide and both
    hold, or both fail), ``lower`` / ``upper`` (one end of an accountant's ε), ``span`` (the line from an
    accountant's lower to its upper end; ``start`` is the lower end) or ``attack`` (a certified lower bound).
    ``source``: ``claimed``, ``implementation``, ``paper`` or ``attack``; ``slot``: the accountant's index in the row
    (attacks and the claimed ε: 0). ``faded``: this end rests on assumptions that fail; ``refutes``: a holding lower
    end above the row's claimed ε (never faded).
    """

    kind: str
    value: float
    source: str
    slot: int = 0
    start: float | None = None
    faded: bool = False
    refutes: bool = False


def _accountant_glyphs(mark: AccountantMark, slot: int, claimed: float | None) -> list[Glyph]:
    e = mark.ends
    source = "implementation" if mark.implementation else "paper"
    refutes = e.refutes(claimed)
    if e.lower is not None and e.upper is not None and e.exact and e.lower_holds == e.upper_holds:
        return [Glyph("exact", e.upper, source, slot, faded=not e.upper_holds, refutes=refutes)]
    out = []
    if e.lower is not None and e.upper is not None and not e.exact:
        out.append(Glyph("span", e.upper, source, slot, start=e.lower, faded=not (e.lower_holds and e.upper_holds)))
    if e.upper is not None:  # drawn before the lower end: where the two coincide, the holding lower end lies on top
        out.append(Glyph("upper", e.upper, source, slot, faded=not e.upper_holds))
    if e.lower is not None:
        out.append(Glyph("lower", e.lower, source, slot, faded=not e.lower_holds, refutes=refutes))
    return out


def row_glyphs(row: ClaimRow) -> list[Glyph]:
    """What the overview figure draws on ``row``, in drawing order."""
    out = [] if row.claimed is None else [Glyph("claimed", row.claimed, "claimed")]
    for slot, mark in enumerate(row.accountants):
        out += _accountant_glyphs(mark, slot, row.claimed)
    for bound in row.lower_bounds:
        refutes = row.claimed is not None and bound.value > row.claimed * (1 + 1e-9)
        out.append(Glyph("attack", bound.value, "attack", refutes=refutes))
    return out


def _short(value: float) -> str:
    return "∞" if value == math.inf else f"{value:.3g}"


def row_statement(row: ClaimRow) -> str:
    """The number behind a row's verdict, where the marks hold it: the largest refuting lower bound (``ε ≥ 15.1``)
    of a refuted row, the smallest certified upper bound at or below the claim (``ε ≤ 2.12``) of a consistent one."""
    glyphs = row_glyphs(row)
    if row.verdict == "refuted":
        refuting = [g.value for g in glyphs if g.refutes]
        return f"ε ≥ {_short(max(refuting))}" if refuting else ""
    if row.verdict == "consistent" and row.claimed is not None:
        uppers = [m.ends.upper for m in row.accountants if m.implementation and m.ends.upper_holds
                  and m.ends.upper is not None and m.ends.upper <= row.claimed * (1 + 1e-9)]
        return f"ε ≤ {_short(min(uppers))}" if uppers else ""
    return ""


def claim_panel(result: Result) -> ClaimPanel:
    """The panel of one claim-audit result: a row per reading (or one row for the claim when it has none)."""
    data = result.data
    claimed, delta = _claimed(data)
    readings = [r for r in data.get("readings") or [] if isinstance(r, Mapping)]
    if readings:
        rows = tuple(_row(f"{r.get('reading', '—')} ({r.get('role', '—')})", r, claimed) for r in readings)
    else:
        rows = (_row("the claim", data, claimed),)
    return ClaimPanel(str(data.get("claim_id") or result.title), _verdict(data), str(data.get("verdict_basis") or ""),
                      claimed, delta, rows)


def claim_panels(results: Sequence[Result]) -> list[ClaimPanel]:
    return [claim_panel(res) for res in results if res.kind == "claim-audit"]


# -- per-client ε -------------------------------------------------------------------------------------------------
#: Keys of the per-client records results carry, in order of preference: a ledger result's ``per_client``
#: (``epsilon``, ``budget``), PFA's calibration table (``rdp_epsilon``, ``claimed``; privaudit.papers.pfa.recipe) and
#: its trained run's rows (``epsilon_realised``, ``claimed_epsilon``; privaudit.papers.pfa.budget_calibration).
EPSILON_KEYS = ("epsilon", "epsilon_realised", "rdp_epsilon")
BUDGET_KEYS = ("budget", "claimed_epsilon", "claimed")


@dataclass(frozen=True)
class ClientEpsilons:
    """Per-client ε of one run or setting, with each client's budget where the record has one."""

    title: str
    epsilons: tuple[float, ...]
    budgets: tuple[float | None, ...]
    delta: float | None = None


def _first(record: Mapping[str, Any], keys: Sequence[str]) -> float | None:
    for key in keys:
        value = _number(record.get(key))
        if value is not None:
            return value
    return None


def per_client_epsilons(per_client: Any, title: str, delta: float | None = None) -> ClientEpsilons | None:
    """``per_client`` as a ledger writes it (``{client: {"epsilon": …, "budget": …}}``) or as a list of per-client
    records (:data:`EPSILON_KEYS`, :data:`BUDGET_KEYS`); ``None`` when it holds no client's ε."""
    records = list(per_client.values()) if isinstance(per_client, Mapping) else per_client
    if not isinstance(records, list):
        return None
    eps, budgets = [], []
    for record in records:
        if not isinstance(record, Mapping):
            continue
        value = _first(record, EPSILON_KEYS)
        if value is not None:
            eps.append(value)
            budgets.append(_first(record, BUDGET_KEYS))
    return ClientEpsilons(title, tuple(eps), tuple(budgets), delta) if eps else None


def reading_client_epsilons(results: Sequence[Result]) -> list[ClientEpsilons]:
    """The per-client ε tables the claims' readings record in ``details["per_client"]``."""
    out = []
    for res in results:
        claim_id = res.data.get("claim_id")
        _, delta = _claimed(res.data)
        for reading in res.data.get("readings") or []:
            details = reading.get("details") if isinstance(reading, Mapping) else None
            if isinstance(details, Mapping) and "per_client" in details:
                found = per_client_epsilons(details["per_client"], f"{claim_id} · {reading.get('reading')}", delta)
                if found is not None:
                    out.append(found)
    return out
