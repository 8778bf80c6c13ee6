"""Tiny federations for the membership-attack tests (fast on a loaded 2-core machine, everything seeded)."""

from __future__ import annotations

import numpy as np

from privaudit.data.base import ClientData, FederatedDataset
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.run import TrainSpec


def overfit_dataset(seed: int = 0, clients: int = 4, n: int = 24, dim: int = 30, classes: int = 4, label_noise: float = 0.5) -> FederatedDataset:
    """Few records per client, many features and noisy labels: a logistic regression memorises its members."""
    rng = np.random.default_rng(seed)
    teacher = rng.normal(size=(dim, classes))
    parts = []
    for _ in range(clients):
        x = rng.normal(size=(2 * n, dim)).astype(np.float32)
        y = np.argmax(x @ teacher, axis=1)
        flip = rng.random(2 * n) < label_noise
        y[flip] = rng.integers(0, classes, int(flip.sum()))
        parts.append(ClientData(x[:n], y[:n], x[n:], y[n:]))
    return FederatedDataset(name="tiny-overfit", clients=parts, num_classes=classes, input_shape=(dim,))


def overfit_spec(rounds: int = 5, **overrides) -> TrainSpec:
    values = {"algorithm": "fedavg", "dataset": "tiny-overfit", "rounds": rounds, "model": "logreg",
              "local": LocalTrainingConfig(epochs=20, batch_size=8, lr=0.5, momentum=0.5)}
    values.update(overrides)
    return TrainSpec(**values)
