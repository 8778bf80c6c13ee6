"""FedAvg (McMahan et al. 2017): local SGD from the global model, example-weighted model average.

Aggregation ω̄ = Σ_i p_i ω_i, p_i = |D_i| / Σ_{j∈S} |D_j| over the sampled clients S (FedProx Alg. 2 with
μ = 0; Upcycled-FL ``server/avg.py`` normalises over the sampled clients the same way, spec §1.2).
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.fl.algorithms.base import Algorithm, ClientResult, example_weighted_average
from privaudit.fl.engine.params import State


class FedAvg(Algorithm):
    name = "fedavg"

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return {k: v.clone() for k, v in global_state.items()}
        return example_weighted_average(results)
