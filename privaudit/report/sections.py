"""Report sections built from results, as format-neutral blocks (paragraphs, lists, tables, figures).

Each builder takes the results of one kind and returns a :class:`Section`, or ``None`` when there is
nothing to show; the renderers (:mod:`privaudit.report.render`) turn blocks (:mod:`privaudit.report.blocks`)
into Markdown or HTML. The claims sections are :mod:`privaudit.report.claim_sections`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from privaudit.report import figures
from privaudit.report.blocks import Block, Bullets, Figure, Paragraph, Section, Table
from privaudit.report.cells import client_histogram, fmt
from privaudit.report.check_section import check_section
from privaudit.report.claim_overview import per_client_epsilons
from privaudit.report.claim_sections import claims_section
from privaudit.report.command_line import redact_text
from privaudit.report.results import Result


def ledger_section(results: Sequence[Result]) -> Section | None:
    if not results:
        return None
    blocks: list[Block] = []
    for i, res in enumerate(results):
        d = res.data
        per_client = d.get("per_client") or {}
        delta = d.get("delta") or 0.0
        over = [c for c, v in per_client.items() if isinstance(v, dict) and v.get("budget") is not None
                and v.get("epsilon", 0) > v["budget"] * (1 + 1e-9)]
        invalid = [c for c, v in per_client.items() if isinstance(v, dict) and v.get("valid") is False]
        guarantee = ("the federation's guarantee" if not invalid else
                     "**not a guarantee**: it holds only if assumptions the run's own ledger marks failed held")
        blocks.append(Paragraph(
            f"**{res.title}** — accountant {d.get('accountant')}, δ = {fmt(delta)}: max ε = {fmt(d.get('max_epsilon'))} "
            f"({guarantee}), mean ε = {fmt(d.get('mean_epsilon'))}, {len(per_client)} clients; "
            f"{len(over)} over budget; {len(invalid)} with ε resting on failed assumptions."))
        blocks.extend(_ledger_failures(per_client) + _reported_epsilons(d.get("reported_epsilon")))
        if per_client:
            blocks.append(Figure(f"ledger-{i}", figures.client_epsilon_figure(per_client, res.title, float(delta)),
                                 f"Per-client ε at δ = {fmt(delta)} against budgets ({res.title})."))
            group = per_client_epsilons(per_client, res.title, float(delta))
            if group is not None:
                blocks.append(client_histogram(group, f"ledger-histogram-{i}"))
    return Section("ledger", "Per-client ε vs budget", blocks)


def _ledger_failures(per_client: dict) -> list[Block]:
    """Why clients' releases are invalid, as the ledger records it (client, rounds, reason)."""
    items = []
    for cid, v in per_client.items():
        for failure in (v.get("failures") or []) if isinstance(v, dict) else []:
            if isinstance(failure, dict):
                rounds = failure.get("rounds") or []
                where = f"round{'s' if len(rounds) != 1 else ''} {', '.join(str(r) for r in rounds[:8])}" + ("…" if len(rounds) > 8 else "")
                items.append(f"client {cid}, {where}: {failure.get('reason')}")
    return [Paragraph("Releases the run's ledger marks invalid:"), Bullets(items)] if items else []


def _reported_epsilons(reported: Any) -> list[Block]:
    """The training framework's own ε, each classified against the recorded releases (privaudit.accounting.reported)."""
    # the assessment loads every accountant (scipy, prv-accountant): only for ledgers that carry a reported ε
    from privaudit.accounting.reported import describe_assessment

    items = [describe_assessment(entry) for entry in reported or [] if isinstance(entry, dict)]
    if not items:
        return []
    return [Paragraph("ε reported by the training framework itself, and whether it bounds what ran:"), Bullets(items)]


def epsilon_curve_section(results: Sequence[Result]) -> Section | None:
    if not results:
        return None
    blocks: list[Block] = []
    for i, res in enumerate(results):
        d = res.data
        series = {str(k): list(v) for k, v in (d.get("epsilon") or {}).items()}
        png = figures.lines_figure(d.get("rounds") or [], series, res.title, "round", f"ε at δ = {fmt(d.get('delta'))}")
        blocks.append(Figure(f"epsilon-curve-{i}", png, f"ε after each round, per accountant ({res.title})."))
    return Section("epsilon-curve", "ε vs rounds", blocks)


