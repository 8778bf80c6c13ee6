"""Pieces the report's section builders share: numbers as text and the per-client ε histogram."""

from __future__ import annotations

import math
from typing import Any

from privaudit.report import figures
from privaudit.report.blocks import Figure
from privaudit.report.claim_overview import ClientEpsilons


def fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        return f"{value:.{digits}g}"
    if isinstance(value, dict) and {"lower", "upper"} <= set(value):
        return f"{fmt(value.get('upper'))} [{fmt(value.get('lower'))}, {fmt(value.get('upper'))}]"
    return str(value)


def client_histogram(group: ClientEpsilons, name: str) -> Figure:
    """How many clients spent how much ε, against their own budgets where the group records them."""
    over = sum(1 for e, b in zip(group.epsilons, group.budgets, strict=True) if b is not None and e > b * (1 + 1e-9))
    budgets = any(b is not None for b in group.budgets)
    return Figure(name, figures.client_epsilon_histogram(group.epsilons, group.budgets, group.title, group.delta),
                  f"How many clients spent how much ε ({group.title}): {len(group.epsilons)} clients"
                  + (f", {over} over their own budget." if budgets else "."))
