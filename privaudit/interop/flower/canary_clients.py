"""Canary clients for a Flower app (Andrew, Kairouz, Oh, Oprea, McMahan & Suriyakumar 2024, "One-shot empirical
privacy estimation for federated learning", ICLR 2024, §3): virtual clients that pass through Flower's own DP wrapper.

::

    canaries = LoopCanaries(net, count=10_000, clip=C, first_id=num_nodes, seed=0)      # privaudit.interop
    dp = DifferentialPrivacyServerSideFixedClipping(FedAvg(...), σ, C, m)
    strategy = AuditTap(FlowerCanaryClients(dp, canaries, real_sampled=m), recorder=recorder)
    ...                                                        # strategy.start(...) closes the recorder
    canaries.save(recorder.path)
    # privaudit audit --checkpoint RUN --client-canaries 10000

:class:`FlowerCanaryClients` is a Flower ``Strategy`` that wraps a fixed-clipping DP wrapper
(``DifferentialPrivacyServerSideFixedClipping`` or ``…ClientSideFixedClipping``). The canaries' directions, fair
coins, updates and the file the audit reads are :class:`~privaudit.interop.canary_clients.LoopCanaries`'. Each round:

* ``configure_train`` passes the call through and takes every present canary, as Flower's ``FedAvg`` samples every
  node at ``fraction_train = 1`` (the only setting supported: see below);
* ``aggregate_train`` appends, to the replies that arrived, one reply per sampled canary — its arrays the global
  model sent this round plus C·c_k (the canary's whole update, at the clip norm), its MetricRecord the real replies'
  keys with the weight (``num-examples``) of the first real reply and the real replies' mean for the other numbers
  (so with equal weights the aggregated train metrics are the real clients') — and calls the DP wrapper's
  ``aggregate_train``, which clips, averages and noises them with the real ones. Nothing of the mechanism is
  re-implemented: the canaries are clipped and noised by Flower's own code.

Flower's wrapper adds N(0, (σC/m)²) to the mean, with m its ``num_sampled_clients``: the noise is calibrated to m
results. So that it stays calibrated to the results that now arrive, the constructor sets the wrapper's m to
``real_sampled`` plus the present canaries, the number of results each round when every node and every present
canary takes part. Flower's own accountant is refused (it checks the number of messages it configured against m
and counts a population without the canaries). The tap (:class:`~privaudit.interop.flower.tap.AuditTap`, wrapped
around this strategy) sees only the real replies, so the recorded partition and sampled clients never list a canary;
it reads :attr:`round_canaries` and :attr:`present` to record each round's event over the whole population, canaries
included (the noise's multiplier on the sum of all the results that arrived). Client sampling is not supported:
Flower samples the nodes at a fixed size, so canaries sampled "like the real ones" would need their own coins, and
privaudit has no proven accounting of that mixed scheme — audit client sampling with a recorded loop
(:class:`~privaudit.interop.canary_clients.LoopCanaries`) or a privaudit run (``--client-canaries``) instead.

Threat model (the audit's): the adversary controls the canary clients' updates and sees every recorded global model;
it sees neither who was sampled nor any client's own release.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from flwr.app import ArrayRecord, Message, Metadata, MetricRecord, RecordDict
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    Strategy,
)

from privaudit.checks import integer_at_least
from privaudit.errors import InvalidParameterError
from privaudit.interop.canary_clients import LoopCanaries

FIXED_WRAPPERS = DifferentialPrivacyServerSideFixedClipping | DifferentialPrivacyClientSideFixedClipping


def _weight_key(strategy) -> str:
    """The metric key FedAvg (and its subclasses) weight the replies by."""
    if not isinstance(strategy, FedAvg):
        raise InvalidParameterError(f"canary clients need a FedAvg-family strategy under the DP wrapper (weighted by a "
                                    f"metric key); got {type(strategy).__name__}")
    return str(strategy.weighted_by_key)


class FlowerCanaryClients(Strategy):
    """Virtual canary clients (from ``canaries``) sampled, clipped and noised by the DP wrapper ``strategy``."""

    def __init__(self, strategy: Strategy, canaries: LoopCanaries, *, real_sampled: int) -> None:
        if not isinstance(strategy, FIXED_WRAPPERS):
            raise InvalidParameterError("FlowerCanaryClients wraps Flower's fixed-clipping DP wrapper "
                                        "(DifferentialPrivacyServerSideFixedClipping or …ClientSideFixedClipping), got "
                                        f"{type(strategy).__name__}")
        if not isinstance(canaries, LoopCanaries):
            raise InvalidParameterError("FlowerCanaryClients takes its canaries from privaudit.interop.LoopCanaries")
        integer_at_least("the number of real clients sampled per round", real_sampled, 1)
        if strategy.accountant is not None:
            raise InvalidParameterError("FlowerCanaryClients cannot run with Flower's own accountant on the DP wrapper: "
                                        "it counts the configured messages and a population without the canaries")
        if not math.isclose(float(canaries.canaries.update_norm), float(strategy.clipping_norm), rel_tol=1e-9):
            raise InvalidParameterError(f"the canaries' norm {canaries.canaries.update_norm:g} is not the wrapper's clip "
                                        f"norm {strategy.clipping_norm:g}")
        super().__init__()
        self.strategy = strategy
        self.weight_key = _weight_key(strategy.strategy)
        self.canaries = canaries
        #: the present canaries (their client ids)
        self.present = canaries.client_ids
        #: Flower's m, raised to count the canaries expected per round (its noise is σC/m on the mean)
        strategy.num_sampled_clients = int(real_sampled) + len(self.present)
        #: the canaries sampled this round (client ids)
        self.round_canaries: list[int] = []
        self._sent: dict[str, torch.Tensor] | None = None

    # -- Flower's strategy interface ---------------------------------------------------------------------
    def configure_train(self, server_round, arrays, config, grid):
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        nodes = len(list(grid.get_node_ids())) if grid is not None else len(messages)
        if messages and len(messages) != nodes:
            raise InvalidParameterError(f"FlowerCanaryClients needs every node in every round: round {server_round} "
                                        f"sampled {len(messages)} of {nodes} nodes, and canaries taking part every "
                                        "round would then be audited against a subsampled mechanism they are not in "
                                        "(set the strategy's fraction_train to 1)")
        self._sent = {k: v.detach().clone() for k, v in arrays.to_torch_state_dict().items()}
        self.round_canaries = list(self.present) if messages else []
        return messages

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        real = [r for r in replies if not r.has_error()]
        if not real or len(real) != len(replies) or self._sent is None:  # Flower's wrapper skips such rounds itself
            self.round_canaries = []
            return self.strategy.aggregate_train(server_round, replies)
        template = real[0]
        metrics = self._canary_metrics(real)
        array_key = next(iter(template.content.array_records))
        metric_key = next(iter(template.content.metric_records))
        for k in self.round_canaries:
            update = self.canaries.update(k, like=self._sent)
            arrays = ArrayRecord({name: self._sent[name] + update[name] for name in self._sent})
            content = RecordDict({array_key: arrays, metric_key: MetricRecord(dict(metrics))})
            replies.append(Message(content=content, metadata=_copy_metadata(template)))
        return self.strategy.aggregate_train(server_round, replies)

    def _canary_metrics(self, real) -> dict:
        records = [next(iter(r.content.metric_records.values())) for r in real]
        out = {}
        for key, value in records[0].items():
            values = [rec.get(key) for rec in records]
            numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
            out[key] = float(np.mean(values)) if numeric and key != self.weight_key else value
        if self.weight_key not in out:
            raise InvalidParameterError(f"a train reply has no {self.weight_key!r} metric for FedAvg's weights")
        return out

    def configure_evaluate(self, server_round, arrays, config, grid):
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round, replies):
        return self.strategy.aggregate_evaluate(server_round, replies)

    def summary(self) -> None:
        self.strategy.summary()


def _copy_metadata(reply: Message) -> Metadata:
    """A copy of a real reply's metadata (Flower builds a reply's metadata only from an instruction it answers)."""
    m = reply.metadata
    return Metadata(run_id=m.run_id, message_id="", src_node_id=m.src_node_id, dst_node_id=m.dst_node_id,
                    reply_to_message_id=m.reply_to_message_id, group_id=m.group_id, created_at=m.created_at, ttl=m.ttl,
                    message_type=m.message_type, src_task_id=m.src_task_id, dst_task_id=m.dst_task_id)
