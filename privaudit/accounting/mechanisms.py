"""What was released, as small immutable values that every accountant consumes.

A mechanism describes *one* release; :class:`Composition` is a sequence of ``(mechanism, count)``
pairs plus the neighbouring relation the guarantee is stated for. Parameters carry their meaning in
their names, so a Laplace *scale* can never be passed where a per-step ε is expected (the
``LaplaceMechanism(mu=...)`` footgun of prv-accountant, whose ``mu`` is Δ/b, not the scale b).

Sensitivities are stated under **add/remove-one** neighbours. Under **replace-one** neighbours a record
can be removed and another added, so the L2 (Gaussian) or L1 (Laplace) sensitivity doubles
(cf. google/differential-privacy #378); :meth:`Composition.effective` applies this once, in one place.

Units: for Gaussian releases ``noise_multiplier`` is the noise standard deviation in the units in which
the sensitivity is measured (for DP-SGD: std / clipping norm, with ``sensitivity=1``); the accountants use
the *effective* multiplier z = noise_multiplier / sensitivity.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError


class Neighbouring(str, Enum):
    """Neighbouring relation of the DP guarantee: the one vocabulary of the package (ledgers, compositions, the
    one-run audit's pairs, the CLI). Written as its value (``add_remove``); read in either spelling (``add-remove``)."""

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"

    @classmethod
    def parse(cls, value: str | Neighbouring) -> Neighbouring:
        return parse_enum(cls, value, "neighbouring relation")


class Sampling(str, Enum):
    """How records (or clients) are sampled into each step: the one vocabulary of the package. Written as its value
    (``fixed_size_without_replacement``); read in either spelling, and ``fixed-size`` / ``without-replacement`` too."""

    POISSON = "poisson"
    FIXED_SIZE_WITHOUT_REPLACEMENT = "fixed_size_without_replacement"

    @classmethod
    def parse(cls, value: str | Sampling) -> Sampling:
        return parse_enum(cls, value, "sampling", _SAMPLING_ALIASES)


_SAMPLING_ALIASES = {"fixed-size": Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT,
                     "without-replacement": Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT}


def _positive(name: str, value: float) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}") from None
    if not value > 0 or math.isnan(value):
        raise InvalidParameterError(f"{name} must be positive, got {value}")
    return value


@dataclass(frozen=True)
class Gaussian:
    """One Gaussian release: noise std ``noise_multiplier`` on a query of L2 sensitivity ``sensitivity``.

    ``noise_multiplier = inf`` is allowed and means "no information released" (ε = 0).
    """

    noise_multiplier: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sensitivity", _positive("sensitivity", self.sensitivity))

    @property
    def z(self) -> float:
        """Effective noise multiplier σ/Δ under add/remove neighbours."""
        return self.noise_multiplier / self.sensitivity

    def describe(self) -> str:
        return f"Gaussian(σ={self.noise_multiplier:g}, Δ={self.sensitivity:g})"


@dataclass(frozen=True)
class SubsampledGaussian:
    """DP-SGD step: sample records at rate ``sample_rate``, add Gaussian noise of multiplier ``noise_multiplier``.

    ``sampling`` is ``poisson`` (each record independently with probability q) or
    ``fixed_size_without_replacement`` (a batch of b = q·n records drawn uniformly without replacement; b is
    fixed, so under add/remove neighbours an added record displaces another). Both are accounted under either
    relation; q = 1 is the whole dataset at every step (a plain Gaussian release). The dominating pairs are
    derived in :mod:`privaudit.accounting.pairs`: a fixed-size step moves the sum by up to 2C (a record in the
    batch replaced by any other), so it is far less private than a Poisson step at the same q.
    """

    noise_multiplier: float
    sample_rate: float
    sampling: Sampling = Sampling.POISSON

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", _positive("noise_multiplier", self.noise_multiplier))
        q = _positive("sample_rate", self.sample_rate)
        if q > 1.0:
            raise InvalidParameterError(f"sample_rate must lie in (0, 1], got {q}")
        object.__setattr__(self, "sample_rate", q)
        object.__setattr__(self, "sampling", Sampling.parse(self.sampling))

    @property
    def z(self) -> float:
        return self.noise_multiplier

    def describe(self) -> str:
        kind = "Poisson" if self.sampling is Sampling.POISSON else "fixed-size w/o replacement"
        return f"SubsampledGaussian(σ={self.noise_multiplier:g}, q={self.sample_rate:g}, {kind})"


