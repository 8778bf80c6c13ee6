"""Seeded simulations of client participation, shared by the recipes of claims calibrated for an expectation.

A paper that calibrates each client's noise for its *expected* participation, while clients are drawn uniformly at
random each round, lets some clients take part more often than expected (audit points P4, F2). These functions count
it: :func:`fixed_size_selection` draws each round's clients uniformly without replacement, :func:`running_counts`
tallies each client's rounds so far. The papers' trials (their reference code's sampling, exactly as it draws) use
them and return participation counts only (JSON); the recipes turn counts into ε with accountants.
"""

from __future__ import annotations

import numpy as np


def fixed_size_selection(num_clients: int, per_round: int, rounds: int, rng: np.random.Generator) -> np.ndarray:
    """(rounds, per_round) client ids, each round uniformly without replacement."""
    return np.stack([rng.choice(num_clients, size=per_round, replace=False) for _ in range(rounds)])


def running_counts(selection: np.ndarray, num_clients: int) -> np.ndarray:
    """(rounds, num_clients): how many rounds each client has taken part in after each round."""
    rounds = selection.shape[0]
    hits = np.zeros((rounds, num_clients), dtype=np.int64)
    for r in range(rounds):
        hits[r, selection[r]] = 1
    return np.cumsum(hits, axis=0)
