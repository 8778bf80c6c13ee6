"""The wrapper base class of algorithms, and the example-weighted average most of them aggregate with.

Privacy mechanisms, Upcycled-FL and audit taps are *wrappers* (:class:`AlgorithmWrapper`) around any algorithm, in
the manner of Flower's ``DifferentialPrivacyClientSideFixedClipping`` strategy wrapping a strategy. A wrapper
forwards the core round (:class:`~privaudit.fl.engine.algorithm.Algorithm`) to the algorithm it wraps and overrides
the steps it changes. Capabilities (:mod:`privaudit.fl.engine.capabilities`) are forwarded generically, by design:
:meth:`AlgorithmWrapper.capability` answers with the wrapper itself for a capability the wrapper declares and asks
the wrapped algorithm otherwise, so a capability of the innermost algorithm is seen through any stack of wrappers
— including one declared after the wrapper was written (``tests/fl/test_capabilities.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.local_solver import LocalOutcome
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State

C = TypeVar("C")


def example_weighted_average(results: Sequence[ClientResult]) -> State:
    """ω̄ = Σ_i p_i ω_i with p_i = |D_i| / Σ_{j sampled} |D_j| (FedProx Alg. 2 / Upcycled-FL 003 Alg. 2)."""
    return P.weighted_average([r.state for r in results], [r.num_examples for r in results])


class AlgorithmWrapper(Algorithm):
    """Delegates the round to ``inner`` and every capability it does not declare; subclasses override what they change."""

    prefix = "wrapped"

    def __init__(self, inner: Algorithm) -> None:
        self.inner = inner

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.prefix}-{self.inner.name}"

    def capability(self, kind: type[C]) -> C | None:
        """This wrapper when it declares ``kind``, else the wrapped algorithm's answer."""
        return self if isinstance(self, kind) else self.inner.capability(kind)

    def setup(self, context: SetupContext) -> None:
        self.context = context
        self.inner.setup(context)

    def trains_clients(self, round: int) -> bool:
        return self.inner.trains_clients(round)

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return self.inner.local_objective(global_state, client)

    def finish(self, global_state: State, client: ClientContext, outcome: LocalOutcome) -> ClientResult:
        return self.inner.finish(global_state, client, outcome)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        return self.inner.aggregate(round, global_state, results)

    def server_update(self, round: int, global_state: State) -> State:
        return self.inner.server_update(round, global_state)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "hyperparameters": self.hyperparameters(), "wraps": self.inner.describe()}
