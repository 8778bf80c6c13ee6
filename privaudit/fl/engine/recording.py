"""An in-memory round observer that keeps every global model and, optionally, every client release.

White-box attacks read per-round releases; a checkpoint written with ``save_client_updates`` holds them on
disk (:class:`~privaudit.fl.engine.checkpoint.TrainedFederation`), this observer holds them in memory for runs that
are scored at once (audit trials, tests) without writing files.
"""

from __future__ import annotations

from collections.abc import Sequence

from privaudit.fl.engine.algorithm import ClientResult
from privaudit.fl.engine.params import State, clone
from privaudit.fl.engine.round_loop import RoundObserver


class ReleaseRecorder(RoundObserver):
    """Round observer that records releases.

    ``global_states[r]`` is the global model after iteration r (0: the initial model); ``client_states[r]``
    maps client id → the model it released in iteration r (only iterations that train clients);
    ``trained_rounds`` lists those iterations.
    """

    def __init__(self, *, client_releases: bool = True) -> None:
        self.keep_clients = bool(client_releases)
        self.global_states: list[State] = []
        self.client_states: dict[int, dict[int, State]] = {}
        self.trained_rounds: list[int] = []
        self.info = None

    def on_start(self, info) -> None:
        self.info = info
        self.global_states = [clone(info.initial_state)]
        self.client_states = {}
        self.trained_rounds = []

    def on_round_end(self, round: int, state: State, results: Sequence[ClientResult], metrics) -> None:
        self.global_states.append(clone(state))
        if metrics.trained:
            self.trained_rounds.append(int(round))
            if self.keep_clients:
                self.client_states[int(round)] = {int(r.client_id): clone(r.state) for r in results}
