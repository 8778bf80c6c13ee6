"""Figures for reports (matplotlib, Agg backend): each function returns PNG bytes.

Readable at a glance: labelled axes with units, legends, titles that say what is plotted.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from privaudit.report.claim_overview import row_glyphs, row_statement

_DPI = 110


def png_bytes(fig, dpi: int = _DPI) -> bytes:
    """The figure laid out tightly and saved as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()


def roc_figure(curves: Mapping[str, tuple[Sequence[float], Sequence[float]]], title: str,
               marks: Mapping[str, Mapping[float, float]] | None = None) -> bytes:
    """ROC curves on log–log axes (the low-FPR regime matters), chance line, TPR at fixed FPR marked."""
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    floor = 1e-5
    for label, (fpr, tpr) in curves.items():
        xs = [max(f, floor) for f in fpr]
        ys = [max(t, floor) for t in tpr]
        ax.plot(xs, ys, lw=1.6, label=label)
        for f, t in (marks or {}).get(label, {}).items():
            ax.plot([f], [max(t, floor)], "o", ms=5, color=ax.lines[-1].get_color())
            ax.annotate(f"TPR {t:.3g} @ FPR {f:g}", (f, max(t, floor)), textcoords="offset points", xytext=(6, -10), fontsize=7)
    ax.plot([floor, 1], [floor, 1], "--", color="grey", lw=1, label="chance")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(floor, 1)
    ax.set_ylim(floor, 1.05)
    ax.set_xlabel("false positive rate (log scale)")
    ax.set_ylabel("true positive rate (log scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.25)
    return png_bytes(fig)


def client_epsilon_figure(per_client: Mapping[str, Mapping], title: str, delta: float) -> bytes:
    """Per-client ε (bars) against each client's budget (markers); max and mean as lines."""
    ids = list(per_client)
    eps = [_finite(per_client[c].get("epsilon")) for c in ids]
    budgets = [per_client[c].get("budget") for c in ids]
    fig, ax = plt.subplots(figsize=(max(7.2, 0.22 * len(ids) + 3.6), 4.2))
    colors = ["#c0392b" if (b is not None and e > b * (1 + 1e-9)) else "#2e86c1" for e, b in zip(eps, budgets, strict=True)]
    ax.bar(range(len(ids)), eps, color=colors, label="ε spent (red: over budget)")
    if any(b is not None for b in budgets):
        xs = [i for i, b in enumerate(budgets) if b is not None]
        ax.plot(xs, [budgets[i] for i in xs], "k_", ms=14, mew=2, label="budget ε")
    if eps:
        ax.axhline(max(eps), color="#c0392b", ls=":", lw=1, label=f"max ε = {max(eps):.3g}")
        ax.axhline(sum(eps) / len(eps), color="grey", ls="--", lw=1, label=f"mean ε = {sum(eps) / len(eps):.3g}")
    step = max(1, len(ids) // 30)
    ax.set_xticks(range(0, len(ids), step))
    ax.set_xticklabels([ids[i] for i in range(0, len(ids), step)], fontsize=7, rotation=90)
    ax.set_xlabel("client")
    ax.set_ylabel(f"ε at δ = {delta:g}")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return png_bytes(fig)


def lines_figure(x: Sequence[float], series: Mapping[str, Sequence[float]], title: str, xlabel: str, ylabel: str,
                 logy: bool = False) -> bytes:
    """Several series against one x axis (ε vs rounds per accountant, accuracy vs rounds per method).

    A series with missing entries (``None``/NaN, e.g. an accountant evaluated at a few rounds only) is drawn
    through the points it has, each marked, rather than broken into invisible fragments.
    """
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    for label, ys in series.items():
        points = [(xv, _finite(v)) for xv, v in zip(list(x)[: len(ys)], ys, strict=False)]
        kept = [(xv, yv) for xv, yv in points if yv == yv]
        sparse = 0 < len(kept) < len(points)
        ax.plot([p[0] for p in kept] if sparse else [p[0] for p in points],
                [p[1] for p in kept] if sparse else [p[1] for p in points],
                lw=1.6, label=label, marker="o" if sparse else None, ms=4)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best", framealpha=0.85)
    ax.grid(True, alpha=0.25)
    return png_bytes(fig)


def _finite(value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return v if math.isfinite(v) else float("nan")


# -- the claims at a glance -----------------------------------------------------------------------------------------
VERDICT_COLOURS = {"refuted": "#b03a2e", "not supported": "#b03a2e", "consistent": "#1e8449", "supported": "#1e8449",
                   "inconclusive": "#9a7d0a", "fact": "#1f618d"}
_IMPLEMENTATION, _PAPER, _ATTACK, _CLAIMED = "#2e86c1", "#8e44ad", "#c0392b", "#111111"


def _axis_span(values: Sequence[float]) -> tuple[float, float]:
    """Decades (lo, hi) that hold every finite positive ε (the positions of 0 and ∞ lie outside them)."""
    finite = [v for v in values if 0 < v < math.inf]
    if not finite:
        return 0.0, 1.0
    lo, hi = math.floor(math.log10(min(finite))), math.ceil(math.log10(max(finite)))
    return float(lo), float(max(hi, lo + 1))


#: How each glyph of :func:`privaudit.report.claim_overview.row_glyphs` is drawn: marker, size.
_GLYPH_MARKERS = {"exact": ("D", 5), "lower": (">", 6.5), "upper": ("<", 6.5), "attack": (">", 7)}
_FADED = 0.35


def overview_figure(panels: Sequence, width: float = 11.0):
    """The claims at a glance as a matplotlib figure (the caller saves and closes it): one panel per claim
    (``privaudit.report.claim_overview.ClaimPanel``), one row per reading, on one log ε axis.

    Per row (:func:`~privaudit.report.claim_overview.row_glyphs`): the claimed ε (black bar), each accountant's ε
    (blue: the code as run, purple: the paper's assumptions; ▶ a lower end, ◀ an upper end, a line between them, a
    diamond where they coincide) and each attack's certified lower bound (red ▶: ε ≥ this). An end that rests on
    assumptions that fail is faded (dashed line); a holding lower end never is, so a refuting value is always drawn
    solid. 0 and ∞ get their own positions at the ends of the axis; every panel carries the ε tick labels, and each
    row's verdict is written beside it with the number that decided it (:func:`~privaudit.report.claim_overview.
    row_statement`). Every drawn glyph carries a ``gid`` ``"<kind>:<source>:refutes|plain:faded|solid"``.
    """
    values = [v for p in panels for v in p.values()]
    lo, hi = _axis_span(values)
    g = max(0.4, 0.08 * (hi - lo))  # width (decades) of the grey zones at either end that hold ε = 0 and ε = ∞
    axis = _OverviewAxis(lo, hi, g)
    heights = [len(p.rows) + 1.9 for p in panels]  # + title and the panel's own ε tick labels
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights},
                             figsize=(width, 1.0 + 0.3 * sum(heights)))
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        _draw_panel(ax, panel, axis)
    bottom = axes[-1, 0]
    bottom.set_xscale("log")
    bottom.set_xlim(10 ** (lo - 2 * g), 10 ** (hi + 2 * g))
    decades = range(int(lo), int(hi) + 1)
    bottom.set_xticks([axis.x_zero, *(10.0 ** d for d in decades), axis.x_inf])
    bottom.set_xticklabels(["0", *(_decade_label(d) for d in decades), "∞"])
    bottom.minorticks_off()
    bottom.set_xlabel("ε (log scale; the grey ends hold ε = 0 and ε = ∞)")
    fig.legend(handles=_overview_legend(), loc="upper center", ncol=3, fontsize=7.5, frameon=False, bbox_to_anchor=(0.5, 1.0))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / fig.get_figheight()))
    return fig


