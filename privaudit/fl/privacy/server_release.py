"""Base of server-side privatizers (central DP, distributed DP): one private release per round, then the algorithm's server step.

Flower's ``DifferentialPrivacyServerSideFixedClipping`` pattern: the wrapper turns the round's client results
into one private aggregate — the clipped, noised mean update (McMahan, Ramage, Talwar & Zhang 2018) — and hands
*only that* to the wrapped algorithm's ``aggregate`` as a single result (:func:`private_aggregate`). The
algorithm's server step (FedAvgM's momentum, FedYogi's adaptive step, pFedMe's β-mixing, FedDyn's h, ...) is then
post-processing of the private release, so it costs no privacy. Parameters the server does not aggregate
(buffers such as batch-norm statistics; what the algorithm's :class:`~privaudit.fl.engine.capabilities.SharedParameters`
leaves out, such as PrivateFL's personal transformation) keep the global model's values.
Which algorithms this is sound for is their declared capability
:class:`~privaudit.fl.engine.capabilities.ServerStepForm` (``server_dp_compatible``, checked by
:mod:`privaudit.fl.privacy.registry`): an algorithm whose clients release anything beside their model
(SCAFFOLD's control variates, FedCurv's Fisher diagonals) would leak it un-noised.

The federation records the privacy events of a round from the clients' results *before* it calls
``aggregate`` (:mod:`privaudit.fl.engine.round_loop`), while a server-side mechanism's event can depend on the whole
round (PrivateFL's CDP noise scale is the median of the clients' update norms). So a
:class:`ServerReleaseWrapper` computes the round's release when the round's last sampled client finishes
(every sampled client's ``local_objective`` runs before any ``finish``, so the wrapper knows how many to wait
for), attaches the release's client-level events (subject :data:`~privaudit.accounting.ledger.SERVER`) to
that client's result, and passes the stored release to the inner ``aggregate``.

A round without any client (Poisson client sampling) may still release something (DP-FedAvg adds noise to
an empty sum — skipping it would reveal that the round was empty). The federation's ``start_federation`` hook
(:class:`~privaudit.fl.engine.capabilities.RunPlanning`, which the wrapper declares) hands the wrapper the run's ledger and configuration: such a release's events go straight into that ledger,
and :meth:`ServerReleaseWrapper.configure` completes the mechanism's settings from the run (client sampling
rate, number of clients). Without the hook (a wrapper driven by hand), the events ride on the next round's
results and :meth:`ServerReleaseWrapper.pending_events` lists those not attached yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine.algorithm import AGGREGATE_OF_CLIENTS, ClientContext, ClientResult
from privaudit.fl.engine.capabilities import RunPlanning, aggregated_names
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State

if TYPE_CHECKING:
    from privaudit.fl.engine.config import FederationConfig

#: ``client_id`` of the private aggregate handed to the inner ``aggregate`` (it is no client's release).
AGGREGATE_ID = -1


def private_aggregate(state: State, clients: float) -> ClientResult:
    """The single result the inner server step sees: the private model θ^r + meañ standing for ``clients`` clients."""
    return ClientResult(client_id=AGGREGATE_ID, num_examples=1, state=state, train_loss=0.0, steps=0, epochs=0,
                        info={AGGREGATE_OF_CLIENTS: float(clients)})


class ServerReleaseWrapper(AlgorithmWrapper, RunPlanning):
    """Subclasses implement :meth:`release` (and may override :meth:`client_release`, :meth:`configure`).

    The private aggregate's info carries :data:`~privaudit.fl.engine.algorithm.AGGREGATE_OF_CLIENTS`.
    """

    def setup(self, context) -> None:
        super().setup(context)
        self._expected: dict[int, int] = {}
        self._finished: dict[int, list[ClientResult]] = {}
        self._released: tuple[int, State | None] | None = None
        self._pending: list[PrivacyEvent] = []
        self._ledger: PrivacyLedger | None = None

    @property
    def aggregate_clients(self) -> float:
        """How many clients a release's mean stands for (its fixed denominator); subclasses know it."""
        return 1.0

    @property
    def aggregated_names(self) -> tuple[str, ...]:
        """The parameters the server aggregates (after ``setup``): the wrapped algorithm's shared ones."""
        return aggregated_names(self.inner, self.context.trainable)

    def start_federation(self, config: FederationConfig, ledger: PrivacyLedger) -> None:
        """The federation's hook (after ``setup``): start the wrapped algorithm, complete the settings from ``config``
        and keep ``ledger``."""
        RunPlanning.of(self.inner).start_federation(config, ledger)
        self.configure(config)
        self._ledger = ledger

    def configure(self, config: FederationConfig) -> None:
        """Take what the mechanism needs from the run's configuration (default: nothing)."""

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        self._expected[client.round] = self._expected.get(client.round, 0) + 1
        return self.inner.local_objective(global_state, client)

    def client_release(self, global_state: State, client: ClientContext, result: ClientResult) -> ClientResult:
        """What the client sends (default: its result unchanged)."""
        return result

    def release(self, round: int, global_state: State, results: Sequence[ClientResult]) -> tuple[State | None, tuple[PrivacyEvent, ...]]:
        """The private model θ^r + meañ from the round's client results (``None``: nothing released) and its events."""
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
            private = self._released[1]
            self._released = None
        else:  # a round in which no client finished
            private, events = self.release(round, global_state, [])
            if self._ledger is not None:
                self._ledger.record_all(events)
            else:
                self._pending.extend(events)
        if private is None:  # nothing was released: the server step sees no result
            return self.inner.aggregate(round, global_state, [])
        return self.inner.aggregate(round, global_state, [private_aggregate(private, self.aggregate_clients)])

    def pending_events(self) -> tuple[PrivacyEvent, ...]:
        """Events of releases no client result has carried yet (an empty last round, without the federation's ledger)."""
        return tuple(self._pending)
