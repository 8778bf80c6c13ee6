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