class _OverviewAxis:
    """The overview's shared log ε axis: decades ``lo``…``hi`` with grey zones ``g`` decades wide for ε = 0 and ∞."""

    def __init__(self, lo: float, hi: float, g: float) -> None:
        self.lo, self.hi, self.g = lo, hi, g
        self.x_zero, self.x_inf = 10 ** (lo - 1.5 * g), 10 ** (hi + 1.5 * g)

    def at(self, value: float) -> float:
        return self.x_inf if value == math.inf else (self.x_zero if value <= 0 else value)


_GLYPH_COLOURS = {"implementation": _IMPLEMENTATION, "paper": _PAPER, "attack": _ATTACK, "claimed": _CLAIMED}


def _draw_panel(ax, panel, axis: _OverviewAxis) -> None:  # type: ignore[no-untyped-def]
    """One claim's panel: grey ends, the claimed ε line, each reading's glyphs and verdict, the panel's title."""
    lo, hi, g = axis.lo, axis.hi, axis.g
    n = len(panel.rows)
    ax.set_ylim(n - 0.5, -0.7)
    ax.axvspan(10 ** (lo - 2 * g), 10 ** (lo - g), color="#eeeeee", zorder=0)
    ax.axvspan(10 ** (hi + g), 10 ** (hi + 2 * g), color="#eeeeee", zorder=0)
    if panel.claimed is not None:
        ax.axvline(axis.at(panel.claimed), color=_CLAIMED, lw=0.8, ls=":", zorder=1)
    for y, row in enumerate(panel.rows):
        if y % 2:
            ax.axhspan(y - 0.5, y + 0.5, color="#f6f6f6", zorder=0)
        if row.note:
            note = row.note if len(row.note) <= 100 else row.note[:99] + "…"
            ax.text(0.5, y, note, transform=ax.get_yaxis_transform(), ha="center", va="center",
                    fontsize=7.5, color="#555555", style="italic")
        _draw_glyphs(ax, row, y, axis)
        statement = row_statement(row)
        verdict_colour = VERDICT_COLOURS.get(row.verdict, "#555555")
        ax.text(1.005, y, row.verdict + (f" · {statement}" if statement else ""), transform=ax.get_yaxis_transform(),
                ha="left", va="center", fontsize=7.5, color=verdict_colour, fontweight="bold")
    ax.set_yticks(range(n))
    ax.set_yticklabels([r.label if len(r.label) <= 44 else r.label[:43] + "…" for r in panel.rows], fontsize=7.5)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelbottom=True, labelsize=8)  # ε is readable under every panel, not the last only
    colour = VERDICT_COLOURS.get(panel.verdict, "#333333")
    claimed = "no ε claimed" if panel.claimed is None else f"claimed ε = {panel.claimed:.4g}" + (
        f", δ = {panel.delta:g}" if panel.delta else "")
    title = f"{panel.claim_id}: {claimed} — {panel.verdict.upper()}"
    if panel.basis and len(title) + len(panel.basis) <= 110:  # the basis, where it fits on the line
        title += f" ({panel.basis})"
    ax.set_title(title, loc="left", fontsize=9, color=colour, fontweight="bold")
    ax.grid(True, axis="x", which="major", alpha=0.3)


