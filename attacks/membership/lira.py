"""LiRA's per-example Gaussian likelihood-ratio scores (Carlini, Chien, Nasr, Song, Terzis & Tramèr 2022,
"Membership inference attacks from first principles", Alg. 1 and §IV-C/D), from shadow statistics.

Input: the target's logit-scaled confidence φ(x) per example, and for N shadow models the same statistic
φ_s(x) with a mask saying whether x was in shadow s's training data. Per example, fit N(μ_in, σ_in²) to the
IN observations and N(μ_out, σ_out²) to the OUT ones.

* online:  s = log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²)     (Alg. 1)
* offline: s = −log Pr[Z > φ],  Z ~ N(μ_out, σ_out²)                 (§IV-D: the one-sided test under OUT;
  a monotone transform of the paper's 1 − Pr[Z > φ] that keeps resolution in the far tail)
* variance ``"fixed"``: one σ for all examples, the pooled within-example standard deviation of the IN
  (resp. OUT) observations — the paper's recommendation for few shadow models (§IV-C, "global variance");
  with fewer than two observations per example on a side (2–3 shadows) the standard deviation of all that
  side's observations, which is what the reference implementation uses in every case;
  ``"per-example"``: each example's own sample standard deviation (needs ≥ 2 IN and ≥ 2 OUT observations);
  ``"auto"``: fixed below 64 shadow models, per-example from 64 on.

Larger scores mean member. Pure numpy/scipy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from privaudit.errors import InvalidParameterError

VARIANCES = ("auto", "per-example", "fixed")
MODES = ("online", "offline")
#: from this many shadow models on, ``variance="auto"`` estimates each example's own variance
PER_EXAMPLE_FROM = 64


@dataclass(frozen=True, eq=False)
class ShadowStatistics:
    """φ of every candidate example under every shadow model, and whether it was in that shadow's data."""

    phi: np.ndarray  # (shadows, examples)
    keep: np.ndarray  # (shadows, examples) bool

    def __post_init__(self) -> None:
        if self.phi.shape != self.keep.shape or self.phi.ndim != 2:
            raise InvalidParameterError("shadow statistics need matching (shadows × examples) φ and membership arrays")
        if not np.all(np.isfinite(self.phi)):
            raise InvalidParameterError("shadow φ values must be finite")

    @property
    def shadows(self) -> int:
        return int(self.phi.shape[0])


def resolve_variance(variance: str, shadows: int) -> str:
    if variance not in VARIANCES:
        raise InvalidParameterError(f"unknown LiRA variance {variance!r}; use one of {', '.join(VARIANCES)}")
    if variance == "auto":
        return "per-example" if shadows >= PER_EXAMPLE_FROM else "fixed"
    return variance


def _side_fit(phi: np.ndarray, mask: np.ndarray, variance: str, side: str) -> tuple[np.ndarray, np.ndarray]:
    counts = mask.sum(axis=0)
    need = 2 if variance == "per-example" else 1
    if np.any(counts < need):
        raise InvalidParameterError(
            f"LiRA needs at least {need} {side} shadow observation(s) per example ({int(counts.min())} found); "
            + ("train more shadow models or use variance='fixed'" if variance == "per-example" else "train more shadow models")
        )
    mean = np.where(mask, phi, 0.0).sum(axis=0) / counts
    residual = np.where(mask, phi - mean, 0.0)
    if variance == "per-example":
        sd = np.sqrt((residual**2).sum(axis=0) / (counts - 1))
    else:
        dof = int(mask.sum()) - phi.shape[1]
        if dof >= phi.shape[1]:  # on average ≥ 2 observations per example: pooled within-example spread
            sd = np.full(phi.shape[1], np.sqrt((residual**2).sum() / dof))
        else:  # 2–3 shadows: the spread of all observations of this side, as the reference code computes it
            sd = np.full(phi.shape[1], float(np.std(phi[mask])))
    floor = max(1e-6 * float(np.median(sd)) if np.any(sd > 0) else 0.0, 1e-12)
    return mean, np.maximum(sd, floor)


def gaussian_fits(stats: ShadowStatistics, variance: str) -> dict[str, np.ndarray]:
    """Per-example μ_in, σ_in, μ_out, σ_out under the chosen variance model."""
    variance = resolve_variance(variance, stats.shadows)
    mu_in, sd_in = _side_fit(stats.phi, stats.keep, variance, "IN")
    mu_out, sd_out = _side_fit(stats.phi, ~stats.keep, variance, "OUT")
    return {"mu_in": mu_in, "sd_in": sd_in, "mu_out": mu_out, "sd_out": sd_out}


def _target(target_phi: np.ndarray, stats: ShadowStatistics) -> np.ndarray:
    values = np.asarray(target_phi, dtype=np.float64).ravel()
    if values.shape != (stats.phi.shape[1],):
        raise InvalidParameterError(f"{values.size} target statistics for {stats.phi.shape[1]} examples")
    return values


def lira_online(target_phi: np.ndarray, stats: ShadowStatistics, variance: str = "auto") -> np.ndarray:
    """log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²) per example."""
    phi = _target(target_phi, stats)
    fit = gaussian_fits(stats, variance)
    return norm.logpdf(phi, fit["mu_in"], fit["sd_in"]) - norm.logpdf(phi, fit["mu_out"], fit["sd_out"])


def lira_offline(target_phi: np.ndarray, stats: ShadowStatistics, variance: str = "auto") -> np.ndarray:
    """−log Pr[Z > φ] with Z ~ N(μ_out, σ_out²) per example (only OUT observations are used)."""
    phi = _target(target_phi, stats)
    variance = resolve_variance(variance, stats.shadows)
    mu_out, sd_out = _side_fit(stats.phi, ~stats.keep, variance, "OUT")
    return -norm.logsf(phi, mu_out, sd_out)


def lira_scores(target_phi: np.ndarray, stats: ShadowStatistics, mode: str = "online", variance: str = "auto") -> np.ndarray:
    if mode == "online":
        return lira_online(target_phi, stats, variance)
    if mode == "offline":
        return lira_offline(target_phi, stats, variance)
    raise InvalidParameterError(f"unknown LiRA mode {mode!r}; use online or offline")
