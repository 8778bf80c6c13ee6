"""Probe a mechanism in isolation: call a privatizer / aggregation function on crafted neighbouring inputs many times
and test its outputs against the mechanism it declares.

The function under test (:class:`Aggregate`) maps the updates of n clients (an ``(n, d)`` array) to one private
aggregate (a ``d``-vector): what a DP-FedAvg server step does (McMahan, Ramage, Talwar & Zhang 2018). Declared:
clip C over the whole update, Gaussian noise N(0, (zC)² I) on the sum of the clipped updates, the sum divided by A
(``divisor``: a number, or the number of updates). Two neighbouring inputs, each n = K + 1 updates:

* D  — K base updates (fixed, seeded, norm C/2: inside the clip) and one client that sends (almost) nothing: an
  update of norm 10⁻⁶·C (not exactly zero: Flower 1.42's server-side clipping divides by the norm and fails on 0);
* D′ — the same K and, instead of the zero update, a canary of norm 10·C along a fixed random unit direction v.

Under the declaration, out(D) ~ N(μ, τ²I) and out(D′) ~ N(μ + C·v/A, τ²I) with μ = Σ_k clip_C(base_k)/A and
τ = zC/A. ``trials`` calls on each input give the sub-tests (each at level α/m for the m that run, Bonferroni):

* **noise std** — Σ_i ‖out_i − declared mean‖²/τ² over both inputs ~ χ²(2T·d), two-sided;
* **Gaussian shape** — D'Agostino–Pearson K² on the standardised coordinates;
* **mean** — T·‖mean(out(D)) − μ‖²/τ² ~ χ²(d), upper tail (the base clients are averaged as declared);
* **sensitivity** — √T·⟨mean(out(D′)) − μ, v⟩/τ − √T·C/(Aτ) ~ N(0, 1), two-sided (the canary moves the output by
  C/A along v: clipped, once);
* **ε lower bound** — the projections ⟨out, v⟩ on D′ (in) and D (out) as membership scores, audited by privaudit's
  ``gdp`` route (Nasr et al. 2023; valid for a declared Gaussian mechanism, independent trials; :mod:`privaudit.stats`),
  or ``cp`` (any mechanism) when ``family="any"``; it fails the probe when it exceeds the ε of one release of the
  declared mechanism (the exact Gaussian ε with μ = 1/z, Balle & Wang 2018).

Every call's randomness is the function's own; the inputs are fixed by ``seed``.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from scipy import stats

from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.check.base import CertifiedBound, CheckResult, Findings, SubTest, decide
from privaudit.check.noise import log10_two_sided_chi2, two_sided_chi2
from privaudit.checks import finite_positive, integer_at_least, probability_open
from privaudit.errors import InvalidParameterError

NAME = "probe"
_FUNCTION = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
#: The canary's norm, in units of the clip: far outside it, so a missing or loose clip shows.
CANARY = 10.0


@runtime_checkable
class Aggregate(Protocol):
    """A privatizer / aggregation function: the updates of n clients, shape (n, d), to one private aggregate (d,)."""

    def __call__(self, updates: np.ndarray) -> np.ndarray: ...


def import_function(name: str) -> Callable:
    """The callable named ``package.module:function`` (imports the module: the user names it, so trusts it)."""
    if not isinstance(name, str) or not _FUNCTION.match(name):
        raise InvalidParameterError(f"a probed function is named 'package.module:function', got {name!r}")
    module_name, _, qualname = name.partition(":")
    try:
        target = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise InvalidParameterError(f"{name} cannot be imported: {exc}") from None
    if not callable(target):
        raise InvalidParameterError(f"{name} is not callable")
    return target


def probe_target(function: str | None, flower_factory: str | None) -> tuple[Callable, str]:
    """(the function to probe, its label) from a ``package.module:function`` or a Flower strategy factory's name
    (:func:`~privaudit.check.probe_flower.flower_aggregate` of what it returns); exactly one of the two is given."""
    if (function is None) == (flower_factory is None):
        raise InvalidParameterError("probe exactly one of a function (package.module:function) or a Flower strategy factory")
    if function is not None:
        return import_function(function), function
    from privaudit.check.probe_flower import flower_aggregate

    factory = import_function(flower_factory)  # type: ignore[arg-type]
    try:
        strategy = factory()
    except Exception as exc:  # the user's factory: one line
        raise InvalidParameterError(f"{flower_factory}() failed: {type(exc).__name__}: {exc}") from None
    return flower_aggregate(strategy), f"Flower strategy from {flower_factory}"


def probe_divisor(value: str | float | None) -> float | None:
    """A probe's divisor A: a positive number (None: the number of updates, the default)."""
    if value is None:
        return None
    try:
        return finite_positive("divisor", float(value))
    except ValueError:
        raise InvalidParameterError(f"a probe's divisor is a positive number (default: the number of updates), got {value!r}") from None


