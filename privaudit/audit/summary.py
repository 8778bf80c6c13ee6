"""The rich summary table of claim audits (one row per reading) and of the claims registry.

A claim's row names its verdict's basis — one verdict per role, "refuted (as implemented), consistent (as
stated)" — and its claimed (ε, δ) says which number the paper states and which privaudit chose; the registry
(``audit --list``) shows each claim's own words with the stated and chosen numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from privaudit.audit.claims import Claim, ClaimStatus
from privaudit.audit.runner import ClaimAudit, ReadingOutcome

VERDICT_STYLE = {"refuted": "bold red", "consistent": "bold green", "inconclusive": "bold yellow", "pending": "dim",
                 "supported": "bold green", "not supported": "bold red", "fact": "bold cyan"}  # the last three: comparison claims


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


def _verdict_cell(verdict: str, text: str | None = None) -> str:
    style = VERDICT_STYLE.get(verdict, "")
    return f"[{style}]{text or verdict}[/{style}]" if style else (text or verdict)


def basis_cell(audit: ClaimAudit) -> str:
    """``refuted (as implemented), consistent (as stated)``, each verdict in its colour."""
    by_role = audit.by_role or {}
    parts = [_verdict_cell(v["verdict"], f"{v['verdict']} ({v['basis']})") for role, v in by_role.items() if role != "validity"]
    return ", ".join(parts) or _verdict_cell(audit.verdict.value)


def claimed_cell(claim: Claim) -> str:
    """``(1.4, 0.001)`` plus which number the paper states: ``ε stated, δ chosen``."""
    if claim.epsilon is None:  # a comparison claim (privaudit.audit.comparison): the paper states no (ε, δ)
        return "none stated\n(a comparison claim)"
    marks = claim.provenance()
    text = f"({_fmt(claim.epsilon)}, {claim.delta:g})"
    if any(v != "unrecorded" for v in marks.values()):
        text += f"\nε {marks['epsilon']}, δ {marks['delta']}"
    return text


def audit_table(audits: Sequence[ClaimAudit], pending: Sequence[tuple[str, str]] = ()):
    """One row per reading: claimed, accountant ε (paper / implementation), best ε_lb, ceiling, power, verdict."""
    from rich.table import Table

    table = Table(title="privaudit claim audits", show_lines=False, expand=False)
    for name in ("claim · reading", "role", "claimed (ε, δ)", "accountant ε (paper)", "accountant ε (impl.)",
                 "ε lower bound", "ceiling", "power", "verdict"):
        table.add_column(name, overflow="fold", no_wrap=name == "claim · reading")
    for audit in audits:
        table.add_row(f"[bold]{audit.claim.claim_id}[/bold]", "claim", claimed_cell(audit.claim),
                      "", "", "", "", "", basis_cell(audit))
        for outcome in audit.readings:
            r = outcome.reading
            bound, ceiling, power = _best_bound(outcome)
            v = outcome.verdict.verdict.value
            claimed = "—" if r.claimed_epsilon is None else f"({_fmt(r.claimed_epsilon)}, {r.claimed_delta:g})"
            table.add_row(f"  {r.reading_id}", r.role.value, claimed,
                          _accounting(outcome, False), _accounting(outcome, True), bound, ceiling, power,
                          f"[{VERDICT_STYLE.get(v, '')}]{v}[/{VERDICT_STYLE.get(v, '')}]")
        for part in audit.pending:
            table.add_row(f"  {part.part_id}", "pending", "", "", "", "", "", "", "[dim]pending[/dim]")
    for claim_id, _ in pending:
        table.add_row(f"[bold]{claim_id}[/bold]", "claim", "", "", "", "", "", "", "[dim]pending[/dim]")
    table.caption = ("\\[interval] = certified lower and upper bound; * = rests on assumptions that fail or cannot be checked; "
                     "claim rows: the verdict per basis (as implemented = reference-code readings, as stated = the paper's "
                     "mechanism) and whether the paper states ε and δ or privaudit chose them (audit --list says why)")
    return table


def reasons(audits: Sequence[ClaimAudit], pending: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Per claim: its verdict with its basis, then one line per basis with that basis' reason (and pending reasons)."""
    lines = []
    for a in audits:
        lines.append(f"{a.claim.claim_id}: {a.verdict.value} — {a.basis}")
        by_role = a.by_role or {}
        for v in by_role.values():
            lines.append(f"  {v['basis']}: {v['verdict']} — {v['reason']}")
        if not by_role:
            lines.append(f"  {a.reason}")
    lines += [f"{a.claim.claim_id} · {p.part_id}: pending — {p.reason}" for a in audits for p in a.pending]
    lines += [f"{claim_id}: pending — {reason}" for claim_id, reason in pending]
    return lines


def _quotes_text(claim: Claim) -> str:
    if not claim.quotes:
        return "— (no quote recorded)"
    first = claim.quotes[0]
    more = len(claim.quotes) - 1
    return f"“{first.text}” ({first.source})" + (f"\n(+{more} more quote(s): --list --json)" if more else "")


def _numbers_text(claim: Claim, source: str) -> str:
    return "\n".join(f"• {n.text()}" for n in claim.numbers if n.source == source) or "—"


def registry_table(statuses: Sequence[ClaimStatus]):
    """The registry: each claim in the paper's words, its numbers stated by the paper or chosen by privaudit (why)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="privaudit claims registry", show_lines=True)
    for name in ("id", "paper · where", "the paper's words", "claimed (ε, δ)", "stated by the paper",
                 "chosen by privaudit (why)", "status"):
        table.add_column(name, overflow="fold", no_wrap=name == "id")
    for s in statuses:
        style = "green" if s.status == "ready" else "dim"
        c = s.claim
        table.add_row(c.claim_id, escape(f"{c.paper.split(' (')[0]} · {c.where}"), escape(_quotes_text(c)),
                      escape(claimed_cell(c)), escape(_numbers_text(c, "stated")), escape(_numbers_text(c, "chosen")),
                      f"[{style}]{s.status}[/{style}] — {escape(s.reason)}")
    table.caption = ("stated = printed in the paper (seed file and section); chosen = not in the paper, picked by privaudit "
                     "for the reason given")
    return table