def _draw_glyphs(ax, row, y: int, axis: _OverviewAxis) -> None:  # type: ignore[no-untyped-def]
    """A reading's glyphs (:func:`~privaudit.report.claim_overview.row_glyphs`): accountants above the row's middle,
    attacks below."""
    k = len(row.accountants)
    for glyph in row_glyphs(row):
        colour = _GLYPH_COLOURS[glyph.source]
        alpha = _FADED if glyph.faded else 1.0
        gid = f"{glyph.kind}:{glyph.source}:{'refutes' if glyph.refutes else 'plain'}:{'faded' if glyph.faded else 'solid'}"
        yy = y + 0.2 if glyph.source == "attack" else y - 0.3 + (0.3 * glyph.slot / (k - 1) if k > 1 else 0.15)
        if glyph.kind == "claimed":
            ax.plot([axis.at(glyph.value)], [y], "|", color=colour, ms=16, mew=2.2, zorder=2, gid=gid)  # under the marks
        elif glyph.kind == "span":
            ax.plot([axis.at(glyph.start), axis.at(glyph.value)], [yy, yy], "--" if glyph.faded else "-", color=colour,
                    alpha=alpha, lw=2.4, solid_capstyle="butt", zorder=3, gid=gid)
        else:
            marker, size = _GLYPH_MARKERS[glyph.kind]
            empty = glyph.kind == "attack" and glyph.value <= 0
            ax.plot([axis.at(glyph.value)], [yy], marker, color=colour, alpha=alpha, ms=size, gid=gid,
                    zorder=5 if glyph.kind in ("attack", "lower") else 4,
                    markerfacecolor="white" if empty else colour)


