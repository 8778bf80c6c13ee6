"""The Rényi-DP accountant (numpy/scipy only): fast, robust, an upper bound that is loose at small q.

Per-mechanism RDP curves are cached, and all uncached Poisson-subsampled Gaussians of a composition are
evaluated in one vectorised batch, so a schedule whose noise differs at every step (or a ledger of a
thousand clients with distinct noise) costs one batched evaluation instead of a thousand.

With the default orders the accountant evaluates a coarse subset first and then every default order
between the neighbours of the best coarse order. The result is still the minimum over evaluated orders
(hence a valid bound); ``orders=...`` evaluates exactly the given orders.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable

import numpy as np

from privaudit.accounting import rdp_math
from privaudit.accounting.base import Accountant, DeltaResult, EpsilonResult
from privaudit.accounting.bucketing import bucket
from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Laplace,
    Mechanism,
    Neighbouring,
    PureDP,
    Sampling,
    Skellam,
    SubsampledGaussian,
    effective_gaussian_multiplier,
    effective_laplace_epsilon,
    effective_pure_epsilon,
    effective_skellam_sensitivities,
)

#: Coarse orders used first with the default order set (all members of ``rdp_math.DEFAULT_ORDERS``).
COARSE_ORDERS = np.array(
    [1.01, 1.05, 1.1, 1.2, 1.3, 1.5, 1.7, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0, 14.0, 16.0,
     20.0, 24.0, 28.0, 32.0, 40.0, 48.0, 56.0, 64.0, 80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0]
)
#: Below this many distinct mechanisms the full default order set is evaluated directly.
_ADAPTIVE_THRESHOLD = 32
_CACHE_LIMIT = 200_000


class _CurveCache:
    """RDP values per (mechanism, relation), each a dict order → value; least recently used dropped first."""

    def __init__(self, limit: int = _CACHE_LIMIT) -> None:
        self._data: OrderedDict[tuple, dict[float, float]] = OrderedDict()
        self._limit = limit

    def lookup(self, key: tuple, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values, missing-mask) for ``orders``; missing entries are NaN."""
        table = self._data.get(key)
        if table is None:
            return np.full(orders.size, np.nan), np.ones(orders.size, dtype=bool)
        self._data.move_to_end(key)
        values = np.array([table.get(a, np.nan) for a in orders.tolist()])
        return values, np.isnan(values)

    def store(self, key: tuple, orders: np.ndarray, values: np.ndarray) -> None:
        table = self._data.setdefault(key, {})
        table.update(zip(orders.tolist(), values.tolist(), strict=True))
        if len(self._data) > self._limit:
            self._data.popitem(last=False)


_CACHE = _CurveCache()


def clear_cache() -> None:
    """Forget every cached RDP curve (benchmarks use it to time cold computations)."""
    global _CACHE
    _CACHE = _CurveCache()


def rdp_unsupported_reason(mechanism: Mechanism, neighbouring: Neighbouring) -> str | None:
    if isinstance(mechanism, SubsampledGaussian):
        if mechanism.sampling is Sampling.POISSON and neighbouring is Neighbouring.REPLACE_ONE and mechanism.sample_rate < 1:
            return ("RDP of Poisson subsampling is implemented for add/remove neighbours only "
                    "(use the pld accountant for replace-one)")
        return None
    if isinstance(mechanism, PureDP) and effective_pure_epsilon(mechanism, neighbouring) is None:
        return f"{mechanism.describe()} says nothing about {neighbouring.value} neighbours"
    if isinstance(mechanism, Gaussian | Laplace | PureDP | Skellam):
        return None
    return f"unknown mechanism {mechanism!r}"


