"""FedAvg (McMahan et al. 2017): local SGD from the global model, example-weighted model average.

Aggregation ω̄ = Σ_i p_i ω_i, p_i = |D_i| / Σ_{j∈S} |D_j| over the sampled clients S (FedProx Alg. 2 with
μ = 0; osu-srml/Upcycled-FL@4dd7400:server/avg.py normalises over the sampled clients the same way).
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.fl.algorithms.base import example_weighted_average
from privaudit.fl.engine.algorithm import Algorithm, ClientResult
from privaudit.fl.engine.capabilities import ServerStepForm
from privaudit.fl.engine.params import State


class FedAvg(Algorithm, ServerStepForm):
    name = "fedavg"
    #: The server step is a function of the clients' models only through their average, and clients release
    #: nothing else: ``--privacy cdp|ddp`` may privatise the mean update and hand it here (post-processing).
    #: Subclasses whose server keeps an optimiser state (FedAvgM, FedYogi) inherit this: their step is post-processing too.
    server_dp_compatible = True

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return {k: v.clone() for k, v in global_state.items()}
        return example_weighted_average(results)
