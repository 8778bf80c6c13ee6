"""The malicious server's imprint block: what it prepends to the model before sending it to a client.

Fowl, Geiping, Czaja, Goldblum, Goldstein, "Robbing the Fed: Directly Obtaining Private Data in Federated
Learning with Modified Models", ICLR 2022, §3 ("imprint module"). The block acts on the flattened input
x ∈ ℝᵈ (model space) and has two linear layers:

* **encoder** (k bins): every row is the same measurement vector m, and bin i has bias −cᵢ, so
  hᵢ = ReLU(⟨m, x⟩ − cᵢ). The thresholds c₁ < c₂ < … < c_k cut the distribution of the statistic
  s = ⟨m, x⟩ into k intervals of equal probability: c₁ lies below every value the statistic can take on
  the data range (so every input activates bin 1) and cᵢ = F⁻¹((i − 1)/k) for i ≥ 2, F the statistic's
  distribution function as the server estimates it — a Gaussian fitted to a public sample (the paper's
  assumption; cᵢ = μ + σ Φ⁻¹((i − 1)/k)) or the sample's empirical quantiles.
* **decoder** (back to the input shape, no bias): every column is the same vector v, so the block outputs
  x + v Σᵢ hᵢ and the user's model still runs on a shifted input, ‖v Σᵢ hᵢ‖ ≤ k‖v‖ (s − c₁); the server
  picks ‖v‖ = output_scale / k, so the shift is at most output_scale · (s − c₁). Equal columns give every bin
  the same backward signal aⱼ = ⟨v, ∂ℓⱼ/∂out⟩ for example j, which is what makes bins subtractable.

Statistics: ``brightness`` (m = 1/d: mean value of the model-space input) or ``random`` (m a seeded
Gaussian direction). The recovery is :mod:`attacks.inversion.imprint`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from privaudit.errors import InvalidParameterError

from .threat_model import DataSpec, ModelFactory

STATISTICS: tuple[str, ...] = ("brightness", "random")
DISTRIBUTIONS: tuple[str, ...] = ("gaussian", "empirical")
#: Prefixes of the block's and the user's parameters in the modified model's state dict.
BLOCK, USER = "imprint", "model"


class ImprintBlock(nn.Module):
    """x ↦ x + decoder(ReLU(encoder(flatten(x)))), reshaped to ``shape`` (module docstring)."""

    def __init__(self, shape: tuple[int, ...], bins: int) -> None:
        super().__init__()
        self.shape = tuple(int(d) for d in shape)
        features = math.prod(self.shape)
        self.encoder = nn.Linear(features, bins)
        self.decoder = nn.Linear(bins, features, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.encoder(x.flatten(1)))
        return x + self.decoder(h).reshape(x.shape)


class ImprintedModel(nn.Module):
    """The model the malicious server sends: the imprint block, then the user's model unchanged."""

    def __init__(self, block: ImprintBlock, model: nn.Module) -> None:
        super().__init__()
        self.imprint = block
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(self.imprint(x))


@dataclass(frozen=True)
class ImprintedFactory:
    """Builds the modified architecture: ``ImprintedModel(ImprintBlock(shape, bins), user_factory())``."""

    user_factory: ModelFactory
    shape: tuple[int, ...]
    bins: int

    def __call__(self) -> nn.Module:
        return ImprintedModel(ImprintBlock(self.shape, self.bins), self.user_factory())


