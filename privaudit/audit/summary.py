"""The rich summary table of claim audits (one row per reading) and of the claims registry."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from privaudit.audit.claims import ClaimStatus
from privaudit.audit.runner import ClaimAudit, ReadingOutcome

VERDICT_STYLE = {"refuted": "bold red", "consistent": "bold green", "inconclusive": "bold yellow", "pending": "dim"}


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    x = float(x)
    return "∞" if math.isinf(x) else f"{x:.3g}"


def _accounting(outcome: ReadingOutcome, implementation: bool) -> str:
    cells = []
    for e in outcome.analysis.evidence:
        if e.implementation != implementation:
            continue
        text = _fmt(e.upper) if e.lower is None else f"[{_fmt(e.lower)}, {_fmt(e.upper)}]"
        cells.append(text + ("" if e.assumptions_hold else "*"))
    return ", ".join(cells) or "—"


def _best_bound(outcome: ReadingOutcome) -> tuple[str, str, str]:
    if not outcome.bounds:
        return "—", "—", "—"
    best = max(outcome.bounds, key=lambda b: b.epsilon_lb)
    bound = f"{_fmt(best.epsilon_lb)} ({best.estimator}, α={best.significance:.3g})"
    power = max((b.power.probability for b in outcome.bounds if b.power is not None), default=None)
    return bound, _fmt(max(b.ceiling for b in outcome.bounds)), "—" if power is None else f"{power:.2f}"


def audit_table(audits: Sequence[ClaimAudit], pending: Sequence[tuple[str, str]] = ()):
    """One row per reading: claimed, accountant ε (paper / implementation), best ε_lb, ceiling, power, verdict."""
    from rich.table import Table

    table = Table(title="privaudit claim audits", show_lines=False, expand=False)
    for name in ("claim · reading", "role", "claimed (ε, δ)", "accountant ε (paper)", "accountant ε (impl.)",
                 "ε lower bound", "ceiling", "power", "verdict"):
        table.add_column(name, overflow="fold", no_wrap=name == "claim · reading")
    for audit in audits:
        style = VERDICT_STYLE.get(audit.verdict.value, "")
        table.add_row(f"[bold]{audit.claim.claim_id}[/bold]", "claim", f"({_fmt(audit.claim.epsilon)}, {audit.claim.delta:g})",
                      "", "", "", "", "", f"[{style}]{audit.verdict.value}[/{style}]")
        for outcome in audit.readings:
            r = outcome.reading
            bound, ceiling, power = _best_bound(outcome)
            v = outcome.verdict.verdict.value
            table.add_row(f"  {r.reading_id}", r.role.value, f"({_fmt(r.claimed_epsilon)}, {r.claimed_delta:g})",
                          _accounting(outcome, False), _accounting(outcome, True), bound, ceiling, power,
                          f"[{VERDICT_STYLE.get(v, '')}]{v}[/{VERDICT_STYLE.get(v, '')}]")
        for part in audit.pending:
            table.add_row(f"  {part.part_id}", "pending", "", "", "", "", "", "", "[dim]pending[/dim]")
    for claim_id, _ in pending:
        table.add_row(f"[bold]{claim_id}[/bold]", "claim", "", "", "", "", "", "", "[dim]pending[/dim]")
    table.caption = "[interval] = certified lower and upper bound; * = rests on assumptions that fail or cannot be checked"
    return table


def reasons(audits: Sequence[ClaimAudit], pending: Sequence[tuple[str, str]] = ()) -> list[str]:
    """One line per claim: its verdict and the one-line reason (and the pending claims' reasons)."""
    lines = [f"{a.claim.claim_id}: {a.verdict.value} — {a.reason}" for a in audits]
    lines += [f"{a.claim.claim_id} · {p.part_id}: pending — {p.reason}" for a in audits for p in a.pending]
    lines += [f"{claim_id}: pending — {reason}" for claim_id, reason in pending]
    return lines


def registry_table(statuses: Sequence[ClaimStatus]):
    from rich.table import Table

    table = Table(title="privaudit claims registry")
    for name in ("id", "paper", "where", "claimed (ε, δ)", "status", "reason"):
        table.add_column(name, overflow="fold", no_wrap=name == "id")
    for s in statuses:
        style = "green" if s.status == "ready" else "dim"
        table.add_row(s.claim.claim_id, s.claim.paper.split(" (")[0], s.claim.where,
                      f"({_fmt(s.claim.epsilon)}, {s.claim.delta:g})", f"[{style}]{s.status}[/{style}]", s.reason)
    return table
