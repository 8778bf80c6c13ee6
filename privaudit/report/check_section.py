"""The report section of ``check`` results (``privaudit check RUN --out FILE``): what each run declares against what
it recorded — one table per run (check, status, p-value, level, why), its readings, the certified bounds, what the
checks assumed and what they needed that the run did not record.

It renders the result's ``data`` only (the document ``privaudit/schemas/check.schema.json`` describes); it imports
nothing from :mod:`privaudit.check`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from privaudit.report.blocks import Block, Bullets, Paragraph, Section, Table
from privaudit.report.cells import fmt
from privaudit.report.results import Result

KIND = "check"
TITLE = "Declared against observed (privaudit check)"


def _p(check: dict[str, Any]) -> str:
    if check.get("status") == "not-run":
        return "—"
    p = check.get("p_value")
    if p is None:
        return "exact"
    if p == 0:  # underflowed: the rejecting sub-test's log₁₀ p says how small
        logs = [t.get("log10_p") for t in check.get("tests") or [] if isinstance(t, dict) and t.get("rejected")]
        logs = [x for x in logs if isinstance(x, int | float)]
        return f"≤ 1e{max(-300, int(min(logs)))}" if logs else "< 1e-300"
    return fmt(p, 3)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(checks: Sequence[dict[str, Any]]) -> Table:
    rows = []
    for c in checks:
        status = str(c.get("status", "—"))
        shown = f"**{status}**" if status == "failed" else status
        level = c.get("level")
        rows.append([_cell(c.get("name", "—")), shown, _p(c), "exact" if not level else fmt(level, 3),
                     _cell(c.get("reason", ""))])
    return Table(["check", "status", "p-value", "level", "why"], rows)


def _bounds(checks: Sequence[dict[str, Any]]) -> list[str]:
    items = []
    for c in checks:
        b = c.get("bound")
        if isinstance(b, dict):
            claimed = b.get("claimed")
            verdict = " — **refutes** the claim" if b.get("refutes") else ""
            items.append(f"{c.get('name')}: certified ε ≥ {fmt(b.get('epsilon'))} at δ = {fmt(b.get('delta'))} "
                         f"(confidence {fmt(b.get('confidence'))}, {b.get('scope')}; {b.get('accountant')}) against the "
                         f"claimed ε = {fmt(claimed)}{verdict}")
    return items


def _needs(checks: Sequence[dict[str, Any]]) -> list[str]:
    items = []
    for c in checks:
        needs = [str(n) for n in c.get("needs") or []]
        if needs:
            items.append(f"{c.get('name')}: {'; '.join(needs)}")
    return items


def _assumptions(checks: Sequence[dict[str, Any]]) -> list[str]:
    items = []
    for c in checks:
        if c.get("status") == "not-run":
            continue
        lines = [str(a) for a in c.get("assumptions") or []]
        if c.get("null"):
            lines.insert(0, f"null: {c.get('null')}")
        if lines:
            items.append(f"{c.get('name')}: {'; '.join(lines)}")
    return items


def check_section(results: Sequence[Result]) -> Section | None:
    """The section of every ``check`` result (``None`` without one)."""
    if not results:
        return None
    blocks: list[Block] = []
    for res in results:
        d = res.data
        checks = [c for c in d.get("checks") or [] if isinstance(c, dict)]
        what = d.get("run") or d.get("probe") or res.title
        blocks.append(Paragraph(f"**{_cell(what)}** ({d.get('framework') or 'probe'}): **{d.get('outcome', '—')}** at "
                                f"α = {fmt(d.get('alpha'))} — {d.get('alpha_sharing') or 'one probe'}."))
        blocks.append(_table(checks))
        lines = [f"reading: {d.get('reading')}" if d.get("reading") else "", f"claim: {d.get('claim')}" if d.get("claim") else ""]
        lines += _bounds(checks)
        verb = "marked in the checkpoint" if d.get("marks_written") else "would mark (checkpoint untouched)"
        lines += [f"{verb}: {m}" for m in d.get("marked") or []]
        if d.get("guarantee"):
            lines.append(f"the ledger{' after marking' if d.get('marked') else ''}: {d.get('guarantee')}")
        blocks.append(Bullets([_cell(x) for x in lines if x]))
        needs = _needs(checks)
        if needs:
            blocks += [Paragraph("What the checks needed that the run did not record:"), Bullets([_cell(n) for n in needs])]
        assumed = _assumptions(checks)
        if assumed:
            blocks += [Paragraph("What the checks assumed:"), Bullets([_cell(a) for a in assumed])]
    return Section(KIND, TITLE, blocks)
