"""Base of server-side privatizers (central DP, distributed DP): one release per round, one ``SERVER`` event.

The federation records the privacy events of a round from the clients' results *before* it calls
``aggregate`` (:mod:`privaudit.fl.engine.round_loop`), while a server-side mechanism's event can depend on the whole
round (PrivateFL's CDP noise scale is the median of the clients' update norms). So a
:class:`ServerReleaseWrapper` computes the round's release when the round's last sampled client finishes
(every sampled client's ``local_objective`` runs before any ``finish``, so the wrapper knows how many to wait
for), attaches the release's client-level events (subject :data:`~privaudit.accounting.ledger.SERVER`) to
that client's result, and returns the stored global model from ``aggregate``.

A round without any client (Poisson client sampling) may still release something (DP-FedAvg adds noise to
an empty sum — skipping it would reveal that the round was empty). Its events ride on the next round's
results; :meth:`ServerReleaseWrapper.pending_events` lists those not attached yet (a trailing empty round),
for the caller to record at the end of the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.fl.algorithms.base import AlgorithmWrapper, ClientContext, ClientResult
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State


class ServerReleaseWrapper(AlgorithmWrapper):
    """Subclasses implement :meth:`release` (and may override :meth:`client_release` for client-side encoding)."""

    def setup(self, context) -> None:
        super().setup(context)
        self._expected: dict[int, int] = {}
        self._finished: dict[int, list[ClientResult]] = {}
        self._released: tuple[int, State] | None = None
        self._pending: list[PrivacyEvent] = []

    @property
    def shared_names(self) -> tuple[str, ...]:
        """The parameters the server aggregates (PrivateFL: everything but the personal transformation)."""
        names = self.inner.find("shared_names")
        return tuple(names) if names else tuple(self.context.trainable)

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        self._expected[client.round] = self._expected.get(client.round, 0) + 1
        return self.inner.local_objective(global_state, client)

    def client_release(self, global_state: State, client: ClientContext, result: ClientResult) -> ClientResult:
        """What the client sends (default: its result unchanged)."""
        return result

    def release(self, round: int, global_state: State, results: Sequence[ClientResult]) -> tuple[State, tuple[PrivacyEvent, ...]]:
        """The new global model from the round's client results, and the privacy events of this release."""
        raise NotImplementedError

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        result = self.client_release(global_state, client, self.inner.finish(global_state, client, outcome))
        done = self._finished.setdefault(client.round, [])
        done.append(result)
        if len(done) < self._expected.get(client.round, 1):
            return result
        kept = [r for r in done if not r.info.get("excluded")]
        new_state, events = self.release(client.round, global_state, kept)
        self._released = (client.round, new_state)
        del self._finished[client.round]
        self._expected.pop(client.round, None)
        carried, self._pending = tuple(self._pending), []
        return replace(result, events=(*result.events, *carried, *events))

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if self._released is not None and self._released[0] == round:
            state = self._released[1]
            self._released = None
        else:  # a round in which no client finished
            state, events = self.release(round, global_state, [])
            self._pending.extend(events)
        observe = self.inner.find("observe_global")
        if callable(observe):
            observe(state)
        return state

    def pending_events(self) -> tuple[PrivacyEvent, ...]:
        """Events of releases no client result has carried yet (an empty last round)."""
        return tuple(self._pending)
