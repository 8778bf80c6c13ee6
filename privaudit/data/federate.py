"""Turn a pooled labelled dataset plus a partition into a :class:`FederatedDataset`.

Each client's samples are shuffled and split into local train/test (``test_fraction`` of them, rounded
down, go to test, so a client keeps at least one training sample). The pooled test set is the dataset's
own test set where it has one (MNIST, CIFAR-10, ...) and otherwise the union of the clients' test splits.
Optional per-channel standardisation uses statistics of the clients' training data only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError

__all__ = ["PooledData", "federate", "split_train_test"]


@dataclass(frozen=True)
class PooledData:
    """A dataset before partitioning: inputs in [data_range], integer labels, an optional official test set."""

    name: str
    x: np.ndarray
    y: np.ndarray
    num_classes: int
    input_shape: tuple[int, ...]
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    data_range: tuple[float, float] = (0.0, 1.0)
    metadata: dict[str, Any] | None = None


def split_train_test(indices: np.ndarray, test_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Shuffle ``indices`` and return (train, test) with ⌊test_fraction·n⌋ test items."""
    if not 0.0 <= test_fraction < 1.0:
        raise InvalidParameterError(f"the per-client test fraction must be in [0, 1), got {test_fraction}")
    order = rng.permutation(np.asarray(indices, dtype=np.int64))
    n_test = int(np.floor(test_fraction * len(order) + 1e-9))
    return order[n_test:], order[:n_test]


def _channel_axis_stats(x: np.ndarray, input_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel mean/std for images (C, H, W); a single scalar pair for other inputs."""
    if len(input_shape) == 3:
        mean = x.mean(axis=(0, 2, 3))
        std = x.std(axis=(0, 2, 3))
    else:
        mean = np.array([x.mean()])
        std = np.array([x.std()])
    return mean, np.where(std > 0, std, 1.0)


def _apply(x: np.ndarray, mean: np.ndarray, std: np.ndarray, input_shape: tuple[int, ...]) -> np.ndarray:
    if len(input_shape) == 3:
        return (x - mean[None, :, None, None]) / std[None, :, None, None]
    return (x - mean[0]) / std[0]


def federate(
    pooled: PooledData,
    parts: list[np.ndarray],
    rng: np.random.Generator,
    *,
    test_fraction: float = 0.1,
    standardize: bool = False,
    metadata: dict[str, Any] | None = None,
) -> FederatedDataset:
    """Build the clients from index arrays ``parts`` into ``pooled.x``; see the module docstring."""
    x = pooled.x.astype(np.float32, copy=False)
    y = pooled.y.astype(np.int64, copy=False)
    splits = [split_train_test(part, test_fraction, rng) for part in parts]
    for k, (train, _) in enumerate(splits):
        if len(train) == 0:
            raise InvalidParameterError(f"client {k} of {pooled.name!r} has no training sample; use fewer clients")
    test: tuple[np.ndarray, np.ndarray] | None = None
    if pooled.x_test is not None and pooled.y_test is not None:
        test = (pooled.x_test.astype(np.float32, copy=False), pooled.y_test.astype(np.int64, copy=False))

    normalization = None
    if standardize:
        train_union = np.concatenate([tr for tr, _ in splits])
        mean, std = _channel_axis_stats(x[train_union], pooled.input_shape)
        x = _apply(x, mean, std, pooled.input_shape).astype(np.float32)
        if test is not None:
            test = (_apply(test[0], mean, std, pooled.input_shape).astype(np.float32), test[1])
        normalization = (tuple(float(m) for m in mean), tuple(float(s) for s in std))

    clients = [ClientData(x[tr], y[tr], x[te], y[te]) for tr, te in splits]
    return FederatedDataset(
        name=pooled.name,
        clients=clients,
        num_classes=pooled.num_classes,
        input_shape=pooled.input_shape,
        test=test,
        data_range=pooled.data_range,
        normalization=normalization,
        metadata={**(pooled.metadata or {}), **(metadata or {}), "test_fraction": float(test_fraction)},
    )