@dataclass(frozen=True)
class ProbeRequest:
    """The function to probe and the mechanism it declares (module docstring)."""

    function: Aggregate | str
    clip: float
    noise_multiplier: float
    clients: int = 10
    dimension: int = 64
    trials: int = 1000
    divisor: float | None = None  # None: the number of updates (K + 1)
    family: str = "gaussian"
    alpha: float = 0.05
    delta: float = 1e-5
    seed: int = 0
    label: str = field(default="")

    def __post_init__(self) -> None:
        finite_positive("clip", self.clip)
        finite_positive("noise multiplier", self.noise_multiplier)
        integer_at_least("clients", self.clients, 1)
        integer_at_least("dimension", self.dimension, 2)
        integer_at_least("trials", self.trials, 20)
        if self.divisor is not None:
            finite_positive("divisor", self.divisor)
        if self.family not in ("gaussian", "any"):
            raise InvalidParameterError(f"family must be 'gaussian' or 'any', got {self.family!r}")
        probability_open("alpha", self.alpha)
        probability_open("delta", self.delta)


def _inputs(request: ProbeRequest) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng([request.seed, 26])
    base = rng.normal(size=(request.clients, request.dimension))
    base *= (request.clip / 2) / np.linalg.norm(base, axis=1, keepdims=True)
    direction = rng.normal(size=request.dimension)
    direction /= np.linalg.norm(direction)
    idle = rng.normal(size=request.dimension)
    idle *= 1e-6 * request.clip / np.linalg.norm(idle)
    without = np.vstack([base, idle[None, :]])
    with_canary = np.vstack([base, CANARY * request.clip * direction[None, :]])
    return without, with_canary, direction


def _call(function: Callable, updates: np.ndarray, dimension: int) -> np.ndarray:
    try:
        out = np.asarray(function(updates.copy()), dtype=np.float64).reshape(-1)
    except InvalidParameterError:
        raise
    except Exception as exc:  # the user's function: any failure is one line
        raise InvalidParameterError(f"the probed function failed: {type(exc).__name__}: {exc}") from None
    if out.size != dimension:
        raise InvalidParameterError(f"the probed function returned {out.size} values for updates of dimension {dimension}")
    if not np.all(np.isfinite(out)):
        raise InvalidParameterError("the probed function returned a non-finite value")
    return out


