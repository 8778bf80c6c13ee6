"""The null distribution of a canary cosine: cos(c, v) for c uniform on S^{d−1} and any fixed v ≠ 0.

Andrew et al., ICLR 2024 (§3.1): an unseen canary direction is independent of the
trained model, so its cosine with the model delta has density

    f_d(t) = (1 − t²)^{(d−3)/2} / B(½, (d−1)/2),   t ∈ (−1, 1),

i.e. (t + 1)/2 ~ Beta((d−1)/2, (d−1)/2); mean 0, variance exactly 1/d, and ≈ N(0, 1/d) for large d.
The analytic null gives false-positive rates without held-out canaries (Andrew et al.'s
``optimal_epsilon_lower_bound_closed_form_null``).
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from privaudit.errors import InvalidParameterError


def _dimension(d: int) -> int:
    if int(d) != d or d < 2:
        raise InvalidParameterError(f"the cosine null needs a dimension d ≥ 2, got {d}")
    return int(d)


def _beta(d: int) -> stats.rv_continuous:
    a = (_dimension(d) - 1) / 2
    return stats.beta(a, a)


def null_cosine_logpdf(t, d: int) -> np.ndarray:
    """log f_d(t) = ((d−3)/2)·log(1 − t²) − log B(½, (d−1)/2); −inf outside (−1, 1)."""
    d = _dimension(d)
    t = np.asarray(t, dtype=np.float64)
    inside = np.abs(t) < 1
    safe = np.where(inside, t, 0.0)
    value = (d - 3) / 2 * np.log1p(-safe * safe) - special.betaln(0.5, (d - 1) / 2)
    return np.where(inside, value, -np.inf)


def null_cosine_pdf(t, d: int) -> np.ndarray:
    return np.exp(null_cosine_logpdf(t, d))


def null_cosine_cdf(t, d: int) -> np.ndarray:
    return _beta(d).cdf((np.asarray(t, dtype=np.float64) + 1) / 2)


def null_cosine_sf(t, d: int) -> np.ndarray:
    """P[cos > t] under the null (the false-positive rate of the threshold t)."""
    return _beta(d).sf((np.asarray(t, dtype=np.float64) + 1) / 2)


def sample_null_cosines(count: int, d: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` draws of the null cosine: 2·Beta((d−1)/2, (d−1)/2) − 1."""
    a = (_dimension(d) - 1) / 2
    return 2 * rng.beta(a, a, size=int(count)) - 1


def null_cosine_variance(d: int) -> float:
    """Var = 1/d exactly."""
    return 1.0 / _dimension(d)
