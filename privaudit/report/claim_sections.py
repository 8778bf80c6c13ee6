"""The claims sections of a report: the overview figure a report opens with and the claims table.

Built from ``claim-audit`` results (:mod:`privaudit.audit`): each claim's claimed (ε, δ), the accountants' ε (which
end holds, :mod:`privaudit.accounting.evidence_ends`), the attacks' certified ε lower bounds with their ceiling and
power, and the verdict with its basis; the papers' own words and the numbers privaudit chose beside them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from privaudit.accounting.evidence_ends import contradictions, of_evidence, sentence
from privaudit.report import figures
from privaudit.report.blocks import Block, Bullets, Figure, Paragraph, Section, Table
from privaudit.report.cells import client_histogram, fmt
from privaudit.report.claim_overview import claim_panels, reading_client_epsilons
from privaudit.report.results import Result

VERDICT_MEANING = [
    "**refuted** — the claim is false for the mechanism examined: an attack certified an ε lower bound above the "
    "claim, or a certified lower bound on the examined mechanism's ε (e.g. the exact ε of a Gaussian release) exceeds it.",
    "**consistent** — not refuted, and either a certified upper bound under assumptions that hold for the "
    "implementation is at or below the claim, or an attack declared optimal for a declared Gaussian mechanism found "
    "nothing although an optimal attack on a Gaussian mechanism at 2× the claim would be refuted with probability "
    "≥ 0.8 at these sample sizes. Consistent is evidence against violations of 2× or more; it is a proof only when "
    "the reason says \"certified ε ≤ …\".",
    "**inconclusive** — neither: the attacks lacked power (see ceiling and power), the attack is not declared "
    "optimal, the mechanism family has no attack-based power, or the accounting rests on assumptions that fail or "
    "cannot be checked. It does not mean the claim is likely true.",
    "A claim's verdict names its basis, e.g. \"refuted (as implemented), consistent (as stated)\": *as implemented* "
    "combines the readings of the reference code, *as stated* those of the mechanism the paper states and analyses "
    "(each refuted if one of its readings is, consistent if all are). The single word before it is refuted when either "
    "basis is.",
]
#: Shown when a claim states no ε and is audited as the comparison it states (privaudit.audit.comparison).
COMPARISON_MEANING = [
    "**supported / not supported / inconclusive** (claims that state no ε, audited as the comparison they state): "
    "supported — every comparison's one-sided upper confidence bound on mean(candidate − reference) is within the "
    "margin Δ; not supported — some comparison's lower bound exceeds Δ (the candidate is measurably worse); "
    "inconclusive — neither, or the measurement failed its own check, or a stronger attacker the code has was not run.",
    "**fact** — established by construction or exact accounting (e.g. \"no DP guarantee (ε = ∞)\" for a release "
    "without noise), reported beside the verdict; never a verdict on an ε the paper does not claim.",
]


def _claimed(data: dict) -> tuple[Any, Any]:
    claimed = data.get("claimed")
    if isinstance(claimed, dict):
        return claimed.get("epsilon"), claimed.get("delta")
    return claimed, data.get("delta")


def _verdict(data: dict) -> tuple[str, str]:
    verdict = data.get("verdict")
    if isinstance(verdict, dict):
        return str(verdict.get("verdict", "—")), str(verdict.get("reason", data.get("reason", "")))
    return str(verdict or "—"), str(data.get("reason", ""))


def _evidence(data: dict) -> list[dict]:
    """Accounting evidence as a list of dicts (label, accountant, upper, lower, implementation, ...)."""
    acc = data.get("accountant")
    if isinstance(acc, list):
        return [a for a in acc if isinstance(a, dict)]
    if isinstance(acc, dict):
        if "upper" in acc or "label" in acc:
            return [acc]
        return [{"label": str(k), **(v if isinstance(v, dict) else {"upper": v})} for k, v in acc.items()]
    if acc is not None:
        return [{"label": "accountant", "upper": acc}]
    return []


def _accountant_cells(data: dict) -> tuple[str, str]:
    """Each accountant's ε in words, saying which end holds and which rests on what (privaudit.accounting.evidence_ends)."""
    paper: list[str] = []
    impl: list[str] = []
    for e in _evidence(data):
        text = f"{sentence(of_evidence(e), fmt)} ({e.get('accountant', '')}; {e.get('label', '')})"
        column = impl if e.get("implementation") else paper
        if text not in column:  # readings often share one piece of evidence: show it once
            column.append(text)
    return "<br>".join(paper) or "—", "<br>".join(impl) or "—"


