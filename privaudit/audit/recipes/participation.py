"""Seeded simulations of client participation, and the trials that run them through the executor.

Both PrivateFL (audit point P4) and PFA (audit point F2) calibrate each client's noise for its *expected* participation,
while clients are drawn uniformly at random each round, so some clients take part more often than
expected. These functions simulate the reference codes' sampling exactly as they draw it:

* PrivateFL ``FedAverage.py``: ``np.random.choice(N, int(sr·N), replace=False)`` every round;
* PFA ``server.sample_clients``: a random permutation of the clients still under budget, the first
  ``int(0.8·N)`` of them; a client whose spent steps reached T* is dropped by the pre-check, and training
  stops once fewer than ``int(0.8·N)`` clients remain.

Trial functions return participation counts only (JSON); the recipes turn counts into ε with accountants.
"""

from __future__ import annotations

from typing import Any

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


def privatefl_participation_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """Participation counts of one simulated PrivateFL run: per round, the largest count so far; final counts."""
    n, rounds = int(spec["num_clients"]), int(spec["rounds"])
    per_round = int(spec["sample_rate"] * n)
    selection = fixed_size_selection(n, per_round, rounds, np.random.default_rng(int(seed)))
    counts = running_counts(selection, n)
    out = {"max_count_by_round": counts.max(axis=1).tolist(), "final_counts": counts[-1].tolist()}
    if spec.get("keep_selection"):
        out["selection"] = selection.tolist()
    return out


def pfa_participation_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """One simulated PFA run without the cap (the paper's description) and with the reference pre-check cap."""
    n, rounds = int(spec["num_clients"]), int(spec["rounds"])
    per_round = int(spec["sample_ratio"] * n)
    cap = int(spec["cap_participations"])
    rng = np.random.default_rng(int(seed))
    uncapped = np.zeros(n, dtype=np.int64)
    for _ in range(rounds):
        uncapped[rng.permutation(n)[:per_round]] += 1
    capped = np.zeros(n, dtype=np.int64)
    stopped_at = None
    for r in range(1, rounds + 1):
        candidates = np.flatnonzero(capped < cap)
        if len(candidates) < per_round:
            stopped_at = r
            break
        capped[rng.permutation(candidates)[:per_round]] += 1
    return {"uncapped_counts": uncapped.tolist(), "capped_counts": capped.tolist(),
            "capped_stop_round": stopped_at, "rounds_run_with_cap": (stopped_at - 1) if stopped_at else rounds}