@dataclass(frozen=True)
class Laplace:
    """One Laplace release with noise *scale* b on a query of L1 sensitivity Δ: (Δ/b)-DP per release."""

    scale: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", _positive("scale", self.scale))
        object.__setattr__(self, "sensitivity", _positive("sensitivity", self.sensitivity))

    @property
    def epsilon_per_release(self) -> float:
        return self.sensitivity / self.scale

    def describe(self) -> str:
        return f"Laplace(b={self.scale:g}, Δ={self.sensitivity:g})"


@dataclass(frozen=True)
class PureDP:
    """A release proven ε-DP in closed form (e.g. Thm 6.3 of Upcycled-FL) for the relation ``proven_for``.

    A guarantee proven for add/remove implies 2ε under replace-one (group privacy of size 2); one proven
    only for replace-one says nothing about add/remove and is refused there.
    """

    epsilon: float
    proven_for: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        eps = float(self.epsilon)
        if not eps >= 0 or math.isnan(eps):
            raise InvalidParameterError(f"epsilon must be non-negative, got {self.epsilon}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "proven_for", Neighbouring.parse(self.proven_for))

    def describe(self) -> str:
        return f"PureDP(ε={self.epsilon:g}, proven for {self.proven_for.value})"


@dataclass(frozen=True)
class Skellam:
    """One release of an integer sum with symmetric Skellam noise (Agarwal, Kairouz & Liu 2021, NeurIPS).

    The noise on every coordinate is Sk(μ) = Poisson(μ/2) − Poisson(μ/2), of *variance* ``variance`` = μ, in
    the integer units of the released sum (after scaling and rounding, as in distributed DP with secure
    aggregation, where the clients' Skellam shares add up to Sk(μ)). ``l2_sensitivity`` Δ₂ and
    ``l1_sensitivity`` Δ₁ bound one participant's integer contribution under add/remove neighbours; Δ₁
    defaults to Δ₂² (for an integer vector |v_j| ≤ v_j², so ‖v‖₁ ≤ ‖v‖₂²).
    """

    variance: float
    l2_sensitivity: float
    l1_sensitivity: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "variance", _positive("variance", self.variance))
        l2 = _positive("l2_sensitivity", self.l2_sensitivity)
        object.__setattr__(self, "l2_sensitivity", l2)
        l1 = l2 * l2 if self.l1_sensitivity is None else _positive("l1_sensitivity", self.l1_sensitivity)
        object.__setattr__(self, "l1_sensitivity", l1)

    def describe(self) -> str:
        return f"Skellam(μ={self.variance:g}, Δ₂={self.l2_sensitivity:g}, Δ₁={self.l1_sensitivity:g})"


Mechanism = Gaussian | SubsampledGaussian | Laplace | PureDP | Skellam
MECHANISM_TYPES = (Gaussian, SubsampledGaussian, Laplace, PureDP, Skellam)


@dataclass(frozen=True)
class Composition:
    """Sequential composition of ``(mechanism, count)`` pairs under one neighbouring relation.

    Equal consecutive mechanisms are merged; the order of entries never changes the guarantee.
    """

    entries: tuple[tuple[Mechanism, int], ...]
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __init__(
        self,
        entries: Iterable[tuple[Mechanism, int]] | Mechanism = (),
        neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
    ) -> None:
        if isinstance(entries, MECHANISM_TYPES):
            entries = [(entries, 1)]
        merged: dict[Mechanism, int] = {}
        for item in entries:
            try:
                mechanism, count = item
            except (TypeError, ValueError):
                raise InvalidParameterError(f"composition entries must be (mechanism, count) pairs, got {item!r}") from None
            if not isinstance(mechanism, MECHANISM_TYPES):
                raise InvalidParameterError(f"unknown mechanism {mechanism!r}")
            if isinstance(count, bool) or not float(count).is_integer() or int(count) < 0:
                raise InvalidParameterError(f"count must be a non-negative integer, got {count!r}")
            if int(count) == 0:
                continue
            merged[mechanism] = merged.get(mechanism, 0) + int(count)
        object.__setattr__(self, "entries", tuple(merged.items()))
        object.__setattr__(self, "neighbouring", Neighbouring.parse(neighbouring))

    @classmethod
    def of(cls, mechanism: Mechanism, count: int = 1, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE) -> Composition:
        return cls([(mechanism, count)], neighbouring)

    def __iter__(self) -> Iterator[tuple[Mechanism, int]]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __add__(self, other: Composition) -> Composition:
        if other.neighbouring is not self.neighbouring:
            raise InvalidParameterError("cannot compose guarantees stated for different neighbouring relations")
        return Composition(list(self.entries) + list(other.entries), self.neighbouring)

    @property
    def total_count(self) -> int:
        return sum(count for _, count in self.entries)

    @property
    def is_empty(self) -> bool:
        return not self.entries

    def kinds(self) -> set[type]:
        return {type(m) for m, _ in self.entries}

    def describe(self) -> str:
        body = " + ".join(f"{count}×{m.describe()}" for m, count in self.entries) or "nothing"
        return f"{body} [{self.neighbouring.value}]"

    def to_dict(self) -> dict:
        return {"neighbouring": self.neighbouring.value, "entries": [[mechanism_to_dict(m), c] for m, c in self.entries]}

    @classmethod
    def from_dict(cls, data: dict) -> Composition:
        try:
            entries = [(mechanism_from_dict(m), int(c)) for m, c in data["entries"]]
            return cls(entries, data.get("neighbouring", Neighbouring.ADD_REMOVE))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidParameterError):
                raise
            raise InvalidParameterError(f"malformed composition: {exc}") from None