def _bounds_cell(data: dict) -> tuple[str, str, str]:
    lbs = [b for b in data.get("lower_bounds") or [] if isinstance(b, dict)]
    if not lbs:
        return "—", "—", "—"
    eps = "<br>".join(f"{b.get('estimator')}: {fmt(b.get('epsilon_lb'))} (α={fmt(b.get('significance'), 2)})" for b in lbs)
    ceil = "<br>".join(f"{b.get('estimator')}: {fmt(b.get('ceiling'))}" for b in lbs)
    powers = []
    for b in lbs:
        p = b.get("power")
        if isinstance(p, dict) and "lower" in p:  # an optimal attack on a Gaussian mechanism at factor × the claim
            declared = ", attack declared optimal" if b.get("attack_optimal") else ""
            powers.append(f"{b.get('estimator')}: ≥ {fmt(p.get('lower'), 2)} at {fmt(p.get('factor'), 2)}× "
                          f"(optimal attack{declared})")
        elif isinstance(p, dict):  # results written before issue 24: resampled from the observed scores
            powers.append(f"{b.get('estimator')}: {fmt(p.get('probability'), 2)} at {fmt(p.get('factor'), 2)}×")
        else:
            powers.append(f"{b.get('estimator')}: —")
    return eps, ceil, "<br>".join(powers)


def _claim_row(name: str, where: str, data: dict, verdict_cell: str) -> list[str]:
    eps, delta = _claimed(data)
    paper, impl = _accountant_cells(data)
    lb, ceil, power = _bounds_cell(data)
    claimed = "—" if eps is None and delta is None else f"({fmt(eps)}, {fmt(delta)})"  # None: a comparison claim's reading
    return [name, where or "—", claimed, paper, impl, lb, ceil, power, verdict_cell]


def _quotes(data: dict) -> list[dict]:
    return [q for q in data.get("quotes") or [] if isinstance(q, dict) and q.get("text")]


def _quote_text(q: dict) -> str:
    return f"“{q.get('text')}” ({q.get('source') or q.get('where') or '—'})"


def _claim_verdict_cell(data: dict, verdict: str, reason: str) -> str:
    """``**refuted** — refuted (as implemented), consistent (as stated)`` and each basis' reason; old files: the reason."""
    by_role = data.get("verdicts_by_role")
    if not isinstance(by_role, dict) or not by_role:
        return f"**{verdict}** — {reason}"
    lines = [f"**{verdict}** — {data.get('verdict_basis') or verdict}"]
    for v in by_role.values():
        if isinstance(v, dict):
            lines.append(f"{v.get('basis')}: **{v.get('verdict')}** — {v.get('reason')}")
    return "<br>".join(lines)


def _claimed_cell(data: dict) -> str:
    """``(1.4, 0.001)`` and, when the result records it, ``ε stated, δ chosen``."""
    eps, delta = _claimed(data)
    if data.get("claim_kind") == "comparison":  # the paper states no (ε, δ): the criterion it is audited by
        return f"none stated (a comparison claim): {data.get('criterion') or '—'}"
    text = f"({fmt(eps)}, {fmt(delta)})"
    marks = data.get("claimed_provenance")
    if isinstance(marks, dict) and any(v != "unrecorded" for v in marks.values()):
        text += f"<br>ε {marks.get('epsilon')}, δ {marks.get('delta')}"
    return text


