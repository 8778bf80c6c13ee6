"""Which clients train in a round, and how many local epochs each one runs.

* Fixed size: m = max(⌊q·N⌋, 1) clients uniformly without replacement (Upcycled-FL and FedProx:
  ``np.random.choice(N, m, replace=False)``).
* Poisson: each client independently with probability q; a round can be empty.
* Stragglers (osu-srml/Upcycled-FL@4dd7400:client/avg.py): each sampled client is a straggler with probability
  ``fraction`` and then runs a uniformly random number of epochs in {1, …, E−1}; the reference draws
  ``int(rand·E)`` until it is ≥ 1, which is the same distribution. A straggler still uploads its model.
"""

from __future__ import annotations

import numpy as np

from privaudit.accounting.mechanisms import Sampling


def sample_clients(num_clients: int, fraction: float, sampling: Sampling, rng: np.random.Generator) -> np.ndarray:
    """Sorted ids of the clients sampled for one training round."""
    if sampling is Sampling.POISSON:
        return np.flatnonzero(rng.random(num_clients) < fraction)
    count = max(int(np.floor(fraction * num_clients + 1e-9)), 1)
    return np.sort(rng.choice(num_clients, size=count, replace=False))


def local_epochs(count: int, epochs: int, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Local epochs of each of ``count`` sampled clients: E, or U{1, …, E−1} for stragglers."""
    is_straggler = rng.random(count) < fraction
    reduced = rng.integers(1, max(epochs, 2), size=count)
    return np.where(is_straggler & (epochs > 1), reduced, epochs).astype(np.int64)
