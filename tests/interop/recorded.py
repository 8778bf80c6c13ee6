"""A tiny federation trained by a plain PyTorch loop and recorded with :mod:`privaudit.interop.recorder` (shared by the
interop tests; ``make_custom_net`` is the user factory the factory-trust tests name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from privaudit.interop import DatasetReference, FederationRecorder, GaussianRelease, ModelFactory

CLIENTS, ROUNDS, PER_CLIENT, HELD_OUT = 3, 2, 60, 120


class CustomNet(nn.Module):
    """Not an nn.Sequential: its architecture can only be recorded as a factory."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.hidden = nn.Linear(64, width)
        self.head = nn.Linear(width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.hidden(x.flatten(1))))


def make_custom_net(width: int = 16) -> nn.Module:
    return CustomNet(width)


def make_sequential() -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))


def digits_reference(seed: int = 0) -> DatasetReference:
    order = np.random.default_rng(seed).permutation(1797)
    partition = {k: order[k * PER_CLIENT : (k + 1) * PER_CLIENT] for k in range(CLIENTS)}
    held_out = order[CLIENTS * PER_CLIENT : CLIENTS * PER_CLIENT + HELD_OUT]
    return DatasetReference.packaged("digits", partition=partition, non_members=held_out)


def record_tiny_federation(out: Path, *, dataset: DatasetReference | None = None, factory: bool = False,
                           noise_multiplier: float | None = 2.0, releases: bool = True, seed: int = 0,
                           **recorder_options: Any) -> Path:
    """FedAvg over 3 clients for 2 rounds (5 full-batch SGD steps each); each client's update is clipped and noised
    when ``noise_multiplier`` is set: one record-level GaussianRelease per client and round, with Δ = 2C since the whole
    clipped update is noised (any of its records may move it anywhere in the ball of radius C)."""
    torch.manual_seed(seed)
    dataset = dataset or digits_reference(seed)
    model = make_custom_net() if factory else make_sequential()
    options: dict[str, Any] = {"architecture": ModelFactory("tests.interop.recorded:make_custom_net", {"width": 16})} if factory else {}
    generator = torch.Generator().manual_seed(seed)
    with FederationRecorder(out, model=model, dataset=dataset, seed=seed, overwrite=True,
                            local_training={"lr": 0.5, "epochs": 5, "batch_size": PER_CLIENT, "momentum": 0.0},
                            **options, **recorder_options) as recorder:
        for round_ in range(1, ROUNDS + 1):
            start = {k: v.detach().clone() for k, v in model.state_dict().items()}
            released = {}
            for client in range(CLIENTS):
                local = make_custom_net() if factory else make_sequential()
                local.load_state_dict(start)
                optimiser = torch.optim.SGD(local.parameters(), lr=0.5)
                x, y = (torch.from_numpy(a) for a in dataset.client_data(client))
                for _ in range(5):
                    optimiser.zero_grad()
                    nn.functional.cross_entropy(local(x), y).backward()
                    optimiser.step()
                state = {k: v.detach().clone() for k, v in local.state_dict().items()}
                if noise_multiplier is not None:
                    update = {k: state[k] - start[k] for k in state}
                    norm = float(torch.sqrt(sum((u**2).sum() for u in update.values())))
                    scale = min(1.0, 1.0 / max(norm, 1e-12))
                    state = {k: start[k] + update[k] * scale + noise_multiplier * torch.randn(update[k].shape, generator=generator)
                             for k in state}
                released[client] = state
            model.load_state_dict({k: sum(released[c][k] for c in released) / CLIENTS for k in start})
            events = ([GaussianRelease(list(released), noise_multiplier=noise_multiplier, clip=1.0, sensitivity=2.0)]
                      if noise_multiplier is not None else [])
            recorder.record_round(round_, global_model=model, client_releases=released if releases else None,
                                  privacy_events=events, sampled_clients=list(released), metrics={"test_accuracy": 0.5})
    return recorder.path