def _numbers(data: dict, source: str) -> str:
    items = []
    for n in data.get("numbers") or []:
        if not isinstance(n, dict) or n.get("source") != source:
            continue
        value = fmt(n.get("value")) if isinstance(n.get("value"), int | float) else str(n.get("value"))
        if source == "stated":
            items.append(f"{n.get('name')} = {value} ({n.get('where')})")
        else:
            origin = f"; from {n['where']}" if n.get("where") else ""
            items.append(f"{n.get('name')} = {value} ({n.get('reason')}{origin})")
    return "<br>".join(items) or "—"


def _sources_table(results: Sequence[Result]) -> Table | None:
    """Each claim in the paper's words, the numbers the paper states and those privaudit chose (and why)."""
    rows = []
    for res in results:
        d = res.data
        quotes = _quotes(d)
        if not quotes and not d.get("numbers"):
            rows.append([str(d.get("claim_id")), "— (no quote recorded)", "—", "—"])
            continue
        rows.append([str(d.get("claim_id")), "<br>".join(_quote_text(q) for q in quotes) or "—",
                     _numbers(d, "stated"), _numbers(d, "chosen")])
    if not rows:
        return None
    return Table(["claim", "the paper's words (seed file, section)", "stated by the paper", "chosen by privaudit (why)"], rows)


def overview_section(results: Sequence[Result]) -> Section | None:
    """The figure a report opens with: every claim's claimed ε, accountants' ε and attacks' lower bounds on one axis."""
    panels = claim_panels(results)
    if not panels:
        return None
    caption = ("One panel per claim, one row per reading (its verdict on the right, with the number that decided it), "
               "on one log ε axis labelled under every panel: the claimed ε (black bar), each accountant's ε (blue: the "
               "code as run, purple: under the paper's assumptions; ▶ its lower end, ◀ its upper end, a line between "
               "them, ◆ where they coincide; an end that rests on assumptions that fail is faded — a certified lower end "
               "of the code's ε never is) and each attack's certified ε lower bound (red ▶). A red ▶ or a solid blue ▶ "
               "right of the black bar is more ε than claimed: a refutation.")
    refuted = [p.claim_id for p in panels if p.verdict in ("refuted", "not supported")]
    summary = (f"{len(refuted)} of {len(panels)} claim(s) refuted or not supported: {', '.join(refuted)}." if refuted
               else f"None of the {len(panels)} claim(s) is refuted.")
    return Section("overview", "The claims at a glance", [
        Figure("claims-overview", figures.claims_overview_figure(panels), caption),
        Paragraph(f"{summary} The numbers, the reasons and the papers' words are in the Claims section below.")], lead=True)