def run_probe(request: ProbeRequest) -> CheckResult:
    """Probe ``request.function`` (module docstring)."""
    function = import_function(request.function) if isinstance(request.function, str) else request.function
    if not callable(function):
        raise InvalidParameterError("the probed function must be callable (updates (n, d) → aggregate (d,))")
    without, with_canary, direction = _inputs(request)
    n, d, t = without.shape[0], request.dimension, request.trials
    divisor = float(request.divisor) if request.divisor is not None else float(n)
    tau = request.noise_multiplier * request.clip / divisor
    mean = without.sum(axis=0) / divisor  # the base updates lie inside the clip
    shift = request.clip / divisor
    out_d = np.stack([_call(function, without, d) for _ in range(t)])
    out_dp = np.stack([_call(function, with_canary, d) for _ in range(t)])
    res_d = (out_d - mean) / tau
    res_dp = (out_dp - (with_canary[:-1].sum(axis=0) / divisor) - shift * direction) / tau
    share = request.alpha / 5
    tests = []
    value, df = float(np.sum(res_d**2) + np.sum(res_dp**2)), 2.0 * t * d
    p = two_sided_chi2(value, df)
    ratio = math.sqrt(value / df)
    tests.append(SubTest("noise std", "Σ‖out − declared mean‖²/τ² ~ χ²(2T·d)", ratio, p, share, p <= share,
                         f"measured/declared std {ratio:.4g}", log10_two_sided_chi2(value, df)))
    values = np.concatenate([res_d.ravel(), res_dp.ravel()])
    k2, p = stats.normaltest(values)
    tests.append(SubTest("Gaussian shape", "the standardised outputs are Gaussian (D'Agostino–Pearson K²)", float(k2),
                         float(p), share, float(p) <= share,
                         f"skewness {float(stats.skew(values)):.3g}, excess kurtosis {float(stats.kurtosis(values)):.3g}"))
    centre = t * float(np.sum(res_d.mean(axis=0) ** 2))
    p = float(stats.chi2.sf(centre, d))
    tests.append(SubTest("mean", "T·‖mean(out(D)) − μ‖²/τ² ~ χ²(d)", centre, p, share, p <= share,
                         f"the base clients' aggregate is off by {math.sqrt(centre / t) * tau:.4g} (τ = {tau:.4g})",
                         float(stats.chi2.logsf(centre, d)) / math.log(10)))
    moved = float(np.dot(out_dp.mean(axis=0) - with_canary[:-1].sum(axis=0) / divisor, direction))
    z = (moved - shift) * math.sqrt(t) / tau
    p = float(min(1.0, 2 * stats.norm.sf(abs(z))))
    tests.append(SubTest("sensitivity", "the canary moves the output by C/A along its direction", moved / shift, p, share,
                         p <= share, f"the canary of norm {CANARY:g}·C moved the output by {moved / shift:.4g} × C/A "
                         f"(Z = {z:.3g}){' — not clipped?' if moved > 2 * shift else ''}",
                         float(math.log(2) + stats.norm.logsf(abs(z))) / math.log(10)))
    bound, test = _epsilon_bound(request, out_dp @ direction, out_d @ direction, share)
    tests.append(test)
    assumptions = (f"declared: clip C = {request.clip:g}, noise N(0, (zC)²I) on the sum with z = {request.noise_multiplier:g}, "
                   f"divided by A = {divisor:g}", f"{t} calls on each of two neighbouring inputs of {n} updates in {d} "
                   f"dimensions (an update of norm 10⁻⁶·C or a canary of norm {CANARY:g}·C)", f"sub-tests at α/5 = {share:.3g} each")
    details = {"function": request.label or str(request.function), "trials": t, "dimension": d, "clients": n,
               "divisor": divisor, "tau": tau}
    return decide(NAME, "the function releases the declared mechanism", tests, request.alpha,
                  Findings(assumptions, bound=bound, details=details,
                           passed_reason=f"{t} outputs per input fit the declared mechanism"))


def _epsilon_bound(request: ProbeRequest, scores_in: np.ndarray, scores_out: np.ndarray,
                   level: float) -> tuple[CertifiedBound | None, SubTest]:
    from privaudit.stats.estimators import estimate

    route = "gdp" if request.family == "gaussian" else "cp"
    found = estimate(route, scores_in, scores_out, mechanism=request.family, design="trials", significance=level,
                     delta=request.delta)
    declared = gaussian_epsilon(1.0 / request.noise_multiplier, request.delta)
    refutes = found.epsilon_lb > declared * (1 + 1e-9)
    bound = CertifiedBound(float(found.epsilon_lb), request.delta, 1 - level, None, "one release", (), f"{route} route",
                           (f"the {route} route's assumptions: {found.mechanism} mechanism, independent trials",),
                           declared, "one call of the function")
    test = SubTest(f"ε lower bound ({route})", f"ε of one release ≤ {declared:.4g} (the declared Gaussian's)",
                   float(found.epsilon_lb), None, level, refutes,
                   f"certified ε ≥ {found.epsilon_lb:.4g} at δ = {request.delta:g} (ceiling {found.ceiling:.4g}) against "
                   f"the declared {declared:.4g}")
    return bound, test
