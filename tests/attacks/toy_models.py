"""Small models and data for attack tests (fast on one CPU thread)."""

from __future__ import annotations

import torch
from torch import nn

from attacks.inversion import DataSpec

COLOUR_8 = DataSpec((3, 8, 8), 10, mean=(0.5, 0.4, 0.3), std=(0.25, 0.2, 0.3))


class AffineTransform(nn.Module):
    """PrivateFL-style transformation layer x ↦ α⊙x + β (α per channel, β per pixel); identity at init."""

    def __init__(self, channels: int, height: int, width: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(channels, 1, 1))
        self.beta = nn.Parameter(torch.zeros(channels, height, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.alpha * x + self.beta


def fc_first(shape=(3, 8, 8), hidden: int = 64, classes: int = 10, transform: bool = False) -> nn.Module:
    layers: list[nn.Module] = [AffineTransform(*shape)] if transform else []
    n = shape[0] * shape[1] * shape[2]
    layers += [nn.Flatten(), nn.Linear(n, hidden), nn.ReLU(), nn.Linear(hidden, classes)]
    return nn.Sequential(*layers)


def small_cnn(shape=(3, 8, 8), classes: int = 10) -> nn.Module:
    c = shape[0]
    return nn.Sequential(
        nn.Conv2d(c, 12, 3, padding=1), nn.LeakyReLU(0.2),
        nn.Conv2d(12, 12, 3, padding=1, stride=2), nn.LeakyReLU(0.2),
        nn.Flatten(), nn.Linear(12 * (shape[1] // 2) * (shape[2] // 2), classes),
    )


def seeded_weights(factory, seed: int) -> dict[str, torch.Tensor]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return {k: v.detach().clone() for k, v in factory().state_dict().items()}


def unit_images(count: int, spec: DataSpec, seed: int) -> torch.Tensor:
    """Smooth random images in [0, 1] (low-frequency, so TV priors and PSNR behave like on photos)."""
    g = torch.Generator().manual_seed(seed)
    c, h, w = spec.shape
    coarse = torch.rand((count, c, max(h // 4, 2), max(w // 4, 2)), generator=g)
    return torch.nn.functional.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=True).clamp(0, 1)