def claims_section(results: Sequence[Result]) -> Section | None:
    if not results:
        return None
    header = ["claim", "paper / where — the paper's words", "claimed (ε, δ)", "accountant ε (paper's assumptions)",
              "accountant ε (implementation)", "ε lower bound per estimator", "ceiling", "power", "verdict (basis) — reason"]
    rows = []
    counts: dict[str, int] = {}
    for res in results:
        d = res.data
        verdict, reason = _verdict(d)
        counts[verdict] = counts.get(verdict, 0) + 1
        where = " · ".join(str(x) for x in (d.get("paper"), d.get("where") or d.get("theorem")) if x) or "—"
        quotes = _quotes(d)
        if quotes:  # the claim's own words beside its verdict
            where += "<br>" + _quote_text(quotes[0])
        readings = [r for r in d.get("readings") or [] if isinstance(r, dict)]
        if not readings:
            rows.append(_claim_row(str(d.get("claim_id")), where, d, _claim_verdict_cell(d, verdict, reason)))
            continue
        # One row for the claim's verdict, then one row per reading with its own evidence (as the CLI prints it).
        rows.append([f"**{d.get('claim_id')}**", where, _claimed_cell(d), "", "", "", "", "",
                     _claim_verdict_cell(d, verdict, reason)])
        for r in readings:
            r_verdict, r_reason = _verdict(r)
            label = f"↳ {r.get('reading', '—')} ({r.get('role', '—')})"
            rows.append(_claim_row(label, str(r.get("title") or ""), {**d, **r}, f"{r_verdict} — {r_reason}"))
    summary = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    blocks: list[Block] = [Paragraph(f"{len(results)} claim(s) audited: {summary}. Each claim's verdict names its basis: "
                                     "*as implemented* (readings of the reference code), *as stated* (the mechanism as "
                                     "the paper states and analyses it); validity checks test the audit itself. "
                                     "Accountant ε columns say which end of each ε holds: a certified lower bound "
                                     "(ε ≥) holds for a constructed worst case; an upper bound (ε ≤) certifies only "
                                     "where its assumptions hold.")]
    broken = accounting_contradictions(results)
    if broken:  # never silently: a lower end above an upper end of one mechanism is a bug in what computed them
        blocks.append(Paragraph("**Contradictory accounting (a bug in the audit, not a finding):** " + "; ".join(broken)))
    blocks.append(Table(header, rows))
    sources = _sources_table(results)
    if sources is not None:
        blocks += [Paragraph("**The claims in the papers' own words.** *Stated* numbers are printed in the paper (seed "
                             "file and section); *chosen* numbers are not in the paper — privaudit picked them, for the "
                             "reason given:"), sources]
    blocks += _reading_tables(results)
    groups = reading_client_epsilons(results)
    if groups:
        blocks.append(Paragraph("**Per-client ε the readings recorded** (each client's ε against its own budget):"))
        blocks += [client_histogram(group, f"claims-clients-{i}") for i, group in enumerate(groups)]
    notes = _claim_notes(results)
    if notes:  # validity statements (e.g. whether a composed bound may be used) belong next to the numbers
        blocks += [Paragraph("Notes:"), Bullets(notes)]
    comparison = any(res.data.get("claim_kind") == "comparison" for res in results)
    blocks += [Paragraph("What the verdicts mean:"), Bullets(VERDICT_MEANING + (COMPARISON_MEANING if comparison else []))]
    return Section("claims", "Claims", blocks)


#: Verdicts decided from accounting by privaudit.audit.verdict.decide, which reads every piece of implementation
#: evidence of a reading as a bound on one mechanism, the one examined. (A "fact" reading lists several settings.)
ACCOUNTING_VERDICTS = ("refuted", "consistent", "inconclusive")


def accounting_contradictions(results: Sequence[Result]) -> list[str]:
    """Every reading whose certified lower end lies above a certified upper end of the mechanism it examines."""
    found = []
    for res in results:
        readings = [r for r in res.data.get("readings") or [] if isinstance(r, dict)] or [res.data]
        for r in readings:
            if _verdict(r)[0] not in ACCOUNTING_VERDICTS:
                continue
            label = f"{res.data.get('claim_id')} · {r.get('reading')}" if r is not res.data else str(res.data.get("claim_id"))
            found += contradictions(_evidence(r), label)
    return found


def _reading_tables(results: Sequence[Result]) -> list[Block]:
    """Tables a reading records in ``details["table"]`` (``title``, ``header``, ``rows``), e.g. a PSNR comparison's."""
    blocks: list[Block] = []
    for res in results:
        for r in res.data.get("readings") or []:
            table = (r.get("details") or {}).get("table") if isinstance(r, dict) else None
            if not isinstance(table, dict) or not table.get("header") or not isinstance(table.get("rows"), list):
                continue
            blocks.append(Paragraph(f"**{res.data.get('claim_id')} · {r.get('reading')}** — {table.get('title') or ''}"))
            blocks.append(Table([str(h) for h in table["header"]], [[fmt(v, 3) for v in row] for row in table["rows"]]))
    return blocks


def _claim_notes(results: Sequence[Result]) -> list[str]:
    """``Notes — <claim_id>: <note>`` for every string in each result's ``notes`` (duplicates shown once)."""
    items: list[str] = []
    for res in results:
        notes = res.data.get("notes")
        if not isinstance(notes, list):
            continue
        for note in notes:
            item = f"Notes — {res.data.get('claim_id')}: {note}"
            if isinstance(note, str) and note.strip() and item not in items:
                items.append(item)
    return items
