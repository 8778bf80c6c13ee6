"""Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu; 000 §4 and 003 §5, Alg. 1) around any algorithm X.

Odd iterations 2m−1 are X's own round. Even iterations 2m touch no client and no data: the server
extrapolates from the last two global models,

    ω̄^{2m} = ω̄^{2m−1} + u·(ω̄^{2m−1} − ω̄^{2m−2}),   u = μ/(μ + λ_m)   (000 eq. 4; 003 eq. 6),

derived for FedProx from the first-order condition of the odd-round objective; 003 generalises it to
"Upcycled-X". 003's Algorithm 1 prints the coefficient as λ_m/2, inconsistent with its eq. 6; the
reference code takes ``u`` directly (``--upcycled_param``, default 0.3) and applies it as here
(``agg_weight += upcycled_param * global_difference`` in osu-srml/Upcycled-FL@4dd7400:server/avg.py). Give ``u`` directly, or λ with the wrapped
algorithm's μ (FedProx) to get u = μ/(μ+λ).

By Lemma 6.1 the even iterations are post-processing; this wrapper makes that structural: an even round
never reaches ``local_objective``, the trainer, ``finish`` or any privatizer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientResult
from privaudit.fl.engine.capabilities import ProximalTerm
from privaudit.fl.engine.params import State


def extrapolate(latest: State, previous: State, u: float) -> State:
    """ω̄^{2m} = ω̄^{2m−1} + u·(ω̄^{2m−1} − ω̄^{2m−2}) (000 eq. 4 / 003 eq. 6, aggregated)."""
    return {k: latest[k] + u * (latest[k] - previous[k]) for k in latest}


def coefficient_from_lambda(mu: float, lam: float) -> float:
    """u = μ/(μ + λ_m) (000 eq. 4; 003 eq. 6)."""
    if not mu > 0:
        raise InvalidParameterError("u = μ/(μ+λ) needs the wrapped algorithm's proximal μ > 0 (use FedProx, or give u directly)")
    if not lam >= 0 or math.isinf(lam):
        raise InvalidParameterError(f"λ must be a finite number ≥ 0, got {lam}")
    return mu / (mu + lam)


class Upcycled(AlgorithmWrapper):
    """Upcycled-X: X's round on odd iterations, server-only extrapolation on even iterations."""

    prefix = "upcycled"

    def __init__(self, inner: Algorithm, u: float = 0.3, lam: float | None = None) -> None:
        super().__init__(inner)
        if lam is not None:
            u = coefficient_from_lambda(float(ProximalTerm.of(inner).proximal_mu), float(lam))
        if not math.isfinite(u) or u < 0:
            raise InvalidParameterError(f"the Upcycled coefficient u must be a finite number ≥ 0, got {u}")
        self.u = float(u)
        self.lam = None if lam is None else float(lam)
        self._before: State | None = None  # ω̄^{2m−2}, the global model the last odd round started from

    def setup(self, context) -> None:
        super().setup(context)
        self._before = None

    def trains_clients(self, round: int) -> bool:
        return round % 2 == 1 and self.inner.trains_clients(round)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        self._before = P.clone(global_state)
        return self.inner.aggregate(round, global_state, results)

    def server_update(self, round: int, global_state: State) -> State:
        if self._before is None:
            raise RuntimeError("an even Upcycled-FL round needs the preceding odd round")
        return extrapolate(global_state, self._before, self.u)

    def hyperparameters(self) -> dict:
        out: dict = {"u": self.u}
        if self.lam is not None:
            out["lambda"] = self.lam
        return out