def _single_curve(mechanism: Mechanism, neighbouring: Neighbouring, orders: np.ndarray) -> np.ndarray:
    if isinstance(mechanism, Gaussian):
        return rdp_math.rdp_gaussian(effective_gaussian_multiplier(mechanism, neighbouring), orders)
    if isinstance(mechanism, SubsampledGaussian):
        if mechanism.sampling is Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT and mechanism.sample_rate < 1.0:
            if neighbouring is Neighbouring.ADD_REMOVE:
                # a record added to a fixed-size batch displaces another: the Poisson add/remove pair with
                # sensitivity 2 at rate q ≥ b/(n + 1) (privaudit.accounting.pairs, *Dominating pairs*), i.e. MTZ at σ/2
                return rdp_math.rdp_poisson_subsampled_gaussian(mechanism.sample_rate, mechanism.z / 2.0, orders)
            return rdp_math.rdp_sampled_without_replacement_gaussian(mechanism.sample_rate, mechanism.z, orders)
        if mechanism.sample_rate >= 1.0:  # q = 1: a plain Gaussian release (replace-one doubles sensitivity)
            z = mechanism.z / 2.0 if neighbouring is Neighbouring.REPLACE_ONE else mechanism.z
            return rdp_math.rdp_gaussian(z, orders)
        return rdp_math.rdp_poisson_subsampled_gaussian(mechanism.sample_rate, mechanism.z, orders)
    if isinstance(mechanism, Laplace):
        return rdp_math.rdp_laplace(effective_laplace_epsilon(mechanism, neighbouring), orders)
    if isinstance(mechanism, PureDP):
        eps = effective_pure_epsilon(mechanism, neighbouring)
        assert eps is not None  # checked by unsupported_reason
        return rdp_math.rdp_pure(eps, orders)
    if isinstance(mechanism, Skellam):
        l2, l1 = effective_skellam_sensitivities(mechanism, neighbouring)
        return rdp_math.rdp_skellam(mechanism.variance, l2, l1, orders)
    raise TypeError(f"unsupported mechanism {mechanism!r}")  # pragma: no cover


#: Beyond this many distinct mechanisms, near-equal Poisson-subsampled Gaussians are bucketed (see composition_rdp).
MAX_DISTINCT_RDP = 4096


def composition_rdp(composition: Composition, orders: np.ndarray) -> np.ndarray:
    """Σ count · RDP(mechanism) at ``orders`` (composition theorem of RDP, Mironov 2017, Prop. 1).

    With more than :data:`MAX_DISTINCT_RDP` distinct mechanisms, the Poisson-subsampled Gaussians among them are
    grouped into at most that many buckets of near-equal (σ, q), each taken at its smallest σ and largest q —
    an upper bound, since their RDP decreases with σ and increases with q (adding noise is post-processing; a
    lower rate is a mixture with the identical pair, and Rényi divergence is quasi-convex) — so 100 000
    distinct steps cost seconds, not minutes.
    """
    orders = np.asarray(orders, dtype=float)
    if len(composition) > MAX_DISTINCT_RDP:
        return _bucketed_rdp(composition, orders)
    return _composition_rdp(composition, orders)


def _bucketed_rdp(composition: Composition, orders: np.ndarray) -> np.ndarray:
    sampled, rest = [], []
    for mechanism, count in composition:
        if (isinstance(mechanism, SubsampledGaussian) and mechanism.sampling is Sampling.POISSON
                and mechanism.sample_rate < 1.0 and not math.isinf(mechanism.z)):
            sampled.append((1.0 / mechanism.z, mechanism.sample_rate, count))
        else:
            rest.append((mechanism, count))
    total = _composition_rdp(Composition(rest, composition.neighbouring), orders) if rest else np.zeros_like(orders)
    if len(sampled) > MAX_DISTINCT_RDP:
        sampled, _ = bucket(sampled, MAX_DISTINCT_RDP)
    s, q, counts = (np.array(col, dtype=float) for col in zip(*sampled, strict=True)) if sampled else (np.zeros(0),) * 3
    if s.size:
        curves = rdp_math.rdp_poisson_subsampled_gaussian_batch(q, 1.0 / s, orders)
        total = total + (counts[:, None] * curves).sum(axis=0)
    return total


def _composition_rdp(composition: Composition, orders: np.ndarray) -> np.ndarray:
    rel = composition.neighbouring
    total = np.zeros_like(orders)
    batch: list[tuple[Mechanism, int, np.ndarray, np.ndarray]] = []  # Poisson-subsampled Gaussians to evaluate
    for mechanism, count in composition:
        if isinstance(mechanism, Gaussian) or (isinstance(mechanism, SubsampledGaussian) and mechanism.sample_rate >= 1.0):
            total += count * _single_curve(mechanism, rel, orders)  # closed form: cheaper than the cache
            continue
        key = (mechanism, rel)
        values, missing = _CACHE.lookup(key, orders)
        if not missing.any():
            total += count * values
            continue
        is_batchable = (
            isinstance(mechanism, SubsampledGaussian)
            and mechanism.sampling is Sampling.POISSON
            and mechanism.sample_rate < 1.0
        )
        if is_batchable:
            batch.append((mechanism, count, values, missing))
            continue
        curve = _single_curve(mechanism, rel, orders)
        _CACHE.store(key, orders, curve)
        total += count * curve
    if batch:
        # Evaluate the union of missing orders for every batched mechanism at once.
        need = np.zeros(orders.size, dtype=bool)
        for *_, missing in batch:
            need |= missing
        sub_orders = orders[need]
        q = np.array([m.sample_rate for m, *_ in batch])
        z = np.array([m.z for m, *_ in batch])
        computed = rdp_math.rdp_poisson_subsampled_gaussian_batch(q, z, sub_orders)
        for row, (mechanism, count, values, _) in enumerate(batch):
            curve = values.copy()
            curve[need] = computed[row]
            _CACHE.store((mechanism, rel), sub_orders, computed[row])
            total += count * curve
    return total


