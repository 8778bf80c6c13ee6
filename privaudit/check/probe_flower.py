"""A Flower strategy as a probed function: its ``configure_train`` and ``aggregate_train`` on crafted replies.

:func:`flower_aggregate` turns a Flower strategy (flwr 1.42 message API, e.g.
``DifferentialPrivacyServerSideFixedClipping(FedAvg(fraction_train=1.0), σ, C, n)``) into an
:class:`~privaudit.check.probe.Aggregate`: each call sends the all-zero model to n nodes through the strategy's own
``configure_train`` (Flower's node sampling, the DP wrapper's configuration), answers with one reply per node whose
model is the zero model plus that node's update (weight ``num-examples`` = 1, so FedAvg's mean is unweighted), and
returns what the strategy's ``aggregate_train`` makes of them — clipping, averaging and noise all Flower's (or the
user's subclass'). Under Flower's fixed-clipping wrappers with m = n that is the mean of the clipped updates plus
N(0, (σC/n)²): probe it with ``noise_multiplier=σ``, ``clip=C`` and the default divisor (the number of updates).

Flower builds messages only inside a running app (its task identity); outside one, this sets a placeholder identity
(run 0) as Flower's ServerApp runtime would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import contextmanager
from itertools import count

import numpy as np

from privaudit.errors import InvalidParameterError


class _Nodes:
    """What a strategy's ``configure_train`` asks of a grid: the connected node ids."""

    def __init__(self, n: int) -> None:
        self.ids = list(range(1, n + 1))

    def get_node_ids(self):
        return list(self.ids)


@contextmanager
def _quiet():
    """Flower logs every aggregation at INFO; a probe makes thousands."""
    logger = logging.getLogger("flwr")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def _identity() -> None:
    from flwr.supercore.task_identity import TaskIdentity

    try:
        TaskIdentity.run_id  # noqa: B018 - set by Flower's runtime inside an app
    except RuntimeError:
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 0, 0, 0


def flower_aggregate(strategy) -> Callable[[np.ndarray], np.ndarray]:
    """The probed function of a Flower strategy (module docstring)."""
    try:
        from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
        from flwr.serverapp.strategy import Strategy
    except ImportError:
        raise InvalidParameterError("probing a Flower strategy needs Flower: pip install 'privaudit[flower]'") from None
    if not isinstance(strategy, Strategy):
        raise InvalidParameterError(f"expected a Flower strategy (flwr.serverapp.strategy.Strategy), got {type(strategy).__name__}")
    _identity()
    rounds = count(1)

    def aggregate(updates: np.ndarray) -> np.ndarray:
        n, d = updates.shape
        zero = ArrayRecord({"w": Array(np.zeros(d, dtype=np.float32))})
        round_ = next(rounds)
        with _quiet():
            messages = list(strategy.configure_train(round_, zero, ConfigRecord({}), _Nodes(n)))
        if len(messages) != n:
            raise InvalidParameterError(f"the strategy sampled {len(messages)} of {n} nodes: configure it to train every "
                                        "node (fraction_train=1.0) so each crafted update is aggregated")
        replies = [Message(RecordDict({"arrays": ArrayRecord({"w": Array(u.astype(np.float32))}),
                                       "metrics": MetricRecord({"num-examples": 1})}), reply_to=m)
                   for m, u in zip(messages, updates, strict=True)]
        with _quiet():
            arrays, _ = strategy.aggregate_train(round_, replies)
        if arrays is None:
            raise InvalidParameterError("the strategy aggregated nothing")
        return np.asarray(arrays["w"].numpy(), dtype=np.float64)

    return aggregate