def _auc_text(value: Any) -> str:
    if isinstance(value, dict):
        est = value.get("estimate", value.get("auc"))
        if "low" in value and "high" in value:
            return f"{fmt(est, 3)} [{fmt(value['low'], 3)}, {fmt(value['high'], 3)}]"
        return fmt(est, 3)
    return fmt(value, 3)


def _tpr_items(value: Any) -> dict[float, Any]:
    out: dict[float, Any] = {}
    if isinstance(value, dict):
        for k, v in value.items():
            try:
                out[float(k)] = v
            except ValueError:
                continue
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and "fpr" in item:
                out[float(item["fpr"])] = item.get("tpr", item)
    return out


def membership_section(results: Sequence[Result]) -> Section | None:
    if not results:
        return None
    curves, marks, rows = {}, {}, []
    for res in results:
        d = res.data
        label = f"{d.get('attack')}" + (f" · {d['target']}" if d.get("target") else "")
        roc = d.get("roc") or {}
        if roc.get("fpr") and roc.get("tpr"):
            curves[label] = (roc["fpr"], roc["tpr"])
        tprs = _tpr_items(d.get("tpr_at_fpr"))
        intervals = d.get("intervals") if isinstance(d.get("intervals"), dict) else {}
        for f, interval in _tpr_items(intervals.get("tpr_at_fpr")).items():  # bootstrap CIs beside the point estimates
            if f in tprs and isinstance(interval, dict):
                tprs[f] = {**interval, "estimate": tprs[f]}
        auc = d.get("auc")
        if isinstance(intervals.get("auc"), dict) and isinstance(auc, int | float):
            auc = {**intervals["auc"], "estimate": auc}
        marks[label] = {f: (v.get("estimate") if isinstance(v, dict) else v) for f, v in tprs.items()
                        if isinstance(v, int | float | dict)}
        marks[label] = {f: float(t) for f, t in marks[label].items() if isinstance(t, int | float)}

        def tpr_text(f: float, tprs=tprs) -> str:
            v = tprs.get(f)
            return _auc_text(v) if v is not None else "—"

        rows.append([label, _auc_text(auc), tpr_text(0.001), tpr_text(0.01), str(d.get("n_in", "—")),
                     str(d.get("n_out", "—"))])
    blocks: list[Block] = [Table(["attack", "AUC", "TPR @ 0.1% FPR", "TPR @ 1% FPR", "members", "non-members"], rows)]
    if curves:
        blocks.append(Figure("roc", figures.roc_figure(curves, "Membership inference ROC (log axes)", marks),
                             "ROC curves on log–log axes; dots mark TPR at 0.1% and 1% FPR."))
    return Section("membership", "Membership inference", blocks)


def _mean(value: Any) -> Any:
    if isinstance(value, list) and not value:
        return None  # e.g. a label-only inversion attack: no images, no PSNR
    if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
        return sum(value) / len(value)
    if isinstance(value, dict):
        return value.get("mean", value.get("estimate"))
    return value


def inversion_section(results: Sequence[Result]) -> Section | None:
    if not results:
        return None
    rows, blocks = [], []
    for i, res in enumerate(results):
        d = res.data
        # results that record each image's attack status carry means without the images whose attack failed
        # (attacks.inversion.convergence): a diverged attack's PSNR is never shown as the defence's effect
        judged = "status" in d
        psnr, ssim = (d.get("psnr_mean"), d.get("ssim_mean")) if judged else (_mean(d.get("psnr")), _mean(d.get("ssim")))
        rows.append([str(d.get("attack")), str(d.get("defense")), fmt(psnr, 4), fmt(ssim, 3),
                     fmt(d.get("label_accuracy"), 3), fmt(d.get("epsilon")), _inversion_status(d) if judged else "—"])
        grid = d.get("grid")
        if grid and res.source is not None:
            path = (res.source.parent / grid) if not Path(grid).is_absolute() else Path(grid)
            if path.exists():
                blocks.append(Figure(f"inversion-{i}", path.read_bytes(),
                                     f"Ground truth vs reconstructions: {d.get('attack')} against {d.get('defense')}."))
    return Section("inversion", "Gradient inversion", [Table(["attack", "defence", "PSNR (dB)", "SSIM", "label accuracy", "ε",
                                                              "attack status"], rows), *blocks])


