"""The records a recorded federation trained on: :class:`DatasetReference`.

A :class:`DatasetReference` names the records (a packaged dataset privaudit loads, e.g. scikit-learn's digits, or your
arrays stored inside the checkpoint with ``store=True``), fingerprints them (sha256,
:func:`privaudit.fl.engine.recorded_data.pool_fingerprint`), and says which records each client trained on
(``partition``: client id 0..K−1 → row indices; those are the *members*) and which no client saw (``non_members``:
the membership attack's non-members, as in the member/non-member split of Shokri, Stronati, Song & Shmatikov 2017,
"Membership inference attacks against machine learning models"). Arrays you do not store are fingerprinted only, and
attacks that need the records refuse with a one-line reason. :class:`~privaudit.interop.recorder.FederationRecorder`
writes it into the checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.recorded_data import packaged_pool, pool_fingerprint


def _index_vector(values: Iterable[int], n: int, what: str) -> np.ndarray:
    """``values`` as distinct int64 row indices into ``n`` records (a tensor, an array or any iterable of ints)."""
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    index = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if index.size == 0:
        return np.zeros(0, dtype=np.int64)
    if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
        raise InvalidParameterError(f"{what} must be a list of integer row indices")
    index = index.astype(np.int64)
    if index.min() < 0 or index.max() >= n:
        raise InvalidParameterError(f"{what} indexes rows outside the {n} records")
    if len(np.unique(index)) != len(index):
        raise InvalidParameterError(f"{what} lists a row twice")
    return index


@dataclass(frozen=True, eq=False)
class DatasetReference:
    """The records a federation trained on: where they are found again, their fingerprint and their partition.

    Build it with :meth:`packaged` or :meth:`from_arrays`. ``partition`` maps client ids 0..K−1 to the row indices
    of the records that client trained on; ``non_members`` are rows no client trained on (the membership attack's
    non-members). A row may belong to one client only.
    """

    name: str
    kind: str  # "packaged" | "stored" | "external"
    x: np.ndarray
    y: np.ndarray
    partition: dict[int, np.ndarray]
    non_members: np.ndarray
    num_classes: int
    data_range: tuple[float, float]
    description: str = ""

    def __post_init__(self) -> None:
        n = len(self.y)
        if len(self.x) != n:
            raise InvalidParameterError(f"dataset {self.name!r}: {len(self.x)} inputs but {n} labels")
        ids = sorted(self.partition)
        if not ids or ids != list(range(len(ids))):
            raise InvalidParameterError(f"the partition must map client ids 0..K−1 to row indices, got ids {ids[:6]}")
        seen = np.concatenate([self.partition[k] for k in ids] + [self.non_members])
        if len(np.unique(seen)) != len(seen):
            raise InvalidParameterError("a record is in two clients' partitions, or in a partition and among the non-members")

    @classmethod
    def packaged(cls, name: str, *, partition: Mapping[int, Sequence[int]],
                 non_members: Sequence[int] = ()) -> DatasetReference:
        """A dataset shipped inside an installed package that privaudit loads by name (``digits``, ``mnist5k``,
        ``lfw``, ``images``; :func:`privaudit.fl.engine.recorded_data.packaged_pool` gives its rows)."""
        x, y, num_classes, data_range = packaged_pool(name)
        return cls(name, "packaged", x, y, _partition(partition, len(y)), _index_vector(non_members, len(y), "non_members"),
                   num_classes, data_range, f"packaged dataset {name}")

    @classmethod
    def from_arrays(cls, name: str, x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor, *,
                    partition: Mapping[int, Sequence[int]], non_members: Sequence[int] = (), store: bool = True,
                    num_classes: int | None = None, data_range: tuple[float, float] | None = None,
                    description: str = "") -> DatasetReference:
        """Your own arrays: ``x`` (inputs, any shape per record) and ``y`` (integer labels). With ``store=True`` they
        are saved inside the checkpoint (``tensors/data.safetensors``) so attacks can reload them; with ``False``
        only their fingerprint is kept."""
        x = np.ascontiguousarray(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float32)
        y_raw = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        if y_raw.ndim != 1 or (y_raw.size and not np.issubdtype(y_raw.dtype, np.integer)):
            raise InvalidParameterError("labels y must be a one-dimensional array of integers")
        y = np.ascontiguousarray(y_raw, dtype=np.int64)
        if x.ndim < 2 or len(y) == 0:
            raise InvalidParameterError("x must hold at least one record, shaped (records, features...)")
        if not np.isfinite(x).all():
            raise InvalidParameterError("x holds NaN or infinite values")
        classes = int(num_classes) if num_classes is not None else int(y.max()) + 1
        if y.min() < 0 or y.max() >= classes:
            raise InvalidParameterError(f"labels must lie in 0..{classes - 1}")
        span = (float(x.min()), float(x.max())) if data_range is None else (float(data_range[0]), float(data_range[1]))
        return cls(name, "stored" if store else "external", x, y, _partition(partition, len(y)),
                   _index_vector(non_members, len(y), "non_members"), classes, span, description or f"arrays {name}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.x.shape[1:])

    def fingerprint(self) -> str:
        return pool_fingerprint(self.x, self.y)

    def client_data(self, client: int) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the records ``client`` trained on."""
        rows = self.partition[int(client)]
        return self.x[rows], self.y[rows]


def _partition(partition: Mapping[int, Sequence[int]], n: int) -> dict[int, np.ndarray]:
    """Each client id of ``partition`` (an int) → its rows, checked by :func:`_index_vector`."""
    if not isinstance(partition, Mapping):
        raise InvalidParameterError("partition must map each client id to the row indices it trained on")
    out = {}
    for client, rows in partition.items():
        if isinstance(client, bool) or not isinstance(client, int | np.integer):
            raise InvalidParameterError(f"partition keys are integer client ids, got {client!r}")
        out[int(client)] = _index_vector(rows, n, f"partition[{client}]")
    return out