class RdpAccountant(Accountant):
    """Rényi DP (Mironov 2017; MTZ 2019) with the Balle et al. 2020 (Thm 21) conversion to (ε, δ)."""

    name = "rdp"
    description = "Rényi DP, integer and fractional orders, Balle et al. 2020 conversion (upper bound)"

    def __init__(self, orders: np.ndarray | list[float] | None = None) -> None:
        self._orders = None if orders is None else np.asarray(orders, dtype=float)

    def unsupported_reason(self, composition: Composition) -> str | None:
        for mechanism, _ in composition:
            reason = rdp_unsupported_reason(mechanism, composition.neighbouring)
            if reason:
                return reason
        return None

    def _orders_for(self, composition: Composition, delta: float | None = None, epsilon: float | None = None) -> np.ndarray:
        """Orders to evaluate: explicit ones, or the full default set, or coarse-then-refined."""
        if self._orders is not None:
            return self._orders
        if len(composition) <= _ADAPTIVE_THRESHOLD:
            return rdp_math.DEFAULT_ORDERS
        coarse = composition_rdp(composition, COARSE_ORDERS)
        if delta is not None:
            _, best = rdp_math.epsilon_from_rdp(COARSE_ORDERS, coarse, delta)
        else:
            _, best = rdp_math.delta_from_rdp(COARSE_ORDERS, coarse, epsilon)
        i = int(np.searchsorted(COARSE_ORDERS, best))
        lo = COARSE_ORDERS[max(i - 1, 0)]
        hi = COARSE_ORDERS[min(i + 1, COARSE_ORDERS.size - 1)]
        fine = rdp_math.DEFAULT_ORDERS[(lo <= rdp_math.DEFAULT_ORDERS) & (hi >= rdp_math.DEFAULT_ORDERS)]
        return np.union1d(fine, COARSE_ORDERS)

    def prefetch(self, mechanisms: Iterable[Mechanism], neighbouring: Neighbouring) -> None:
        """Compute (in one vectorised batch) and cache the RDP curves of many distinct mechanisms."""
        supported = [m for m in mechanisms if rdp_unsupported_reason(m, neighbouring) is None]
        if supported:
            orders = self._orders if self._orders is not None else rdp_math.DEFAULT_ORDERS
            composition_rdp(Composition([(m, 1) for m in supported], neighbouring), orders)

    def rdp_curve(self, composition: Composition, orders: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(orders, Σ RDP) for the composition; validates support first."""
        self.check(composition)
        orders = rdp_math.DEFAULT_ORDERS if orders is None and self._orders is None else (orders if orders is not None else self._orders)
        return orders, composition_rdp(composition, orders)

    def _epsilon(self, composition: Composition, delta: float) -> EpsilonResult:
        orders = self._orders_for(composition, delta=delta)
        curve = composition_rdp(composition, orders)
        eps, order = rdp_math.epsilon_from_rdp(orders, curve, delta)
        notes = []
        if math.isinf(eps):
            notes.append("ε is infinite: some release has no noise or no finite privacy guarantee")
        elif order >= orders.max():
            notes.append(f"the optimal RDP order is the largest evaluated ({order:g}); ε may be loose")
        elif order <= orders.min():
            notes.append(f"the optimal RDP order is the smallest evaluated ({order:g}); ε may be loose")
        return EpsilonResult(self.name, eps, delta, notes=tuple(notes), details={"order": order})

    def _delta(self, composition: Composition, epsilon: float) -> DeltaResult:
        orders = self._orders_for(composition, epsilon=epsilon)
        curve = composition_rdp(composition, orders)
        delta, _order = rdp_math.delta_from_rdp(orders, curve, epsilon)
        return DeltaResult(self.name, delta, epsilon)
