"""Per-client privacy budgets ε_m: PFA's privacy-preference distributions (004 Table 1) and budget files.

Names (``draw_budgets(name, num_clients, seed)``), **as the paper defines them** (Table 1):

=============  =====================================================================================
``uniform``    U(1.0, 10.0)
``gauss``      N(3.0, 1.0)
``pareto``     Pareto distribution — the paper gives no parameters; we use shape α = 1 and scale 0.5
               (minimum ε = 0.5), the parameters of the reference file ``pareto1``
``mixgauss1``  0.9·N(0.1, 0.01) + 0.1·N(10.0, 0.1)
``mixgauss2``  0.9·N(0.5, 0.01) + 0.1·N(10.0, 0.1)
``mixgauss3``  0.9·N(1.0, 0.1)  + 0.1·N(10.0, 0.1)
``mixgauss4``  0.5·N(0.1, 0.01) + 0.4·N(1.0, 0.1) + 0.1·N(10.0, 1.0)
=============  =====================================================================================

The paper writes Gaussians as N(mean, variance) — its DP-SGD noise is N(0, σ²C²I) (Alg. 7) — so the
second parameter is read as a **variance** by default (MixGauss1's private component has standard
deviation 0.1). ``second_parameter="std"`` reads it as a standard deviation, as the reference code does
(audit point F5).

**Reference labels differ** (audit point F5): the reference repository's ``epsfiles/mixgauss1`` is the paper's
MixGauss2 (private ε ≈ 0.5), its ``mixgauss3`` is the paper's MixGauss1, and its README runs
``--eps mixgauss1`` everywhere. The reference files' own definitions are offered under ``reference-*``
names (second parameter = standard deviation, as that code draws them; Emory-AIMS/PFA@72b3f89:epsfiles):
``reference-mixgauss1..6``, ``reference-mixgauss3_2..5`` (mixgauss3 with public weight 0.2..0.5),
``reference-gauss1/2``, ``reference-uniform1``, ``reference-pareto1``, ``reference-min1/2``,
``reference-max1/2``. Like that code, a reference *mixture* is redrawn as a whole until at least one ε
exceeds its threshold (the files' thresholds 1.0 / 2.0 / 1.0 for mixgauss1 / 2 / 4 are twice the private
mean; the other mixtures use the same rule).

A Gaussian component can draw ε ≤ 0, which is no budget at all (the reference code would turn it into a
negative noise multiplier, audit point F5). ``nonpositive="redraw"`` (default) redraws those clients from the same
distribution (so budgets follow the distribution conditioned on ε > 0); ``"reject"`` refuses the draw with a
message naming the clients. ``constant:<ε>`` gives every client the same budget, and a file (``file:<path>``,
or any existing path) gives one ε per client (:func:`read_budget_file`).

Everything here is numpy only (no torch), seeded through :class:`~privaudit.fl.engine.seeding.SeedTree`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.seeding import SeedTree

#: Redraws of one client's non-positive budget (or of a whole reference mixture) before giving up.
MAX_REDRAWS = 10_000


class NonPositiveBudgets(str, Enum):
    """What to do when a distribution draws ε ≤ 0."""

    REDRAW = "redraw"
    REJECT = "reject"

    @classmethod
    def parse(cls, value: str | NonPositiveBudgets) -> NonPositiveBudgets:
        if isinstance(value, NonPositiveBudgets):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown handling of non-positive budgets {value!r}; use 'redraw' or 'reject'")


@dataclass(frozen=True)
class GaussianComponent:
    """One Gaussian of a mixture: weight, mean, and the printed second parameter (variance or std)."""

    weight: float
    mean: float
    second: float


@dataclass(frozen=True)
class BudgetDistribution:
    """A named privacy-preference distribution.

    ``kind`` is ``mixture`` (Gaussian components), ``uniform`` (low, high), ``pareto`` (shape, scale) or
    ``constant`` (value). ``second_is`` says how a mixture's second parameter is read by default
    (``variance`` for the paper, ``std`` for the reference files); ``public_threshold`` makes a reference
    mixture redraw until some ε exceeds it.
    """

    name: str
    kind: str
    source: str
    components: tuple[GaussianComponent, ...] = ()
    params: tuple[float, ...] = ()
    second_is: str = "variance"
    public_threshold: float | None = None

    def describe(self) -> str:
        if self.kind == "mixture":
            label = "σ²" if self.second_is == "variance" else "sd"
            parts = [f"{c.weight:g}·N({c.mean:g}, {label} {c.second:g})" for c in self.components]
            text = " + ".join(parts)
        elif self.kind == "uniform":
            text = f"U({self.params[0]:g}, {self.params[1]:g})"
        elif self.kind == "pareto":
            text = f"Pareto(shape {self.params[0]:g}, scale {self.params[1]:g})"
        else:
            text = f"constant {self.params[0]:g}"
        return f"{text}  [{self.source}]"


def _mixture(name: str, source: str, *components: tuple[float, float, float], second_is: str = "variance",
             threshold: float | None = None) -> BudgetDistribution:
    return BudgetDistribution(name, "mixture", source, tuple(GaussianComponent(*c) for c in components),
                              second_is=second_is, public_threshold=threshold)


_PAPER = "PFA (004) Table 1"
_REFERENCE = "PFA reference code epsfiles (Emory-AIMS/PFA@72b3f89)"


def _reference_mixture(name: str, private: tuple[float, float], public: tuple[float, float], public_weight: float = 0.1):
    """A two-component Gaussian mixture as the reference code's ``epsfiles`` draw it (Emory-AIMS/PFA@72b3f89; std as
    the second parameter, a 10 % public component, public above twice the private mean)."""
    return _mixture(
        name, _REFERENCE, (1.0 - public_weight, *private), (public_weight, *public), second_is="std", threshold=2.0 * private[0]
    )


DISTRIBUTIONS: dict[str, BudgetDistribution] = {
    d.name: d
    for d in (
        BudgetDistribution("uniform", "uniform", _PAPER, params=(1.0, 10.0)),
        _mixture("gauss", _PAPER, (1.0, 3.0, 1.0)),
        BudgetDistribution("pareto", "pareto", _PAPER + " (no parameters printed; shape 1, scale 0.5 as reference pareto1)",
                           params=(1.0, 0.5)),
        _mixture("mixgauss1", _PAPER, (0.9, 0.1, 0.01), (0.1, 10.0, 0.1)),
        _mixture("mixgauss2", _PAPER, (0.9, 0.5, 0.01), (0.1, 10.0, 0.1)),
        _mixture("mixgauss3", _PAPER, (0.9, 1.0, 0.1), (0.1, 10.0, 0.1)),
        _mixture("mixgauss4", _PAPER, (0.5, 0.1, 0.01), (0.4, 1.0, 0.1), (0.1, 10.0, 1.0)),
        _reference_mixture("reference-mixgauss1", (0.5, 0.01), (10.0, 0.1)),
        _reference_mixture("reference-mixgauss2", (1.0, 0.1), (10.0, 1.0)),
        _reference_mixture("reference-mixgauss3", (0.1, 0.01), (10.0, 0.1)),
        _reference_mixture("reference-mixgauss4", (0.5, 0.01), (5.0, 0.1)),
        _reference_mixture("reference-mixgauss5", (1.0, 0.1), (5.0, 0.1)),
        _reference_mixture("reference-mixgauss6", (1.0, 0.1), (100.0, 1.0)),
        *(_reference_mixture(f"reference-mixgauss3_{k}", (0.1, 0.01), (10.0, 0.1), public_weight=k / 10) for k in (2, 3, 4, 5)),
        _mixture("reference-gauss1", _REFERENCE, (1.0, 3.0, 1.0), second_is="std"),
        _mixture("reference-gauss2", _REFERENCE, (1.0, 2.0, 0.5), second_is="std"),
        BudgetDistribution("reference-uniform1", "uniform", _REFERENCE, params=(1.0, 10.0)),
        BudgetDistribution("reference-pareto1", "pareto", _REFERENCE + ": (Lomax(1) + 1)·0.5", params=(1.0, 0.5)),
        BudgetDistribution("reference-min1", "constant", _REFERENCE, params=(0.5,)),
        BudgetDistribution("reference-min2", "constant", _REFERENCE, params=(1.0,)),
        BudgetDistribution("reference-max1", "constant", _REFERENCE, params=(10.0,)),
        BudgetDistribution("reference-max2", "constant", _REFERENCE, params=(5.0,)),
    )
}

#: The paper's Table 1 names (the CLI lists these first).
PAPER_DISTRIBUTIONS = ("uniform", "gauss", "pareto", "mixgauss1", "mixgauss2", "mixgauss3", "mixgauss4")


@dataclass(frozen=True)
class PrivacyBudgets:
    """One (ε_m, δ) per client and where the ε_m came from (JSON-ready through :meth:`to_dict`)."""

    epsilons: tuple[float, ...]
    delta: float
    source: str
    redrawn: tuple[int, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        eps = tuple(float(e) for e in self.epsilons)
        if not eps:
            raise InvalidParameterError("privacy budgets need at least one client")
        bad = [i for i, e in enumerate(eps) if not (e > 0 and math.isfinite(e))]
        if bad:
            raise InvalidParameterError(f"privacy budgets must be positive and finite; client {bad[0]} has ε = {eps[bad[0]]}")
        if not 0 < float(self.delta) < 1:
            raise InvalidParameterError(f"δ must lie in (0, 1), got {self.delta}")
        object.__setattr__(self, "epsilons", eps)
        object.__setattr__(self, "delta", float(self.delta))

    @property
    def num_clients(self) -> int:
        return len(self.epsilons)

    def as_array(self) -> np.ndarray:
        return np.asarray(self.epsilons, dtype=float)

    def uniform(self, epsilon: float, label: str) -> PrivacyBudgets:
        """The same clients, all at ``epsilon`` (PFA's Minimum / Maximum baselines)."""
        return PrivacyBudgets((float(epsilon),) * self.num_clients, self.delta, f"{label} of {self.source}",
                              details={"operating": label, "preferences": list(self.epsilons)})

    def to_dict(self) -> dict[str, Any]:
        return {"epsilons": list(self.epsilons), "delta": self.delta, "source": self.source,
                "redrawn": list(self.redrawn), **self.details}


def distribution_names() -> list[str]:
    return list(DISTRIBUTIONS)


def get_distribution(name: str) -> BudgetDistribution:
    key = str(name).strip().lower()
    if key not in DISTRIBUTIONS:
        known = ", ".join(PAPER_DISTRIBUTIONS)
        raise InvalidParameterError(
            f"unknown budget distribution {name!r}; use one of {known}, a reference-* name (see --list), "
            "constant:<ε> or file:<path>"
        )
    return DISTRIBUTIONS[key]


def _std(distribution: BudgetDistribution, component: GaussianComponent, second_parameter: str | None) -> float:
    reading = second_parameter or distribution.second_is
    if reading not in ("variance", "std"):
        raise InvalidParameterError(f"second_parameter must be 'variance' or 'std', got {second_parameter!r}")
    return math.sqrt(component.second) if reading == "variance" else component.second


def _sample(distribution: BudgetDistribution, count: int, rng: np.random.Generator, second_parameter: str | None) -> np.ndarray:
    """``count`` budgets from ``distribution``: constant, uniform, classical Pareto, or the Gaussian mixture of 004 Table 1
    (component drawn by weight, then N(mean, std²))."""
    if distribution.kind == "constant":
        return np.full(count, distribution.params[0])
    if distribution.kind == "uniform":
        low, high = distribution.params
        return rng.uniform(low, high, size=count)
    if distribution.kind == "pareto":
        shape, scale = distribution.params
        return scale * (rng.pareto(shape, size=count) + 1.0)  # classical Pareto: Lomax + 1, times the scale
    weights = np.array([c.weight for c in distribution.components])
    which = rng.choice(len(weights), size=count, p=weights / weights.sum())
    means = np.array([c.mean for c in distribution.components])
    stds = np.array([_std(distribution, c, second_parameter) for c in distribution.components])
    return means[which] + stds[which] * rng.standard_normal(count)


def draw_budgets(
    name: str,
    num_clients: int,
    seed: int,
    *,
    delta: float = 1e-5,
    nonpositive: str | NonPositiveBudgets = NonPositiveBudgets.REDRAW,
    second_parameter: str | None = None,
) -> PrivacyBudgets:
    """Draw ε_1..ε_M from distribution ``name`` (seeded: the same seed gives the same budgets).

    ``second_parameter`` overrides how a mixture's printed second parameter is read (``variance`` or
    ``std``); by default the paper's names use the variance and the ``reference-*`` names the std.
    """
    if isinstance(num_clients, bool) or int(num_clients) != num_clients or num_clients < 1:
        raise InvalidParameterError(f"the number of clients must be a positive integer, got {num_clients!r}")
    num_clients = int(num_clients)
    policy = NonPositiveBudgets.parse(nonpositive)
    key = str(name).strip()
    if key.lower().startswith("constant:"):
        value = _number(key.split(":", 1)[1], "constant budget")
        return PrivacyBudgets((value,) * num_clients, delta, f"constant:{value:g}")
    distribution = get_distribution(key)
    rng = SeedTree(seed).numpy("privacy-budgets")
    for _ in range(MAX_REDRAWS):
        values = _sample(distribution, num_clients, rng, second_parameter)
        redrawn: list[int] = []
        bad = np.flatnonzero(values <= 0)
        if bad.size and policy is NonPositiveBudgets.REJECT:
            shown = ", ".join(str(int(i)) for i in bad[:5]) + (" …" if bad.size > 5 else "")
            raise InvalidParameterError(
                f"budget distribution {distribution.name} drew ε ≤ 0 for {bad.size} client(s) ({shown}) with seed {seed}; "
                "use nonpositive budgets 'redraw' or another seed"
            )
        for index in bad:
            for _ in range(MAX_REDRAWS):
                value = float(_sample(distribution, 1, rng, second_parameter)[0])
                if value > 0:
                    values[index] = value
                    redrawn.append(int(index))
                    break
            else:
                raise InvalidParameterError(f"budget distribution {distribution.name} keeps drawing ε ≤ 0; it cannot give budgets")
        threshold = distribution.public_threshold
        if threshold is None or np.any(values > threshold):
            details = {"distribution": distribution.name, "definition": distribution.describe(), "seed": int(seed),
                       "second_parameter": second_parameter or distribution.second_is}
            return PrivacyBudgets(tuple(values.tolist()), delta, distribution.name, tuple(redrawn), details)
    raise InvalidParameterError(f"budget distribution {distribution.name} never drew an ε above {distribution.public_threshold}")


def _number(text: str, what: str, where: str = "") -> float:
    try:
        value = float(text)
    except ValueError:
        raise InvalidParameterError(f"{where}{what} {text.strip()!r} is not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise InvalidParameterError(f"{where}{what} {text.strip()!r} is not a finite number")
    if value <= 0:
        raise InvalidParameterError(f"{where}{what} {value:g} is not positive (a privacy budget must be > 0)")
    return value


def parse_budget_lines(lines: Sequence[str], origin: str = "budget file") -> list[float]:
    """ε per client from text lines: one number per line; blank lines and ``#`` comments are skipped.

    A line with several numbers separated by commas or whitespace contributes each of them.
    """
    values: list[float] = []
    for number, raw in enumerate(lines, start=1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        for token in text.replace(",", " ").split():
            values.append(_number(token, "ε", f"{origin} line {number}: "))
    if not values:
        raise InvalidParameterError(f"{origin} holds no budgets")
    return values


def read_budget_file(path: str | os.PathLike, num_clients: int | None = None, *, delta: float = 1e-5) -> PrivacyBudgets:
    """Budgets from a text file with one ε per client (client 0 first); its length must match ``num_clients``."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise InvalidParameterError(f"cannot read budget file {file}: {exc.strerror or exc}") from None
    values = parse_budget_lines(text.splitlines(), f"budget file {file}")
    if num_clients is not None and len(values) != num_clients:
        raise InvalidParameterError(f"budget file {file} has {len(values)} budgets for {num_clients} clients; give one ε per client")
    return PrivacyBudgets(tuple(values), delta, f"file:{file}")


def resolve_budgets(
    spec: str,
    num_clients: int,
    seed: int,
    *,
    delta: float = 1e-5,
    nonpositive: str | NonPositiveBudgets = NonPositiveBudgets.REDRAW,
    second_parameter: str | None = None,
) -> PrivacyBudgets:
    """Budgets from a distribution name, ``constant:<ε>``, ``file:<path>`` or an existing file path."""
    text = str(spec).strip()
    if text.lower().startswith("file:"):
        return read_budget_file(text[len("file:"):], num_clients, delta=delta)
    if text.lower() not in DISTRIBUTIONS and not text.lower().startswith("constant:") and Path(text).is_file():
        return read_budget_file(text, num_clients, delta=delta)
    return draw_budgets(text, num_clients, seed, delta=delta, nonpositive=nonpositive, second_parameter=second_parameter)


def check_budget_spec(spec: str) -> str:
    """Validate a budget spec without drawing (unknown names fail here, before any data is loaded)."""
    text = str(spec).strip()
    lower = text.lower()
    if lower.startswith("file:"):
        path = Path(text[len("file:"):])
        if not path.is_file():
            raise InvalidParameterError(f"budget file {path} does not exist")
        parse_budget_lines(path.read_text().splitlines(), f"budget file {path}")
        return text
    if lower.startswith("constant:"):
        _number(text.split(":", 1)[1], "constant budget")
        return text
    if lower not in DISTRIBUTIONS and Path(text).is_file():
        parse_budget_lines(Path(text).read_text().splitlines(), f"budget file {text}")
        return text
    get_distribution(text)
    return lower
