"""The federated dataset container every loader returns and every federation consumes.

Arrays are numpy (``float32`` inputs, ``int64`` labels) so data can be generated, partitioned, hashed
and saved without torch; the federation converts them to tensors once.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError


@dataclass
class ClientData:
    """One client's local train/test split."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    def __post_init__(self) -> None:
        for name in ("x_train", "x_test"):
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.float32))
        for name in ("y_train", "y_test"):
            setattr(self, name, np.ascontiguousarray(getattr(self, name), dtype=np.int64))
        if len(self.x_train) != len(self.y_train) or len(self.x_test) != len(self.y_test):
            raise InvalidParameterError("client inputs and labels differ in length")

    @property
    def num_train(self) -> int:
        return len(self.y_train)

    @property
    def num_test(self) -> int:
        return len(self.y_test)


@dataclass
class FederatedDataset:
    """Clients' data plus what models need to know about it.

    ``input_shape`` excludes the batch dimension (e.g. ``(60,)`` for synthetic features, ``(1, 28, 28)``
    for MNIST-like images). ``test`` is the pooled test set used for global accuracy (by default the
    concatenation of the clients' test splits). ``normalization`` is ``(mean, std)`` per channel when inputs
    were standardised, so attacks can map reconstructions back to [0, 1] (``data_range``).
    """

    name: str
    clients: list[ClientData]
    num_classes: int
    input_shape: tuple[int, ...]
    test: tuple[np.ndarray, np.ndarray] | None = None
    data_range: tuple[float, float] = (0.0, 1.0)
    normalization: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.clients:
            raise InvalidParameterError(f"dataset {self.name!r} has no clients")
        self.input_shape = tuple(int(d) for d in self.input_shape)
        if self.test is None:
            xs = [c.x_test for c in self.clients if c.num_test]
            ys = [c.y_test for c in self.clients if c.num_test]
            if xs:
                self.test = (np.concatenate(xs), np.concatenate(ys))

    @property
    def num_clients(self) -> int:
        return len(self.clients)

    @property
    def client_sizes(self) -> np.ndarray:
        return np.array([c.num_train for c in self.clients], dtype=np.int64)

    def fingerprint(self) -> str:
        """sha256 over every array, in client order: identifies the exact data a run used."""
        digest = hashlib.sha256()
        for c in self.clients:
            for arr in (c.x_train, c.y_train, c.x_test, c.y_test):
                digest.update(str(arr.shape).encode())
                digest.update(np.ascontiguousarray(arr).tobytes())
        return digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        sizes = self.client_sizes
        return {
            "name": self.name,
            "num_clients": self.num_clients,
            "num_classes": self.num_classes,
            "input_shape": list(self.input_shape),
            "train_size_total": int(sizes.sum()),
            "train_size_min_mean_max": [int(sizes.min()), float(sizes.mean()), int(sizes.max())],
            "fingerprint": self.fingerprint(),
            **{k: v for k, v in self.metadata.items() if isinstance(v, str | int | float | bool | list | dict | None)},
        }


def normalise_rows(dataset: FederatedDataset) -> FederatedDataset:
    """A copy of ``dataset`` with every feature vector scaled to ‖x‖ ≤ 1 (divided by the largest norm overall).

    Upcycled-FL Thm 6.3 (objective perturbation) assumes ‖v‖ ≤ 1 for the GLM feature vector of every record. One
    common factor keeps the data's geometry; it is shrunk by 1e-6 so that the bound survives float32 rounding.
    """
    norms = [float(np.linalg.norm(a.reshape(len(a), -1), axis=1).max()) for c in dataset.clients for a in (c.x_train, c.x_test)
             if len(a)]
    largest = max(norms, default=0.0)
    factor = (1.0 - 1e-6) / largest if largest > 1 else 1.0
    clients = [ClientData(c.x_train * factor, c.y_train, c.x_test * factor, c.y_test) for c in dataset.clients]
    return FederatedDataset(
        name=f"{dataset.name}|rows≤1",
        clients=clients,
        num_classes=dataset.num_classes,
        input_shape=dataset.input_shape,
        metadata={**dataset.metadata, "row_scale": factor},
    )
