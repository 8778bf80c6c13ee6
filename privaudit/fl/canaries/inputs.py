"""Input-space canaries: records inserted into a client's training data, each with probability ½.

Two designs (ML Privacy Meter's Poisson canaries; Steinke, Nasr & Jagielski 2023
black-box audit):

* ``mislabelled`` — natural records drawn without replacement from the dataset's pooled test set, each given
  a uniformly random *wrong* label. The model can only fit such a record by memorising it.
* ``ood`` — out-of-distribution records: a uniformly random direction in input space scaled to a fixed norm
  (default: the mean norm of the training records), with a uniformly random label.

:func:`make_input_canaries` draws the records, the client each one goes to, and the membership bits;
:func:`insert_input_canaries` returns a new dataset in which every canary whose bit is 1 is appended to its
client's training data (the original dataset is not modified). The bits are the ground truth of the audit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

import numpy as np

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.directions import membership_bits


class InputCanaryKind(str, Enum):
    MISLABELLED = "mislabelled"
    OUT_OF_DISTRIBUTION = "ood"

    @classmethod
    def parse(cls, value: str | InputCanaryKind) -> InputCanaryKind:
        if isinstance(value, cls):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown input canary kind {value!r}; use 'mislabelled' or 'ood'")


@dataclass(frozen=True, eq=False)
class InputCanaries:
    """m candidate records, the client each one is meant for, and whether it was inserted (the truth)."""

    x: np.ndarray  # (m, *input_shape) float32
    y: np.ndarray  # (m,) int64
    clients: np.ndarray  # (m,) int64
    inserted: np.ndarray  # (m,) bool
    kind: str
    seed: int

    def __post_init__(self) -> None:
        m = len(self.y)
        if not (len(self.x) == len(self.clients) == len(self.inserted) == m) or m == 0:
            raise InvalidParameterError("input canaries need the same non-zero number of records, labels, clients and bits")

    @property
    def count(self) -> int:
        return len(self.y)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "seed": self.seed, "x": self.x.tolist(), "y": self.y.tolist(),
            "clients": self.clients.tolist(), "inserted": self.inserted.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputCanaries:
        return cls(
            x=np.asarray(data["x"], dtype=np.float32), y=np.asarray(data["y"], dtype=np.int64),
            clients=np.asarray(data["clients"], dtype=np.int64), inserted=np.asarray(data["inserted"], dtype=bool),
            kind=str(data["kind"]), seed=int(data["seed"]),
        )


def _target_clients(clients: int | Sequence[int] | None, count: int, num_clients: int, rng: np.random.Generator) -> np.ndarray:
    if clients is None:
        return rng.integers(0, num_clients, size=count).astype(np.int64)
    chosen = np.atleast_1d(np.asarray(clients, dtype=np.int64))
    if chosen.size == 0 or chosen.min() < 0 or chosen.max() >= num_clients:
        raise InvalidParameterError(f"canary clients must be ids in [0, {num_clients}), got {np.asarray(clients).tolist()}")
    return np.resize(chosen, count)


def _wrong_labels(labels: np.ndarray, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random label different from each given one."""
    shift = rng.integers(1, num_classes, size=len(labels))
    return ((labels + shift) % num_classes).astype(np.int64)


def make_input_canaries(
    dataset: FederatedDataset,
    count: int,
    *,
    kind: str | InputCanaryKind = InputCanaryKind.MISLABELLED,
    clients: int | Sequence[int] | None = None,
    seed: int = 0,
    ood_norm: float | None = None,
    inclusion: float = 0.5,
) -> InputCanaries:
    """Draw ``count`` canaries for ``dataset`` (see the module docstring); everything from ``seed``.

    ``clients``: ``None`` sends each canary to a uniformly random client, an int sends all to that client, a
    sequence is cycled. ``inclusion`` is the probability of each membership bit (½ for audits).
    """
    count = int(count)
    if count < 1:
        raise InvalidParameterError(f"need at least one input canary, got {count}")
    kind = InputCanaryKind.parse(kind)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1C]))
    if kind is InputCanaryKind.MISLABELLED:
        if dataset.test is None or len(dataset.test[1]) < count:
            available = 0 if dataset.test is None else len(dataset.test[1])
            raise InvalidParameterError(
                f"{count} mislabelled canaries need {count} pooled test records, {dataset.name!r} has {available}; use kind 'ood' or fewer canaries"
            )
        rows = rng.choice(len(dataset.test[1]), size=count, replace=False)
        x = np.array(dataset.test[0][rows], dtype=np.float32)
        y = _wrong_labels(dataset.test[1][rows], dataset.num_classes, rng)
    else:
        if ood_norm is None:
            norms = np.concatenate([np.linalg.norm(c.x_train.reshape(c.num_train, -1), axis=1) for c in dataset.clients])
            ood_norm = float(norms.mean())
        if not ood_norm > 0:
            raise InvalidParameterError(f"the out-of-distribution canary norm must be positive, got {ood_norm}")
        directions = rng.standard_normal((count, *dataset.input_shape))
        flat = directions.reshape(count, -1)
        x = (directions / np.linalg.norm(flat, axis=1).reshape(count, *([1] * len(dataset.input_shape))) * ood_norm).astype(np.float32)
        y = rng.integers(0, dataset.num_classes, size=count).astype(np.int64)
    targets = _target_clients(clients, count, dataset.num_clients, rng)
    bits = membership_bits(count, rng, inclusion)
    return InputCanaries(x=x, y=y, clients=targets, inserted=bits, kind=kind.value, seed=int(seed))


def insert_input_canaries(dataset: FederatedDataset, canaries: InputCanaries) -> FederatedDataset:
    """A copy of ``dataset`` whose clients' training data end with their inserted canaries.

    Local training shuffles every epoch, so appending is the same as inserting anywhere. The pooled test
    set and the clients' test splits are unchanged.
    """
    if tuple(canaries.x.shape[1:]) != tuple(dataset.input_shape):
        raise InvalidParameterError(f"canaries have input shape {canaries.x.shape[1:]}, the dataset {dataset.input_shape}")
    if canaries.clients.max() >= dataset.num_clients:
        raise InvalidParameterError(f"a canary is meant for client {int(canaries.clients.max())}; the dataset has {dataset.num_clients}")
    clients = []
    for k, client in enumerate(dataset.clients):
        rows = np.flatnonzero((canaries.clients == k) & canaries.inserted)
        if rows.size == 0:
            clients.append(client)
            continue
        clients.append(ClientData(
            np.concatenate([client.x_train, canaries.x[rows]]),
            np.concatenate([client.y_train, canaries.y[rows]]),
            client.x_test,
            client.y_test,
        ))
    metadata = {**dataset.metadata, "input_canaries": {"kind": canaries.kind, "count": canaries.count,
                                                        "inserted": int(canaries.inserted.sum()), "seed": canaries.seed}}
    return replace(dataset, clients=clients, metadata=metadata)