def _overview_legend() -> list[Line2D]:
    return [Line2D([], [], ls="", marker="|", ms=12, mew=2.2, color=_CLAIMED, label="claimed ε"),
            Line2D([], [], lw=2.4, color=_IMPLEMENTATION, label="accountant ε, the code as run"),
            Line2D([], [], lw=2.4, color=_PAPER, label="accountant ε, the paper's assumptions"),
            Line2D([], [], ls="", marker=">", ms=6.5, color="#555555", label="accountant: lower end (ε ≥)"),
            Line2D([], [], ls="", marker="<", ms=6.5, color="#555555", label="accountant: upper end (ε ≤)"),
            Line2D([], [], ls="", marker="D", ms=5, color="#555555", label="accountant: exact (lower = upper)"),
            Line2D([], [], lw=2.4, ls="--", alpha=_FADED, color="#555555",
                   label="faded: that end rests on assumptions that fail"),
            Line2D([], [], ls="", marker=">", ms=7, color=_ATTACK, label="attack: certified ε lower bound"),
            Line2D([], [], ls="", marker=">", ms=7, color=_ATTACK, markerfacecolor="white", label="attack: lower bound 0")]


def _decade_label(d: int) -> str:
    """A decade as a plain number where that is short (0.1 … 1000), else as a power of ten."""
    return f"{10.0 ** d:g}" if -1 <= d <= 3 else f"$10^{{{d}}}$"


def claims_overview_figure(panels: Sequence, width: float = 11.0) -> bytes:
    """:func:`overview_figure` as PNG bytes."""
    fig = overview_figure(panels, width)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    plt.close(fig)
    return buf.getvalue()


def client_epsilon_histogram(epsilons: Sequence[float], budgets: Sequence[float | None], title: str,
                             delta: float | None) -> bytes:
    """How many clients spent how much ε (log-spaced bins), split into clients within and over their budget."""
    import numpy as np

    finite = [e for e in epsilons if 0 < e < math.inf]
    lo, hi = (min(finite), max(finite)) if finite else (1.0, 10.0)
    edges = np.logspace(math.log10(lo) - 0.05, math.log10(hi) + 0.05, 16 if len(finite) > 30 else 10)
    over = [e for e, b in zip(epsilons, budgets, strict=True) if b is not None and e > b * (1 + 1e-9) and 0 < e < math.inf]
    within = [e for e, b in zip(epsilons, budgets, strict=True) if not (b is not None and e > b * (1 + 1e-9)) and 0 < e < math.inf]
    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    ax.hist([within, over], bins=edges, stacked=True, color=["#2e86c1", "#c0392b"],
            label=["within its budget" if any(b is not None for b in budgets) else "clients", "over its budget"])
    ax.set_xscale("log")
    ax.set_xlabel("ε spent per client (log scale)" + (f", δ = {delta:g}" if delta else ""))
    ax.set_ylabel("clients")
    ax.yaxis.get_major_locator().set_params(integer=True)
    others = len(epsilons) - len(finite)
    extra = f"; {others} client(s) at ε = 0 or ∞ not shown" if others else ""
    ax.set_title(f"{title}\n{len(epsilons)} clients, max ε = {max(epsilons):.3g}{extra}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.25)
    return png_bytes(fig)
