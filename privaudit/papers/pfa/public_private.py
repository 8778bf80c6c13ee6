"""Which clients are "public" (large ε_m) and which "private": PFA's client division (004 §4.4 step 1, Remark 2).

The paper divides the sampled clients S_t into S^pub and S^pri "by clustering algorithms such as k-means or
Gaussian mixture models", or takes "the top-K clients in terms of the privacy budgets" (Remark 2). Three
methods, numpy only:

* ``topk`` — the ``public_clients`` largest budgets (ties broken by client order);
* ``kmeans`` — two-means on the budgets. In one dimension the optimal two-means partition is a threshold
  on the sorted values, so it is found exactly by scanning the split points (no random restarts; the result
  does not depend on the seed);
* ``gmm`` — a two-component Gaussian mixture fitted by EM (seeded initialisations, best log-likelihood
  kept); a client is public when its posterior of the larger-mean component exceeds ½.

Scope. Budgets are fixed and known to the server (004 §4.1), and Remark 2 clusters *the clients* into two
groups; Alg. 2 line 5 then partitions each round's sample S_t by those groups. ``scope="population"``
(default) divides all M clients once and each sampled client keeps its group — which is also what the
reference code does (``threshold = sorted_eps[-int(0.1·N)]`` over every client: top 10 % of the population).
``scope="round"`` clusters every round's sample anew (a literal reading of Alg. 2 line 5): a sample that
happens to hold no high-ε client is still split in two, so some private clients are then treated as public.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

from privaudit.errors import InvalidParameterError


class SplitMethod(str, Enum):
    TOPK = "topk"
    KMEANS = "kmeans"
    GMM = "gmm"

    @classmethod
    def parse(cls, value: str | SplitMethod) -> SplitMethod:
        if isinstance(value, SplitMethod):
            return value
        key = str(value).strip().lower().replace("-", "").replace("_", "")
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown public/private split {value!r}; use 'topk', 'kmeans' or 'gmm'")


class SplitScope(str, Enum):
    POPULATION = "population"  # divide all M clients once (Remark 2; the reference code does the same)
    ROUND = "round"  # cluster every round's sample S_t anew (literal Alg. 2 line 5)

    @classmethod
    def parse(cls, value: str | SplitScope) -> SplitScope:
        if isinstance(value, SplitScope):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown split scope {value!r}; use 'round' or 'population'")


@dataclass(frozen=True)
class Split:
    """Positions (into the budgets given) of the public and the private clients."""

    public: tuple[int, ...]
    private: tuple[int, ...]
    method: str
    threshold: float | None = None

    def to_dict(self) -> dict:
        return {"public": list(self.public), "private": list(self.private), "method": self.method, "threshold": self.threshold}


def _as_budgets(epsilons: Sequence[float]) -> np.ndarray:
    values = np.asarray(epsilons, dtype=float).reshape(-1)
    if values.size == 0:
        raise InvalidParameterError("cannot divide an empty set of clients into public and private")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise InvalidParameterError("public/private division needs positive finite budgets")
    return values


def _from_mask(mask: np.ndarray, method: str, threshold: float | None) -> Split:
    return Split(tuple(int(i) for i in np.flatnonzero(mask)), tuple(int(i) for i in np.flatnonzero(~mask)), method, threshold)


def split_topk(epsilons: Sequence[float], public_clients: int) -> Split:
    """The ``public_clients`` largest budgets are public (stable: equal budgets keep client order)."""
    values = _as_budgets(epsilons)
    if isinstance(public_clients, bool) or int(public_clients) != public_clients or public_clients < 1:
        raise InvalidParameterError(f"the number of public clients must be a positive integer, got {public_clients!r}")
    if public_clients > values.size:
        raise InvalidParameterError(f"cannot choose {public_clients} public clients among {values.size} clients")
    order = np.argsort(-values, kind="stable")
    mask = np.zeros(values.size, dtype=bool)
    mask[order[: int(public_clients)]] = True
    return _from_mask(mask, "topk", float(values[order[int(public_clients) - 1]]))


def split_kmeans(epsilons: Sequence[float]) -> Split:
    """Exact 1-D two-means: the threshold between sorted values that minimises the within-group sum of squares.

    With all budgets equal there is nothing to divide: every client is public (the private group is empty).
    """
    values = _as_budgets(epsilons)
    order = np.sort(values)
    if order[0] == order[-1]:
        return _from_mask(np.ones(values.size, dtype=bool), "kmeans", float(order[0]))
    prefix = np.cumsum(order)
    prefix_sq = np.cumsum(order**2)
    n = order.size
    best, cut = math.inf, 1
    for left in range(1, n):
        if order[left] == order[left - 1]:
            continue  # a threshold must separate distinct values
        l_sum, l_sq = prefix[left - 1], prefix_sq[left - 1]
        r_sum, r_sq = prefix[-1] - l_sum, prefix_sq[-1] - l_sq
        cost = (l_sq - l_sum**2 / left) + (r_sq - r_sum**2 / (n - left))
        if cost < best - 1e-12 * max(1.0, abs(best) if math.isfinite(best) else 1.0):
            best, cut = cost, left
    threshold = 0.5 * (order[cut - 1] + order[cut])
    return _from_mask(values > threshold, "kmeans", float(threshold))


def _normal_logpdf(x: np.ndarray, mean: float, var: float) -> np.ndarray:
    return -0.5 * (np.log(2 * np.pi * var) + (x - mean) ** 2 / var)


def fit_two_gaussians(values: np.ndarray, rng: np.random.Generator, restarts: int = 8, iterations: int = 500,
                      tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """EM for a two-component 1-D Gaussian mixture: (weights, means, variances, log-likelihood), means ascending.

    Initialisations: the exact two-means division first, then ``restarts`` seeded random pairs of data points as
    means. Variances are floored at 1e-6 of the data variance (or 1e-12) so a component on one point cannot
    collapse to a singular fit.
    """
    x = values.astype(float)
    floor = max(1e-6 * float(np.var(x)), 1e-12)
    inits = []
    division = split_kmeans(x)
    if division.private and division.public:
        lo, hi = x[list(division.private)], x[list(division.public)]
        inits.append((np.array([lo.mean(), hi.mean()]), np.array([max(lo.var(), floor), max(hi.var(), floor)]),
                      np.array([lo.size, hi.size], dtype=float) / x.size))
    for _ in range(restarts):
        pair = np.sort(rng.choice(x, size=2, replace=False))
        inits.append((pair, np.full(2, max(float(np.var(x)), floor)), np.full(2, 0.5)))
    best = None
    for means, variances, weights in inits:
        means, variances, weights = means.copy(), variances.copy(), weights.copy()
        previous = -math.inf
        for _ in range(iterations):
            log_joint = np.stack([np.log(max(weights[j], 1e-300)) + _normal_logpdf(x, means[j], variances[j]) for j in range(2)])
            top = log_joint.max(axis=0)
            log_norm = top + np.log(np.exp(log_joint - top).sum(axis=0))
            likelihood = float(log_norm.sum())
            resp = np.exp(log_joint - log_norm)
            mass = resp.sum(axis=1)
            if np.any(mass < 1e-12):
                break
            weights = mass / x.size
            means = (resp * x).sum(axis=1) / mass
            variances = np.maximum((resp * (x - means[:, None]) ** 2).sum(axis=1) / mass, floor)
            if likelihood - previous <= tol * max(1.0, abs(likelihood)):
                break
            previous = likelihood
        if not np.all(np.isfinite(means)):
            continue
        if best is None or likelihood > best[3]:
            order = np.argsort(means)
            best = (weights[order], means[order], variances[order], likelihood)
    if best is None:  # pragma: no cover - the two-means initialisation always converges to finite values
        raise InvalidParameterError("the Gaussian-mixture division failed to converge")
    return best


def split_gmm(epsilons: Sequence[float], seed: int = 0) -> Split:
    """Two-component Gaussian mixture (numpy EM, seeded); public = posterior of the larger-mean component > ½."""
    values = _as_budgets(epsilons)
    if values.size < 2 or values.min() == values.max():
        return _from_mask(np.ones(values.size, dtype=bool), "gmm", float(values.min()))
    rng = np.random.default_rng(np.random.SeedSequence(entropy=int(seed), spawn_key=(0x6D6D,)))
    weights, means, variances, _ = fit_two_gaussians(values, rng)
    log_lo = np.log(weights[0]) + _normal_logpdf(values, means[0], variances[0])
    log_hi = np.log(weights[1]) + _normal_logpdf(values, means[1], variances[1])
    mask = log_hi > log_lo
    if not mask.any():  # the high component won no client: fall back to the budgets above its mean's division
        mask = values >= values.max()
    if mask.all():
        mask = values > values.min()
    public_min = float(values[mask].min())
    return _from_mask(mask, "gmm", public_min)


def split_clients(epsilons: Sequence[float], method: str | SplitMethod, *, public_clients: int | None = None, seed: int = 0) -> Split:
    """Divide clients with budgets ``epsilons`` into public and private by ``method``."""
    method = SplitMethod.parse(method)
    if method is SplitMethod.TOPK:
        if public_clients is None:
            raise InvalidParameterError("the top-K division needs the number of public clients")
        return split_topk(epsilons, public_clients)
    if method is SplitMethod.KMEANS:
        return split_kmeans(epsilons)
    return split_gmm(epsilons, seed)
