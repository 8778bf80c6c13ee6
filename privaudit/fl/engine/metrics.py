"""Per-round metrics of a federation (stored in the checkpoint manifest, JSON-ready)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class RoundMetrics:
    """One iteration of the round loop.

    ``train_loss`` is the example-weighted mean, over the sampled clients, of each client's mean mini-batch
    loss during its local training (``None`` in rounds that train no client). ``test_accuracy`` and
    ``test_loss`` are the global model's on the pooled test set after the round; ``per_client_accuracy`` the
    global model's on each client's test split (``None`` for clients without test data). Evaluation fields are
    ``None`` in rounds that were not evaluated (``eval_every``). ``epochs`` lists the local epochs each sampled
    client ran, ``stragglers`` the ids of the sampled clients that ran fewer than E. ``global_train_loss`` and
    ``global_train_accuracy`` are the global model's on all clients' training data pooled (only with
    ``eval_train_loss``; the papers report training accuracy).
    """

    round: int
    trained: bool
    clients: list[int] = field(default_factory=list)
    epochs: list[int] = field(default_factory=list)
    stragglers: list[int] = field(default_factory=list)
    train_loss: float | None = None
    test_accuracy: float | None = None
    test_loss: float | None = None
    per_client_accuracy: list[float | None] | None = None
    personalised_accuracy: float | None = None
    global_train_loss: float | None = None
    global_train_accuracy: float | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: _finite_or_none(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RoundMetrics:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def _finite_or_none(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value
