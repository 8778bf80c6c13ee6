"""The records whose membership an attack tests, with the truth (member or not) and their home client.

Members are the clients' training records; non-members are the clients' local test splits — records from the
same clients' distributions that no client trained on — or, when the clients have none, the pooled test set
(home client −1). ``index`` is each record's position in the dataset's canonical *pool* (client by client:
training records, then test records; then the pooled test set if used), which LiRA's shadow federations
split into halves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privaudit.data.base import FederatedDataset
from privaudit.errors import InvalidParameterError


@dataclass(frozen=True, eq=False)
class MembershipExamples:
    x: np.ndarray
    y: np.ndarray
    member: np.ndarray  # bool: the truth
    client: np.ndarray  # home client id, −1 for pooled test records
    index: np.ndarray  # position in the dataset's pool

    def __post_init__(self) -> None:
        n = len(self.y)
        if not (len(self.x) == len(self.member) == len(self.client) == len(self.index) == n):
            raise InvalidParameterError("membership examples need equal numbers of inputs, labels, bits, clients and indices")

    def __len__(self) -> int:
        return len(self.y)

    @property
    def n_members(self) -> int:
        return int(self.member.sum())

    def take(self, rows: np.ndarray) -> MembershipExamples:
        return MembershipExamples(self.x[rows], self.y[rows], self.member[rows], self.client[rows], self.index[rows])

    def subsample(self, max_per_side: int | None, seed: int = 0) -> MembershipExamples:
        """At most ``max_per_side`` members and as many non-members, drawn uniformly (seeded); order kept."""
        if max_per_side is None:
            return self
        if int(max_per_side) < 1:
            raise InvalidParameterError(f"max examples per side must be at least 1, got {max_per_side}")
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xE5]))
        keep = []
        for side in (True, False):
            rows = np.flatnonzero(self.member == side)
            if rows.size > max_per_side:
                rows = rng.choice(rows, size=int(max_per_side), replace=False)
            keep.append(rows)
        return self.take(np.sort(np.concatenate(keep)))


def dataset_pool(dataset: FederatedDataset) -> MembershipExamples:
    """Every record of ``dataset`` once, with its truth and home client (see the module docstring)."""
    xs, ys, members, clients = [], [], [], []
    for k, c in enumerate(dataset.clients):
        for x, y, member in ((c.x_train, c.y_train, True), (c.x_test, c.y_test, False)):
            if len(y):
                xs.append(x)
                ys.append(y)
                members.append(np.full(len(y), member))
                clients.append(np.full(len(y), k, dtype=np.int64))
    if not any(len(c.y_test) for c in dataset.clients):
        if dataset.test is None or len(dataset.test[1]) == 0:
            raise InvalidParameterError(f"dataset {dataset.name!r} has no held-out records to serve as non-members")
        xs.append(dataset.test[0])
        ys.append(dataset.test[1])
        members.append(np.zeros(len(dataset.test[1]), dtype=bool))
        clients.append(np.full(len(dataset.test[1]), -1, dtype=np.int64))
    y = np.concatenate(ys)
    return MembershipExamples(np.concatenate(xs).astype(np.float32), y.astype(np.int64), np.concatenate(members),
                              np.concatenate(clients), np.arange(len(y), dtype=np.int64))


def examples_from_dataset(dataset: FederatedDataset, *, max_per_side: int | None = None, seed: int = 0) -> MembershipExamples:
    """Members and non-members of a federation trained on ``dataset`` (optionally subsampled per side)."""
    return dataset_pool(dataset).subsample(max_per_side, seed)


def client_examples(dataset: FederatedDataset, client: int) -> MembershipExamples:
    """One client's training records (members of its release) and its local test records (non-members)."""
    pool = dataset_pool(dataset)
    rows = np.flatnonzero(pool.client == int(client))
    if rows.size == 0:
        raise InvalidParameterError(f"client {client} has no records")
    return pool.take(rows)
