"""The rich summary table of claim audits (one row per reading) and of the claims registry.

A claim's row names its verdict's basis — one verdict per role, "refuted (as implemented), consistent (as
stated)" — and its claimed (ε, δ) says which number the paper states and which privaudit chose; the registry
(``audit --list``) shows each claim's own words with the stated and chosen numbers.

Accountant ε cells say which end holds (:mod:`privaudit.accounting.evidence_ends`): ``≥15.13, ≤15.13*`` is a certified
lower bound beside an upper bound that rests on assumptions that fail — the ``*`` never marks a refuting value.
Given the terminal's width, :func:`audit_table` never cuts a verdict word or a number (:mod:`privaudit.tables`): it
drops the ceiling and power columns, then the role and paper columns (the role moves into the reading's label), and
below that prints one block per reading.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from privaudit.accounting.evidence_ends import cell_text, of_evidence
from privaudit.audit.claims import Claim
from privaudit.audit.runner import ClaimAudit, ReadingOutcome
from privaudit.tables import Col, fit_table

VERDICT_STYLE = {"refuted": "bold red", "consistent": "bold green", "inconclusive": "bold yellow",
                 "supported": "bold green", "not supported": "bold red", "fact": "bold cyan"}  # the last three: comparison claims


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    x = float(x)
    return "∞" if math.isinf(x) else f"{x:.3g}"


def _fmt4(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.4g}"


def _accounting(outcome: ReadingOutcome, implementation: bool) -> str:
    """Each accountant's ε, end by end: ``=0.8875``, ``[9.178, 10.59]``, ``≥271.1``, ``≥15.13, ≤15.13*``."""
    cells = [cell_text(of_evidence(e), _fmt4) for e in outcome.analysis.evidence if e.implementation == implementation]
    return "; ".join(cells) or "—"


def _best_bound(outcome: ReadingOutcome) -> tuple[str, str, str]:
    if not outcome.bounds:
        return "—", "—", "—"
    best = max(outcome.bounds, key=lambda b: b.epsilon_lb)
    bound = f"{_fmt(best.epsilon_lb)} ({best.estimator}, α={best.significance:.3g})"
    # the power of an optimal attack on a Gaussian mechanism at 2× the claim (its Monte-Carlo lower limit)
    power = max((b.power.lower for b in outcome.bounds if b.power is not None), default=None)
    return bound, _fmt(max(b.ceiling for b in outcome.bounds)), "—" if power is None else f"≥ {power:.2f}"


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


#: The claim table's columns, widest layout first; :func:`audit_table` takes the first that fits the terminal.
_ALL = (Col("label", "claim · reading", no_wrap=True), Col("role", "role"), Col("claimed", "claimed (ε, δ)"),
        Col("paper", "accountant ε (paper)"), Col("impl", "accountant ε (impl.)"), Col("bound", "ε lower bound"),
        Col("ceiling", "ceiling"), Col("power", "power"), Col("verdict", "verdict"))
LAYOUTS: tuple[tuple[Col, ...], ...] = (
    _ALL,
    tuple(c for c in _ALL if c.key not in ("ceiling", "power")),
    (Col("short", "claim · reading (role)", no_wrap=True), *(c for c in _ALL if c.key in ("claimed", "impl", "bound")),
     Col("word", "verdict")),
)
_ROLE = {"implementation": "impl.", "paper": "paper", "validity": "validity", "fact": "fact"}
CAPTION = ("\\[lower, upper] = certified lower and upper bound; =x exact; ≥x a certified lower bound (it holds for a "
           "constructed worst case); ≤x an upper bound; * = that value rests on assumptions that fail or cannot be checked; "
           "claim rows: the verdict per basis (as implemented = reference-code readings, as stated = the paper's "
           "mechanism) and whether the paper states ε and δ or privaudit chose them (audit --list says why)")


def _rows(audits: Sequence[ClaimAudit]) -> list[dict[str, str]]:
    """One dict of cells per table row (claim or reading), every layout's keys filled in."""
    rows = []
    for audit in audits:
        verdict = audit.verdict.value
        rows.append({"kind": "claim", "label": f"[bold]{audit.claim.claim_id}[/bold]", "role": "claim",
                     "short": f"[bold]{audit.claim.claim_id}[/bold]", "claimed": claimed_cell(audit.claim),
                     "verdict": basis_cell(audit), "word": _verdict_cell(verdict), "basis": basis_cell(audit)})
        for outcome in audit.readings:
            r = outcome.reading
            bound, ceiling, power = _best_bound(outcome)
            v = outcome.verdict.verdict.value
            claimed = "—" if r.claimed_epsilon is None else f"({_fmt(r.claimed_epsilon)}, {r.claimed_delta:g})"
            rows.append({"kind": "reading", "label": f"  {r.reading_id}", "role": r.role.value,
                         "short": f"  {r.reading_id} ({_ROLE.get(r.role.value, r.role.value)})", "claimed": claimed,
                         "paper": _accounting(outcome, False), "impl": _accounting(outcome, True), "bound": bound,
                         "ceiling": ceiling, "power": power, "verdict": _verdict_cell(v), "word": _verdict_cell(v)})
    return rows