def mechanism_to_dict(mechanism: Mechanism) -> dict:
    """JSON form ``{"type": ..., <fields>}`` of a mechanism (enums as their string values, ∞ as ``"inf"``)."""
    out: dict = {"type": type(mechanism).__name__}
    for name in mechanism.__dataclass_fields__:
        value = getattr(mechanism, name)
        if isinstance(value, float) and math.isinf(value):
            value = "inf"  # JSON has no infinity; float("inf") reads it back
        out[name] = value.value if isinstance(value, Enum) else value
    return out


_BY_NAME = {cls.__name__: cls for cls in MECHANISM_TYPES}
_ALIASES = {
    "gaussian": "Gaussian",
    "subsampled_gaussian": "SubsampledGaussian",
    "subsampled-gaussian": "SubsampledGaussian",
    "laplace": "Laplace",
    "pure_dp": "PureDP",
    "pure-dp": "PureDP",
    "puredp": "PureDP",
    "skellam": "Skellam",
}


def mechanism_from_dict(data: dict) -> Mechanism:
    """Inverse of :func:`mechanism_to_dict`; unknown types or fields raise :class:`InvalidParameterError`."""
    if not isinstance(data, dict) or "type" not in data:
        raise InvalidParameterError(f"a mechanism must be an object with a 'type' field, got {data!r}")
    name = _ALIASES.get(str(data["type"]).lower(), str(data["type"]))
    cls = _BY_NAME.get(name)
    if cls is None:
        raise InvalidParameterError(f"unknown mechanism type {data['type']!r}; known: {', '.join(sorted(_BY_NAME))}")
    fields = {k: v for k, v in data.items() if k != "type"}
    unknown = set(fields) - set(cls.__dataclass_fields__)
    if unknown:
        raise InvalidParameterError(f"unknown field(s) for {name}: {', '.join(sorted(unknown))}")
    try:
        return cls(**fields)
    except TypeError as exc:
        raise InvalidParameterError(f"bad {name} parameters: {exc}") from None


def effective_gaussian_multiplier(mechanism: Gaussian | SubsampledGaussian, neighbouring: Neighbouring) -> float:
    """z used by the accountants: σ/Δ under add/remove, σ/(2Δ) for a plain Gaussian under replace-one."""
    z = mechanism.z
    if isinstance(mechanism, Gaussian) and neighbouring is Neighbouring.REPLACE_ONE:
        z /= 2.0
    return z


def effective_laplace_epsilon(mechanism: Laplace, neighbouring: Neighbouring) -> float:
    eps = mechanism.epsilon_per_release
    return 2.0 * eps if neighbouring is Neighbouring.REPLACE_ONE else eps


def effective_skellam_sensitivities(mechanism: Skellam, neighbouring: Neighbouring) -> tuple[float, float]:
    """(Δ₂, Δ₁) under ``neighbouring``: as stated for add/remove, doubled for replace-one (remove one, add another)."""
    factor = 2.0 if neighbouring is Neighbouring.REPLACE_ONE else 1.0
    return factor * mechanism.l2_sensitivity, factor * float(mechanism.l1_sensitivity)


def effective_pure_epsilon(mechanism: PureDP, neighbouring: Neighbouring) -> float | None:
    """ε per release under ``neighbouring``; ``None`` when the proof does not cover that relation."""
    if mechanism.proven_for is neighbouring:
        return mechanism.epsilon
    if mechanism.proven_for is Neighbouring.ADD_REMOVE and neighbouring is Neighbouring.REPLACE_ONE:
        return 2.0 * mechanism.epsilon
    return None
