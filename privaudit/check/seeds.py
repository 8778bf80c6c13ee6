"""Noise drawn from a small seed space: the clock-seed test of the Upcycled-FL reference made generic.

The Upcycled-FL reference seeds its noise with the clock's milliseconds (``attacks/membership/clock_recovery.py``:
1000 possible draws, audit point U5). Any generator seeded from a small space — the clock, a round counter, a fixed
constant every round — has the same flaw: an observer who enumerates the seeds finds the noise and subtracts it, so no
finite ε bounds the release. Given a residual that should be fresh noise (:mod:`privaudit.check.residuals`), this
module enumerates the seeds 0..S−1 of the generators Python training loops use and measures how closely each
candidate's first draws (the first tensor's noise, drawn first in model order) match the residual's first tensor:

* ``torch``: ``torch.Generator().manual_seed(k)`` (or ``torch.manual_seed(k)``), then ``torch.normal`` / ``randn`` of
  the tensor's shape and dtype, model order — the engine's privatizers and most PyTorch loops;
* ``numpy-legacy``: ``np.random.seed(k)`` then ``np.random.normal(size=shape)`` — Flower's
  ``add_gaussian_noise_inplace`` (flwr 1.42, ``flwr.supercore.differential_privacy``);
* ``numpy``: ``np.random.default_rng(k).normal(size=shape)``.

Test: under the null that the residual is isotropic Gaussian noise independent of these fixed candidates, the cosine c
between the residual block (m coordinates) and any fixed vector satisfies (1 + c)/2 ~ Beta((m−1)/2, (m−1)/2) exactly
(the direction of an isotropic Gaussian vector is uniform on the sphere), so each candidate has an exact two-sided
p-value; the search rejects when the smallest, times the number of candidates tried (Bonferroni), is at most its level.
A found seed is the noise itself (|c| ≈ 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import stats

GENERATORS = ("torch", "numpy-legacy", "numpy")
#: The default seed space: 0..9999 (the clock's milliseconds, small constants and counters).
DEFAULT_SEEDS = 10_000
#: At most this many coordinates of the first tensor are compared (more adds nothing: a match has |c| ≈ 1).
BLOCK = 512


@lru_cache(maxsize=16)
def candidates(generator: str, shape: tuple[int, ...], dtype: str, seeds: int) -> np.ndarray:
    """The first :data:`BLOCK` standard-normal draws of the first tensor (``shape``) for seeds 0..seeds−1, unit rows."""
    size = int(np.prod(shape, dtype=np.int64))
    block = min(BLOCK, size)
    # the generators draw sequentially (torch's vectorised normal in blocks of 16, and BLOCK is a multiple of 16), so
    # the first BLOCK draws of a larger tensor are the draws of a BLOCK-vector: only those are made
    shape = shape if size <= BLOCK else (BLOCK,)
    out = np.empty((seeds, block), dtype=np.float64)
    if generator == "torch":
        import torch

        torch_dtype = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
                       "bfloat16": torch.bfloat16}.get(dtype, torch.float32)
        g = torch.Generator()
        for k in range(seeds):
            g.manual_seed(k)
            out[k] = torch.normal(0.0, 1.0, size=shape, generator=g, dtype=torch_dtype).reshape(-1)[:block].double().numpy()
    elif generator == "numpy-legacy":
        state = np.random.RandomState()
        for k in range(seeds):
            state.seed(k)
            out[k] = state.normal(0.0, 1.0, size=shape).reshape(-1)[:block]
    elif generator == "numpy":
        for k in range(seeds):
            out[k] = np.random.default_rng(k).normal(0.0, 1.0, size=shape).reshape(-1)[:block]
    else:  # pragma: no cover - callers pass GENERATORS
        raise ValueError(generator)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    out.setflags(write=False)
    return out


def cosine_p_values(cosines: np.ndarray, m: int) -> np.ndarray:
    """Exact two-sided p-values of cosines between an isotropic Gaussian m-vector and fixed vectors (module docstring)."""
    a = (m - 1) / 2.0
    x = (1.0 + np.clip(cosines, -1.0, 1.0)) / 2.0
    return np.minimum(1.0, 2.0 * np.minimum(stats.beta.cdf(x, a, a), stats.beta.sf(x, a, a)))


def cosine_log10_p(cosine: float, m: int, factor: float = 1.0) -> float:
    """log₁₀ of ``factor`` × the two-sided p-value of :func:`cosine_p_values` (finite where it underflows)."""
    a = (m - 1) / 2.0
    x = (1.0 + min(1.0, max(-1.0, cosine))) / 2.0
    log_p = math.log(2.0 * factor) + min(float(stats.beta.logcdf(x, a, a)), float(stats.beta.logsf(x, a, a)))
    return min(0.0, log_p / math.log(10.0))


@dataclass(frozen=True)
class SeedMatch:
    """The best candidate for one round: its generator, seed, cosine and exact p-value (before Bonferroni)."""

    round: int
    generator: str
    seed: int
    cosine: float
    p_value: float
    block: int


def search(blocks: Sequence[tuple[int, np.ndarray]], shape: tuple[int, ...], dtype: str, seeds: int = DEFAULT_SEEDS,
           generators: Sequence[str] = GENERATORS) -> tuple[list[SeedMatch], int]:
    """The best match per round (``blocks``: (round, the residual's first-tensor coordinates)) and the number of
    candidates compared (for Bonferroni)."""
    matches: list[SeedMatch] = []
    tried = 0
    for round_, block in blocks:
        best: SeedMatch | None = None
        for name in generators:
            table = candidates(name, tuple(shape), dtype, int(seeds))
            m = min(table.shape[1], block.size)
            vector = block[:m]
            norm = float(np.linalg.norm(vector))
            if norm == 0 or m < 3:
                continue
            cos = table[:, :m] @ (vector / norm)
            if m < table.shape[1]:
                cos = cos / np.linalg.norm(table[:, :m], axis=1)
            k = int(np.argmax(np.abs(cos)))
            p = float(cosine_p_values(np.array([cos[k]]), m)[0])
            tried += table.shape[0]
            if best is None or p < best.p_value:
                best = SeedMatch(round_, name, k, float(cos[k]), p, m)
        if best is not None:
            matches.append(best)
    return matches, tried