def _stacked(rows: Sequence[dict[str, str]]):
    """One block per claim and reading, every value on a labelled line of its own: for the narrowest terminals."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    parts: list[Any] = [Text("privaudit claim audits", style="italic")]
    for row in rows:
        if row["kind"] == "claim":
            parts.append(Text.from_markup(f"{row['short']} {row['claimed'].replace(chr(10), ' ')}: {row['basis']}"))
            continue
        parts.append(Padding(Text.from_markup(f"{row['short'].strip()}: {row['word']}"), (0, 0, 0, 2)))
        for key, name in (("impl", "accountant ε (impl.)"), ("paper", "accountant ε (paper)"), ("bound", "ε lower bound"),
                          ("ceiling", "ceiling"), ("power", "power"), ("claimed", "claimed (ε, δ)")):
            if row.get(key) and row[key] != "—":
                parts.append(Padding(Text(f"{name}: {row[key]}"), (0, 0, 0, 4)))
    parts.append(Text(CAPTION.replace("\\[", "["), style="dim"))
    return Group(*parts)


def audit_table(audits: Sequence[ClaimAudit], width: int | None = None):
    """One row per reading: claimed, accountant ε (paper / implementation), best ε_lb, ceiling, power, verdict.

    ``width`` (the terminal's): the widest layout of :data:`LAYOUTS` in which no word is cut (:func:`privaudit.tables.
    fit_table`), else one block per reading; ``None``: every column, sized by rich.
    """
    from rich.table import Table

    rows = _rows(audits)
    options = {"title": "privaudit claim audits", "caption": CAPTION, "show_lines": False}
    if width is not None:
        for layout in LAYOUTS:
            table = fit_table(layout, rows, width, **options)
            if table is not None:
                return table
        return _stacked(rows)
    table = Table(expand=False, **options)
    for col in _ALL:
        table.add_column(col.header, overflow="fold", no_wrap=col.no_wrap)
    for row in rows:
        table.add_row(*(row.get(col.key, "") for col in _ALL))
    return table


def reasons(audits: Sequence[ClaimAudit]) -> list[str]:
    """Per claim: its verdict with its basis, then one line per basis with that basis' reason."""
    lines = []
    for a in audits:
        lines.append(f"{a.claim.claim_id}: {a.verdict.value} — {a.basis}")
        by_role = a.by_role or {}
        for v in by_role.values():
            lines.append(f"  {v['basis']}: {v['verdict']} — {v['reason']}")
        if not by_role:
            lines.append(f"  {a.reason}")
    return lines


def _quotes_text(claim: Claim) -> str:
    if not claim.quotes:
        return "— (no quote recorded)"
    first = claim.quotes[0]
    more = len(claim.quotes) - 1
    return f"“{first.text}” ({first.source})" + (f"\n(+{more} more quote(s): --list --json)" if more else "")


def _numbers_text(claim: Claim, source: str) -> str:
    return "\n".join(f"• {n.text()}" for n in claim.numbers if n.source == source) or "—"


def registry_table(claims: Sequence[Claim]):
    """The registry: each claim in the paper's words, its numbers stated by the paper or chosen by privaudit (why)."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="privaudit claims registry", show_lines=True)
    for name in ("id", "paper · where", "the paper's words", "claimed (ε, δ)", "stated by the paper",
                 "chosen by privaudit (why)"):
        table.add_column(name, overflow="fold", no_wrap=name == "id")
    for c in claims:
        table.add_row(c.claim_id, escape(f"{c.paper.split(' (')[0]} · {c.where}"), escape(_quotes_text(c)),
                      escape(claimed_cell(c)), escape(_numbers_text(c, "stated")), escape(_numbers_text(c, "chosen")))
    table.caption = ("stated = printed in the paper (seed file and section); chosen = not in the paper, picked by privaudit "
                     "for the reason given")
    return table