@dataclass(frozen=True)
class ImprintDesign:
    """The server's choice of block weights: measurement m, increasing thresholds c, output direction v."""

    measurement: torch.Tensor
    thresholds: torch.Tensor
    output_direction: torch.Tensor
    statistic: str
    distribution: str
    encoder_scale: float = 1.0

    @property
    def bins(self) -> int:
        return int(self.thresholds.numel())

    def statistic_of(self, inputs: torch.Tensor) -> torch.Tensor:
        """s = ⟨m, x⟩ of each (model-space) input."""
        return inputs.reshape(inputs.shape[0], -1).to(torch.float64) @ self.measurement.to(torch.float64)

    def interval_of(self, inputs: torch.Tensor) -> torch.Tensor:
        """Index of the interval (cᵢ, cᵢ₊₁] each input falls in (−1 below c₁): the bin that imprints it."""
        s = self.statistic_of(inputs)
        return torch.searchsorted(self.thresholds.to(torch.float64), s, right=False) - 1

    def occupancy(self, inputs: torch.Tensor) -> dict[str, Any]:
        """Ground truth of the separation (the client's inputs are needed): how many inputs sit alone in a bin."""
        interval = self.interval_of(inputs)
        _, inverse, counts = torch.unique(interval, return_inverse=True, return_counts=True)
        alone = int((counts[inverse] == 1).sum())
        return {"inputs": int(inputs.shape[0]), "bins_with_inputs": int(counts.numel()), "inputs_alone_in_a_bin": alone,
                "inputs_below_every_bin": int((interval < 0).sum())}

    def weights(self, user_weights: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """State dict of the :class:`ImprintedModel`: the block's weights plus the user's, prefixed."""
        k, d = self.bins, self.measurement.numel()
        block = {
            f"{BLOCK}.encoder.weight": self.measurement.to(torch.float32).expand(k, d).clone(),
            f"{BLOCK}.encoder.bias": (-self.thresholds).to(torch.float32).clone(),
            f"{BLOCK}.decoder.weight": self.output_direction.to(torch.float32)[:, None].expand(d, k).clone(),
        }
        return {**block, **{f"{USER}.{name}": value.detach().clone() for name, value in user_weights.items()}}

    def describe(self) -> dict[str, Any]:
        shown = (self.thresholds / self.encoder_scale).tolist()  # in the statistic's units
        return {"bins": self.bins, "statistic": self.statistic, "distribution": self.distribution,
                "encoder_scale": self.encoder_scale,
                "thresholds": [float(c) for c in shown[:3]] + (["…", float(shown[-1])] if self.bins > 3 else [])}


def statistic_range(measurement: torch.Tensor, data: DataSpec) -> tuple[float, float]:
    """Smallest and largest ⟨m, x⟩ over the data range (the box of valid model-space inputs)."""
    low, high = (t.expand(1, *data.shape).reshape(-1).to(torch.float64) for t in data.box())
    m = measurement.to(torch.float64)
    return float(torch.minimum(m * low, m * high).sum()), float(torch.maximum(m * low, m * high).sum())


def design_imprint(
    data: DataSpec,
    public_inputs: torch.Tensor,
    *,
    bins: int,
    statistic: str = "brightness",
    distribution: str = "gaussian",
    output_scale: float = 1.0,
    encoder_scale: float = 1.0,
    seed: int = 0,
) -> ImprintDesign:
    """Thresholds at equal-mass quantiles of the statistic, estimated from ``public_inputs`` (model space).

    The public sample stands for what the server knows about the data distribution. The experiment
    (:func:`attacks.inversion.experiment.run_inversion`) passes every record except the attacked images (those of
    every update): the pooled training records that are not attacked — including other records of the clients
    whose examples are attacked — and the test split. Every random choice (a ``random`` measurement,
    the output direction v) comes from ``seed``. ``encoder_scale`` λ multiplies m and every cᵢ (the bins are the
    same) and divides v, so the block's output is unchanged while its bias shrinks by λ and its update grows by 1/λ:
    a float32 parameter delta θ₁ − θ₀ then resolves the bins' update (its rounding error is ~ulp(λcᵢ)).
    """
    if statistic not in STATISTICS:
        raise InvalidParameterError(f"unknown imprint statistic {statistic!r}; choose one of: {', '.join(STATISTICS)}")
    if distribution not in DISTRIBUTIONS:
        raise InvalidParameterError(f"unknown imprint distribution {distribution!r}; choose one of: {', '.join(DISTRIBUTIONS)}")
    if bins < 2:
        raise InvalidParameterError(f"the imprint block needs at least 2 bins, got {bins}")
    if tuple(public_inputs.shape[1:]) != data.shape:
        raise InvalidParameterError(f"public inputs have shape {tuple(public_inputs.shape[1:])}, the data spec says {data.shape}")
    needed = bins if distribution == "empirical" else 2
    if public_inputs.shape[0] < needed:
        raise InvalidParameterError(
            f"the server's {distribution} estimate of the statistic needs at least {needed} public inputs, got {public_inputs.shape[0]}"
        )
    generator = torch.Generator().manual_seed(int(seed))
    features = math.prod(data.shape)
    if statistic == "brightness":
        measurement = torch.full((features,), 1.0 / features, dtype=torch.float64)
    else:
        measurement = torch.randn(features, generator=generator, dtype=torch.float64) / math.sqrt(features)
    s = public_inputs.reshape(public_inputs.shape[0], -1).to(torch.float64) @ measurement
    levels = torch.arange(1, bins, dtype=torch.float64) / bins
    if distribution == "gaussian":
        std = float(s.std())
        if not std > 0:
            raise InvalidParameterError("the public inputs all have the same statistic: no spread to cut into bins")
        interior = float(s.mean()) + std * torch.special.ndtri(levels)
    else:
        interior = torch.quantile(s, levels)
    lowest, _ = statistic_range(measurement, data)
    floor = lowest - 1e-6 * (1.0 + abs(lowest))
    thresholds = torch.cat([torch.tensor([floor], dtype=torch.float64), interior.clamp(min=floor)])
    direction = torch.randn(features, generator=generator, dtype=torch.float64)
    direction = direction * (output_scale / (float(torch.linalg.vector_norm(direction)) * bins * encoder_scale))
    return ImprintDesign(measurement * encoder_scale, thresholds * encoder_scale, direction, statistic, distribution, encoder_scale)


def find_imprint_block(module: nn.Module) -> tuple[str, ImprintBlock] | None:
    """The qualified name and the first :class:`ImprintBlock` inside ``module`` (``None`` if it has none)."""
    for name, sub in module.named_modules():
        if isinstance(sub, ImprintBlock):
            return name, sub
    return None
