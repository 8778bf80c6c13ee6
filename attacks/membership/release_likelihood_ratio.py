"""Mechanism-level white-box test of output perturbation: the exact likelihood ratio of a noisy release.

Upcycled-FL's output perturbation (Thm 6.2) releases Y = ξ + n with n ~ N(0, s²I), where ξ is the client's
clipped model and s = σ (the paper) or σ² (the reference code, audit point U1). For two neighbouring inputs with
clipped models ξ₀ (without the record) and ξ₁ (with it), the optimal test (Neyman–Pearson) thresholds

    Λ(Y) = log N(Y; ξ₁, s²I) − log N(Y; ξ₀, s²I) = (‖Y − ξ₀‖² − ‖Y − ξ₁‖²) / (2s²),

which is N(+μ²/2, μ²) when Y was made from ξ₁ and N(−μ²/2, μ²) from ξ₀, with μ = ‖ξ₁ − ξ₀‖/s: the release is
exactly μ-GDP for this pair (Dong, Roth & Su 2022, Thm 2.7). :func:`output_perturbation_lr_test` draws fresh
releases with the engine's own noise (:func:`privaudit.fl.privacy.noise.gaussian_noise`, the privatizer's generator:
seeded streams, or clock-millisecond seeds for ``rng="clock-ms"``) and returns Λ of the in-releases (made with
the record) and of the out-releases; their separation is μ up to Monte-Carlo error, which the auditor turns
into an ε lower bound.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.params import flatten
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.privacy import noise
from privaudit.fl.privacy.perturbation import NoiseRng, OutputPerturbationConfig

from .neighbouring_models import NeighbouringClippedModels
from .scores import MembershipScores


def release_log_ratio(release: torch.Tensor, without: torch.Tensor, with_record: torch.Tensor, std: float) -> float:
    """Λ(Y) = (‖Y − ξ₀‖² − ‖Y − ξ₁‖²) / (2s²) for flattened float64 tensors."""
    return float(((release - without).square().sum() - (release - with_record).square().sum()) / (2.0 * std * std))


def _seeded_clock(seed: int) -> Callable[[], float]:
    """A reproducible stand-in for ``time.time``: uniformly random fractional seconds."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xC1]))
    return lambda: 1.7e9 + float(rng.random())


def output_perturbation_lr_test(
    pair: NeighbouringClippedModels,
    config: OutputPerturbationConfig,
    *,
    trials: int = 1000,
    seed: int = 0,
    clock: Callable[[], float] | None = None,
) -> MembershipScores:
    """Λ of ``trials`` releases made from ξ₁ (in) and ``trials`` made from ξ₀ (out), fresh noise each.

    The noise law is the privatizer's: std ``config.std`` (σ or σ²) and ``config.rng`` (seeded, or the
    reference code's clock-millisecond seeds with ``clock``, by default a seeded random clock).
    ``meta["mu"]`` is the exact μ = ‖ξ₁ − ξ₀‖/s; ``meta["claimed_mu"]`` the μ Thm 6.2's sensitivity τ/|D| implies.
    """
    if int(trials) < 2:
        raise InvalidParameterError(f"the likelihood-ratio test needs at least 2 trials, got {trials}")
    if not math.isclose(pair.clip, config.clip):
        raise InvalidParameterError(f"the models were clipped to τ = {pair.clip:g}, the privatizer clips to τ = {config.clip:g}")
    std = float(config.std)
    started = time.perf_counter()
    template = pair.without
    xi0, xi1 = flatten(pair.without).double(), flatten(pair.with_record).double()
    seeds = SeedTree(seed)
    clock = clock or _seeded_clock(seed)

    def draw(trial: int, side: int) -> torch.Tensor:
        if config.rng is NoiseRng.CLOCK_MS:
            generator = torch.Generator().manual_seed(noise.clock_ms_seed(clock()))
        else:
            generator = seeds.torch("lr-test", trial, side)
        return flatten(noise.gaussian_noise(template, std, generator)).double()

    scores = {1: np.empty(int(trials)), 0: np.empty(int(trials))}
    for trial in range(int(trials)):
        for side, centre in ((1, xi1), (0, xi0)):
            scores[side][trial] = release_log_ratio(centre + draw(trial, side), xi0, xi1, std)
    meta = {
        "attack": "output-perturbation-likelihood-ratio",
        "threat_model": "white-box: one client's release, both neighbouring clipped models known",
        "mu": pair.mu(std),
        "claimed_mu": pair.claimed_sensitivity / std,
        "noise_std": std,
        "noise_convention": config.noise_std.value,
        "noise_rng": config.rng.value,
        "sigma": config.sigma,
        "trials": int(trials),
        "seconds": time.perf_counter() - started,
        **pair.to_dict(),
    }
    return MembershipScores(scores[1], scores[0], meta)
