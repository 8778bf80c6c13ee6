"""How a threshold (or a number of guesses) is chosen, as small immutable values matched with ``match``.

A lower bound is valid only if the test it rests on was not tuned on the same scores (Jagielski, Ullman &
Oprea 2020 pick the threshold on separate runs). The ways to stay valid are values here, never flags inside an estimator:

Threshold estimators (``cp``, ``gdp``) — "member" means score ≥ threshold:

* :class:`Explicit` — one threshold fixed in advance (or chosen on separate runs); the full α is spent on it.
* :class:`Bonferroni` — a *family* of tests fixed before the scores are seen; test k gets significance
  α·w_k (Σ w_k = 1, equal weights unless given) and the estimator reports the best bound. Families:

  - :class:`OrderStatistics` — every cut between observed scores. Only cuts with an in-score just above
    and an out-score just below can be best (the bounds fall when FP or FN grows), and each such cut is
    "member iff s ≥ the j-th smallest in-score" *and* "member iff s > the k-th largest out-score". Both
    are rank rules fixed in advance: for continuous scores the true rate at a rank threshold is a Beta
    order statistic whose law is exactly (or, on the other side, stochastically below) the one the
    Clopper–Pearson bound inverts, and the other rate is binomial given the threshold. So the family
    has min(n_in, n_out) members, fixed by the sample sizes. Ties are evaluated at distinct values
    (conservative on every test in ``tests/audit``, including heavily tied integer scores).
  - :class:`ThresholdGrid` — numeric thresholds fixed in advance (plain fixed tests).
  - :class:`QuantileGrid` — "member iff s > the k-th largest out-score" with k−1 = ⌊level·n_out⌋, for
    false-positive levels fixed in advance (rank rules as above). Weights let most of α go where a
    test is most informative; the GDP route's default spends half of it at the median out-score.

* :class:`Split` — pick the threshold on a random ``fraction`` of each side, bound on the rest at α.
* :class:`MultiSplit` — ``n_splits`` independent splits, each bounded at α/2; report the
  ⌈B/2⌉-th largest split bound (the median for odd B). Valid because at least half of B level-α/2
  tests can reject a true hypothesis with probability ≤ α (Markov; Meinshausen, Meier & Bühlmann 2009,
  "p-values for high-dimensional regression", quantile aggregation with γ = ½).

One-run estimators (``one-run``, ``one-run-fdp``) choose *numbers of guesses* instead:

* :class:`Guesses` — guess "in" for the top k₊ scores and "out" for the bottom k₋, fixed in advance.
* :class:`Bonferroni` with a :class:`GuessGrid` — a family of guess counts (fractions of the m canaries)
  fixed in advance, each tested at α/|family|.
* :class:`Split` / :class:`MultiSplit` — choose the guess fraction from :data:`DEFAULT_GUESS_GRID` on a
  random subset of the canaries (drawn without looking at membership), audit the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from privaudit.errors import InvalidParameterError


def _weights(values: tuple[float, ...] | None, size: int, owner: str) -> tuple[float, ...]:
    if values is None:
        return tuple(1.0 / size for _ in range(size))
    weights = tuple(float(w) for w in values)
    if len(weights) != size:
        raise InvalidParameterError(f"{owner} has {size} members but {len(weights)} weights")
    if not all(math.isfinite(w) and w > 0 for w in weights):
        raise InvalidParameterError(f"{owner} weights must be positive and finite, got {values}")
    total = math.fsum(weights)
    return tuple(w / total for w in weights)


@dataclass(frozen=True)
class OrderStatistics:
    """Family: every cut between observed scores (min(n_in, n_out) rank tests per direction)."""


@dataclass(frozen=True)
class ThresholdGrid:
    """Family: numeric thresholds fixed in advance, with optional weights (normalised to sum 1)."""

    values: tuple[float, ...]
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        values = tuple(float(v) for v in self.values)
        if not values:
            raise InvalidParameterError("ThresholdGrid needs at least one threshold")
        if not all(math.isfinite(v) for v in values):
            raise InvalidParameterError(f"ThresholdGrid thresholds must be finite, got {self.values}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "weights", _weights(self.weights, len(values), "ThresholdGrid"))


@dataclass(frozen=True)
class QuantileGrid:
    """Family: thresholds at out-score order statistics for false-positive levels in [0, 1)."""

    levels: tuple[float, ...]
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        levels = tuple(float(v) for v in self.levels)
        if not levels:
            raise InvalidParameterError("QuantileGrid needs at least one level")
        if not all(0.0 <= v < 1.0 for v in levels):
            raise InvalidParameterError(f"QuantileGrid levels must lie in [0, 1), got {self.levels}")
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "weights", _weights(self.weights, len(levels), "QuantileGrid"))


@dataclass(frozen=True)
class GuessGrid:
    """Family for one-run audits: guess a ``fraction`` of the m canaries, ``plus_share`` of them as "in"."""

    fractions: tuple[float, ...]
    plus_share: float = 0.5

    def __post_init__(self) -> None:
        fractions = tuple(float(f) for f in self.fractions)
        if not fractions:
            raise InvalidParameterError("GuessGrid needs at least one fraction")
        if not all(0.0 < f <= 1.0 for f in fractions):
            raise InvalidParameterError(f"GuessGrid fractions must lie in (0, 1], got {self.fractions}")
        if not 0.0 <= float(self.plus_share) <= 1.0:
            raise InvalidParameterError(f"GuessGrid plus_share must lie in [0, 1], got {self.plus_share}")
        object.__setattr__(self, "fractions", fractions)
        object.__setattr__(self, "plus_share", float(self.plus_share))

    def guess_counts(self, m: int) -> tuple[tuple[int, int], ...]:
        """Distinct (k₊, k₋) pairs for m canaries (depends on m only, so it is fixed in advance)."""
        pairs: list[tuple[int, int]] = []
        for fraction in self.fractions:
            r = min(m, max(1, round(fraction * m)))
            k_plus = round(r * self.plus_share)
            pair = (k_plus, r - k_plus)
            if pair not in pairs:
                pairs.append(pair)
        return tuple(pairs)


Family = OrderStatistics | ThresholdGrid | QuantileGrid | GuessGrid


@dataclass(frozen=True)
class Explicit:
    """One threshold fixed in advance: "member" iff score ≥ ``threshold``."""

    threshold: float

    def __post_init__(self) -> None:
        if not math.isfinite(float(self.threshold)):
            raise InvalidParameterError(f"Explicit threshold must be finite, got {self.threshold}")
        object.__setattr__(self, "threshold", float(self.threshold))


@dataclass(frozen=True)
class Guesses:
    """One-run guesses fixed in advance: top ``k_plus`` scores guessed "in", bottom ``k_minus`` "out"."""

    k_plus: int
    k_minus: int = 0

    def __post_init__(self) -> None:
        for name in ("k_plus", "k_minus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidParameterError(f"Guesses.{name} must be a non-negative integer, got {value!r}")
        if self.k_plus + self.k_minus == 0:
            raise InvalidParameterError("Guesses needs at least one guess (k_plus + k_minus ≥ 1)")


@dataclass(frozen=True)
class Bonferroni:
    """Union bound over a family of tests fixed in advance (see the module docstring for what is valid)."""

    family: Family = field(default_factory=OrderStatistics)

    def __post_init__(self) -> None:
        if not isinstance(self.family, OrderStatistics | ThresholdGrid | QuantileGrid | GuessGrid):
            raise InvalidParameterError(
                f"Bonferroni family must be OrderStatistics, ThresholdGrid, QuantileGrid or GuessGrid, got {self.family!r}"
            )


def _check_fraction(owner: str, fraction: float) -> float:
    value = float(fraction)
    if not 0.0 < value < 1.0:
        raise InvalidParameterError(f"{owner} fraction must lie in (0, 1), got {fraction}")
    return value


def _check_seed(owner: str, seed: int) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidParameterError(f"{owner} seed must be a non-negative integer, got {seed!r}")


@dataclass(frozen=True)
class Split:
    """Choose the test on a random ``fraction`` of the scores, bound on the rest at the full α."""

    fraction: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "fraction", _check_fraction("Split", self.fraction))
        _check_seed("Split", self.seed)


@dataclass(frozen=True)
class MultiSplit:
    """Median-type aggregate of ``n_splits`` split bounds, each at α/2 (Meinshausen et al. 2009).

    The default of 11 splits keeps one call under a second on 10⁵ scores per side; the median of 11 is
    already stable. Use more for small samples, where each split costs little.
    """

    n_splits: int = 11
    seed: int = 0
    fraction: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.n_splits, bool) or not isinstance(self.n_splits, int) or self.n_splits < 1:
            raise InvalidParameterError(f"MultiSplit n_splits must be a positive integer, got {self.n_splits!r}")
        object.__setattr__(self, "fraction", _check_fraction("MultiSplit", self.fraction))
        _check_seed("MultiSplit", self.seed)


ThresholdStrategy = Explicit | Bonferroni | Split | MultiSplit
GuessStrategy = Guesses | Bonferroni | Split | MultiSplit
Strategy = Explicit | Guesses | Bonferroni | Split | MultiSplit

#: Default family of the GDP route: half of α at the median out-score (the most informative single test
#: for near-Gaussian scores), the other half spread over four tail levels for attacks whose signal is
#: only in the tail.
DEFAULT_GDP_FAMILY = QuantileGrid(levels=(0.5, 0.2, 0.05, 0.01, 0.001), weights=(0.5, 0.125, 0.125, 0.125, 0.125))

#: Default guess family of the one-run audits (fractions of the m canaries guessed, half "in", half "out").
DEFAULT_GUESS_GRID = GuessGrid(fractions=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0))


def strategy_to_dict(strategy: Strategy) -> dict[str, Any]:
    """JSON-able description of a strategy (kind plus its fields)."""
    match strategy:
        case Explicit(threshold=threshold):
            return {"kind": "explicit", "threshold": threshold}
        case Guesses(k_plus=k_plus, k_minus=k_minus):
            return {"kind": "guesses", "k_plus": k_plus, "k_minus": k_minus}
        case Bonferroni(family=family):
            return {"kind": "bonferroni", "family": family_to_dict(family)}
        case Split(fraction=fraction, seed=seed):
            return {"kind": "split", "fraction": fraction, "seed": seed}
        case MultiSplit(n_splits=n_splits, seed=seed, fraction=fraction):
            return {"kind": "multi_split", "n_splits": n_splits, "seed": seed, "fraction": fraction}
    raise InvalidParameterError(f"unknown strategy {strategy!r}")


def family_to_dict(family: Family) -> dict[str, Any]:
    match family:
        case OrderStatistics():
            return {"kind": "order_statistics"}
        case ThresholdGrid(values=values, weights=weights):
            return {"kind": "threshold_grid", "values": list(values), "weights": list(weights or ())}
        case QuantileGrid(levels=levels, weights=weights):
            return {"kind": "quantile_grid", "levels": list(levels), "weights": list(weights or ())}
        case GuessGrid(fractions=fractions, plus_share=plus_share):
            return {"kind": "guess_grid", "fractions": list(fractions), "plus_share": plus_share}
    raise InvalidParameterError(f"unknown family {family!r}")
