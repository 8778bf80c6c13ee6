"""The random draws of Upcycled-FL's privatizers, as the paper states them and as its code runs them.

Pure functions: each takes its randomness explicitly (a seed or a generator) so that tests and audits can
reproduce every draw.

* Output perturbation (000 §5 / 003 §6, Thm 6.2): ξ(ω) = ω / max(1, ‖ω‖₂/τ) over the whole model, then
  ω̂ = ξ(ω) + n with n ~ N(0, s²I) drawn tensor by tensor in the model's order.
* Objective perturbation (Thm 6.3): n with density ∝ exp(−α‖n‖₂) in d dimensions, i.e. ‖n‖ ~ Gamma(shape d,
  rate α) and n/‖n‖ uniform on the sphere. The reference code instead draws a cube direction
  ``rand − 0.5`` per tensor, divides by the *sum* of the per-tensor norms and scales by Gamma(feature_len, α)
  (osu-srml/Upcycled-FL@4dd7400:client/avg.py; audit point U6).
* The reference code seeds its noise with ``int(frac(time.time())·1000)``: at most 1000 distinct noise
  draws (audit point U5). :func:`clock_ms_seed` reproduces that seed from any clock reading.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from privaudit.fl.engine.params import State, global_norm
from privaudit.fl.engine.seeding import seeded_torch_global


def clock_ms_seed(now: float) -> int:
    """The reference code's noise seed: the milliseconds of the clock reading, ``int((t − ⌊t⌋)·1000)`` ∈ {0..999}."""
    return int((now - int(now)) * 1000)


def clip_to_norm(state: Mapping[str, torch.Tensor], tau: float) -> tuple[State, float]:
    """ξ(ω) = ω / max(1, ‖ω‖₂/τ) with the L2 norm over every tensor; returns (ξ(ω), ‖ω‖₂)."""
    norm = global_norm(state)
    factor = min(1.0, tau / norm) if norm > 0 else 1.0
    return {k: v * factor for k, v in state.items()}, norm


def gaussian_noise(like: Mapping[str, torch.Tensor], std: float, generator: torch.Generator) -> State:
    """N(0, std²) noise shaped like ``like``, drawn tensor by tensor in order (as ``torch.normal(0, std, size)``).

    Drawn from ``generator`` (a CPU generator: :meth:`~privaudit.fl.engine.seeding.SeedTree.torch`) and placed on each
    tensor's device, so a seed gives the same noise whether the federation trains on the CPU or a GPU.
    """
    return {k: torch.normal(0.0, float(std), size=tuple(v.shape), generator=generator, dtype=v.dtype).to(v.device)
            for k, v in like.items()}


def objective_noise_paper(like: Mapping[str, torch.Tensor], alpha: float, seed: int) -> State:
    """n with density ∝ exp(−α‖n‖₂) on R^d, d = number of scalars in ``like`` (Upcycled-FL Thm 6.3).

    In polar coordinates the density of r = ‖n‖ is ∝ r^{d−1} e^{−αr}: Gamma(shape d, rate α); the direction is
    uniform on the unit sphere (a normalised standard normal vector).
    """

    def draw() -> State:
        d = sum(v.numel() for v in like.values())
        radius = torch.distributions.Gamma(torch.tensor(float(d), dtype=torch.float64), torch.tensor(float(alpha), dtype=torch.float64)).sample()
        direction = torch.randn(d, dtype=torch.float64)
        vector = direction * (radius / direction.norm())
        out, offset = {}, 0
        for k, v in like.items():
            out[k] = vector[offset : offset + v.numel()].reshape(v.shape).to(v.dtype)
            offset += v.numel()
        return out

    return seeded_torch_global(seed, draw)


def objective_noise_reference(like: Mapping[str, torch.Tensor], alpha: float, feature_len: int, seed: int) -> State:
    """The reference code's objective-perturbation noise (osu-srml/Upcycled-FL@4dd7400:client/avg.py), seeded with ``seed``.

    Per tensor a direction ``rand(shape) − 0.5`` (uniform in a cube); all directions are scaled by
    Gamma(shape ``feature_len``, rate α) divided by the *sum* of the per-tensor direction norms. With the
    reference's clock seed this reproduces its draws (same generator, same order).
    """

    def draw() -> State:
        directions = {k: torch.rand(v.shape) - 0.5 for k, v in like.items()}
        norm_sum = sum(torch.norm(d) for d in directions.values())
        radius = torch.distributions.gamma.Gamma(float(feature_len), float(alpha)).sample()
        coefficient = radius / norm_sum
        return {k: (d * coefficient).to(like[k].dtype) for k, d in directions.items()}

    return seeded_torch_global(seed, draw)
