"""Gradient-matching distances and image priors for optimisation-based inversion.

* ``l2`` — Σ_layers ‖s − t‖², the objective of DLG (Zhu et al., NeurIPS 2019, eq. 4).
* ``cosine`` — 1 − ⟨s, t⟩/(‖s‖‖t‖) over all matched parameters jointly, the objective of Inverting
  Gradients (Geiping et al., NeurIPS 2020, eq. 4).
* :func:`total_variation` — anisotropic total variation (mean absolute difference of neighbouring pixels),
  the image prior of Geiping et al. 2020 eq. 4.

Distances are registered by name in :data:`DISTANCES` so attacks can take the name as a setting.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import torch

from privaudit.errors import InvalidParameterError

Distance = Callable[[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]], torch.Tensor]


def squared_l2_distance(simulated: Mapping[str, torch.Tensor], target: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """Σ over matched parameters of ‖simulated − target‖² (DLG)."""
    return sum(((simulated[k] - t) ** 2).sum() for k, t in target.items())  # type: ignore[return-value]


def cosine_distance(simulated: Mapping[str, torch.Tensor], target: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """1 − cos∠(simulated, target), both flattened over all matched parameters (Inverting Gradients)."""
    dot = sum((simulated[k] * t).sum() for k, t in target.items())
    sim_norm = torch.sqrt(sum((simulated[k] ** 2).sum() for k in target))  # type: ignore[arg-type]
    target_norm = torch.sqrt(sum((t**2).sum() for t in target.values()))  # type: ignore[arg-type]
    return 1.0 - dot / (sim_norm * target_norm + 1e-30)


DISTANCES: dict[str, Distance] = {"l2": squared_l2_distance, "cosine": cosine_distance}



def get_distance(name: str) -> Distance:
    try:
        return DISTANCES[name]
    except KeyError:
        raise InvalidParameterError(
            f"unknown gradient distance {name!r}; choose one of: {', '.join(sorted(DISTANCES))}"
        ) from None


def total_variation(images: torch.Tensor) -> torch.Tensor:
    """Anisotropic TV: mean |x[..., i+1, j] − x[..., i, j]| + mean |x[..., i, j+1] − x[..., i, j]|.

    Inputs of fewer than two spatial dimensions have no neighbours in that sense; their TV is 0.
    """
    if images.dim() < 3:
        return images.new_zeros(())
    dx = (images[..., :, 1:] - images[..., :, :-1]).abs().mean()
    dy = (images[..., 1:, :] - images[..., :-1, :]).abs().mean()
    return dx + dy
