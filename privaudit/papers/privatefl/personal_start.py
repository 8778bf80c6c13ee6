"""Start a client's local training from its own copy of some parameters (personalised layers kept on the client).

PrivateFL (001 §3.2, Alg. 2 line 1): "the local model θ_{k_L}^r is initialized as the global model θ^r and the
transformation layer θ_{k_T}^r is initialized as the learnt transformation layer θ_{k_T}^{r−1} in the previous
round". :class:`PersonalStart` wraps any local solver: it overlays the client's kept parameters on the global
model and lets the wrapped solver train from there. :meth:`~privaudit.fl.engine.local_solver.LocalSolver.with_solver` swaps the wrapped
solver (e.g. to DP-SGD) and keeps this wrapper.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from privaudit.fl.engine.local_solver import ClientSolver
from privaudit.fl.engine.params import State


@dataclass(frozen=True, eq=False)
class PersonalStart(ClientSolver):
    """Train with ``solver`` from the global model overlaid with ``personal`` (name → tensor)."""

    personal: State
    solver: Any
    kind: str = "personal-start"

    def with_solver(self, solver: Any) -> PersonalStart:
        return replace(self, solver=solver)

    def train_client(self, trainer, global_state: State, task, training_round: int):
        start = {**global_state, **{k: v for k, v in self.personal.items() if k in global_state}}
        inner = replace(task, objective=replace(task.objective, solver=self.solver))
        return trainer.train_one(start, inner, training_round)
