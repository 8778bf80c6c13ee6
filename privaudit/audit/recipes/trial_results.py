"""Small helpers that turn trial results (JSON dicts) into score arrays and summary statistics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np


def paired_scores(results: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """(in-scores, out-scores) of trials that each return ``{"in": s, "out": s, ...}``."""
    return (np.array([float(r["in"]) for r in results], dtype=np.float64),
            np.array([float(r["out"]) for r in results], dtype=np.float64))


def summary(values: Iterable[float]) -> dict[str, float]:
    """min / median / mean / max of a non-empty sequence of numbers."""
    array = np.asarray(list(values), dtype=np.float64)
    return {"min": float(array.min()), "median": float(np.median(array)), "mean": float(array.mean()),
            "max": float(array.max()), "count": int(array.size)}
