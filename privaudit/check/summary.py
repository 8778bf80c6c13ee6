"""The table ``privaudit check`` prints: one row per check (status, p-value, level, why), then the readings."""

from __future__ import annotations

import math
from collections.abc import Sequence

from privaudit.check.base import CheckResult, Status
from privaudit.check.run import CheckReport
from privaudit.tables import Col, fit_table

_STYLE = {Status.PASSED: "green", Status.FAILED: "bold red", Status.NOT_RUN: "dim"}
COLUMNS = (Col("check", "check", no_wrap=True), Col("status", "status", no_wrap=True), Col("p", "p-value"),
           Col("level", "level"), Col("why", "why"))


def _p(result: CheckResult) -> str:
    if result.status is Status.NOT_RUN:
        return "—"
    if result.p_value is None:
        return "exact"
    if result.p_value == 0:
        strength = max((t.strength for t in result.tests if t.rejected), default=math.inf)
        return "< 1e-300" if math.isinf(strength) else f"1e-{strength:.0f}"
    return f"{result.p_value:.3g}"


def rows(results: Sequence[CheckResult]) -> list[dict[str, str]]:
    out = []
    for r in results:
        why = r.reason if r.status is not Status.NOT_RUN else f"needs: {r.reason}"
        out.append({"check": r.name, "status": f"[{_STYLE[r.status]}]{r.status.value}[/]", "p": _p(r),
                    "level": "—" if r.status is Status.NOT_RUN else ("exact" if r.level == 0 else f"{r.level:.3g}"),
                    "why": _escape(why)})
    return out


def _escape(text: str) -> str:
    return text.replace("[", r"\[")


def check_table(report: CheckReport, width: int):
    """A rich table of the report's checks no wider than ``width`` (None when no layout fits)."""
    return fit_table(COLUMNS, rows(report.results), width, title=f"privaudit check {report.run}")


def reading_lines(report: CheckReport) -> list[str]:
    """The lines under the table: α sharing, the readings, what was marked, the ledger's guarantee."""
    data = report.to_dict()
    lines = [f"α = {report.alpha:g}: {data['alpha_sharing']}", f"reading: {report.reading}", f"claim: {report.claim}"]
    for result in report.results:
        if result.bound is not None:
            b = result.bound
            eps = "∞" if math.isinf(b.epsilon) else f"{b.epsilon:.4g}"
            lines.append(f"certified bound ({result.name}, {b.scope}): ε ≥ {eps} at δ = {b.delta:g}, confidence "
                         f"{b.confidence:.4g} ({b.accountant})")
        if result.needs and result.status is not Status.NOT_RUN:
            lines.append(f"{result.name} also needed: {'; '.join(result.needs)}")
    verb = "marked in the checkpoint" if report.marks_written else "would mark (the checkpoint is untouched: --no-mark)"
    lines += [f"{verb}: {m}" for m in report.marked]
    if report.mark_problem:
        lines.append(f"not marked: {report.mark_problem}")
    if report.guarantee:
        lines.append(f"ledger{' after marking' if report.marked else ''}: {report.guarantee}")
    return lines
