"""Tiny federated problems for the engine's tests (fast on a loaded 2-core machine)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.data.base import ClientData, FederatedDataset

torch.set_num_threads(1)


def make_dataset(
    sizes: tuple[int, ...] = (23, 41, 17, 60, 35, 9),
    dim: int = 5,
    num_classes: int = 3,
    seed: int = 0,
    test_size: int = 8,
    client_type: type[ClientData] = ClientData,
) -> FederatedDataset:
    """Clients whose labels come from a shared linear teacher plus a per-client shift (learnable, non-iid)."""
    rng = np.random.default_rng(seed)
    teacher = rng.normal(size=(dim, num_classes))
    clients = []
    for n in sizes:
        shift = rng.normal(scale=0.5, size=dim)
        x = rng.normal(size=(n + test_size, dim)) + shift
        y = np.argmax(x @ teacher + 0.3 * rng.normal(size=(n + test_size, num_classes)), axis=1)
        clients.append(client_type(x[:n], y[:n], x[n:], y[n:]))
    return FederatedDataset(name="tiny", clients=clients, num_classes=num_classes, input_shape=(dim,))


@pytest.fixture
def tiny_dataset() -> FederatedDataset:
    return make_dataset()


def tiny_model(dim: int = 5, num_classes: int = 3, hidden: int | None = None, seed: int = 0) -> torch.nn.Module:
    from privaudit.fl.engine.seeding import seeded_torch_global

    def build() -> torch.nn.Module:
        if hidden is None:
            return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(dim, num_classes))
        return torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, num_classes))

    return seeded_torch_global(seed, build)