def _inversion_status(data: dict[str, Any]) -> str:
    """``ok`` or how many images the means leave out because their attack diverged or made no progress."""
    excluded = data.get("images_excluded") or {}
    if not excluded:
        return "ok"
    counts = ", ".join(f"{n} {status}" for status, n in sorted(excluded.items()))
    return f"{sum(excluded.values())} of {len(data.get('status') or [])} images excluded ({counts})"


#: Evaluated rounds averaged in the training table (the Upcycled-FL reproduction compares the mean of the last 10).
_LAST_ROUNDS = 10


def _last(values: Sequence[float]) -> float | None:
    return next((v for v in reversed(values) if v == v), None)


def _tail_mean(values: Sequence[float], count: int = _LAST_ROUNDS) -> float | None:
    kept = [v for v in values if v == v][-count:]
    return sum(kept) / len(kept) if kept else None


def training_section(results: Sequence[Result]) -> Section | None:
    """Test accuracy (and, where recorded, the global model's training accuracy) per round, one row per run."""
    if not results:
        return None
    series, rows, longest = {}, [], []
    for res in results:
        d = res.data
        label = str(d.get("label") or d.get("algorithm"))
        rounds = list(d.get("rounds") or [])
        test = [a if a is not None else float("nan") for a in d.get("accuracy") or []]
        train = [a if a is not None else float("nan") for a in d.get("train_accuracy") or []]
        series[label] = test
        if any(v == v for v in train):
            series[f"{label} (train)"] = train
        rows.append([label, fmt(_last(test), 4), fmt(_tail_mean(test), 4), fmt(_last(train), 4), fmt(_tail_mean(train), 4)])
        if len(rounds) > len(longest):
            longest = rounds
    png = figures.lines_figure(longest, series, "Accuracy vs rounds", "round", "accuracy")
    last = f"mean of last {_LAST_ROUNDS} evaluations"
    header = ["run", "final test accuracy", f"test accuracy, {last}", "final train accuracy", f"train accuracy, {last}"]
    return Section("training", "Accuracy vs rounds", [
        Table(header, rows),
        Figure("accuracy", png, "Global model accuracy per round: on the pooled test set, and on the pooled training data "
                                "where the run evaluated it (--eval-train-loss)."),
    ])


def tables_section(results: Sequence[Result]) -> Section | None:
    if not results:
        return None
    blocks: list[Block] = []
    for res in results:
        blocks.append(Paragraph(f"**{res.title}**"))
        blocks.append(Table([str(c) for c in res.data["columns"]], [[fmt(v) for v in row] for row in res.data["rows"]]))
    return Section("tables", "Tables", blocks)


def configuration_section(results: Sequence[Result]) -> Section:
    rows = []
    for res in results:
        prov = res.provenance or {}
        pkgs = ", ".join(f"{k} {v}" for k, v in (prov.get("packages") or {}).items())
        command = prov.get("command")
        rows.append([res.title, res.kind, redact_text(command) if isinstance(command, str) else "—", str(prov.get("seed", "—")),
                     f"privaudit {prov.get('privaudit', '?')}, Python {prov.get('python', '?')}; {pkgs}",
                     json.dumps(res.config, sort_keys=True, default=str)[:400] or "{}"])
    return Section("configuration", "Configuration and versions",
                   [Table(["result", "kind", "command", "seed", "versions", "configuration"], rows)])


BUILDERS = {
    "claim-audit": claims_section,
    "ledger": ledger_section,
    "epsilon-curve": epsilon_curve_section,
    "membership-attack": membership_section,
    "inversion": inversion_section,
    "training": training_section,
    "table": tables_section,
    "check": check_section,
}
#: Kinds no privaudit command writes (``table``: a hand-made table of any shape): a report without them lacks
#: nothing, so their absence is not listed under "What this report does not contain".
HAND_MADE_KINDS = frozenset({"table"})
SECTION_TITLES = {
    "claim-audit": "Claims",
    "ledger": "Per-client ε vs budget",
    "epsilon-curve": "ε vs rounds",
    "membership-attack": "Membership inference",
    "inversion": "Gradient inversion",
    "training": "Accuracy vs rounds",
    "table": "Tables",
    "check": "Declared against observed (privaudit check)",
}
