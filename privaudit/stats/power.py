"""Power calibrated to the claim: would this audit refute the claim if the mechanism were ``factor``× less private?

**The alternative is built from the claim, never from the observed scores.** A power figure computed from the
audited mechanism (its scores resampled) is high exactly when that mechanism already violates the claim, so it
cannot support "consistent" (privaudit issue 24 measured 23 "consistent" of 40 audits of a Gaussian mechanism at
3× its claim that way). Here the alternative is the canonical mechanism of the declared family at
ε_alt = factor × claimed ε, attacked optimally, audited with the same route, strategy, sample sizes, design, α
and δ as the audit itself; "refuted" means ε_lb > claimed ε.

* **Gaussian family** (the only one with an attack-based power): μ_alt solves ε(μ_alt, δ) = factor × claimed ε
  for the exact privacy profile of μ-GDP (Dong, Roth & Su 2022, Cor. 2.13;
  :func:`privaudit.accounting.gaussian.gaussian_mu_for`); an optimal attack's scores are then N(μ_alt, 1) for
  "in" and N(0, 1) for "out" up to a strictly increasing transform (the privacy loss of N(μ, 1) vs N(0, 1) is
  μx − μ²/2). The routes whose bound depends on the scores only through their order (every threshold chosen by
  rank, every guess count, splits that pick an observed score: :func:`rank_invariance_problem`) give the same
  bound for every strictly increasing transform, so the simulated figure is the power of *any* optimal attack on
  *any* Gaussian mechanism at ε_alt. Raising μ shifts the in-scores up (couple x ↦ x + μ' − μ): every
  false-negative count falls and no false-positive count rises, so each bound, and the power, is
  non-decreasing in μ: P[refute | μ_true ≥ μ_alt] ≥ power(μ_alt).
* **Other families** ("any", "pure"): a mechanism with ε = factor × claim can act on membership so rarely that no
  audit of these sizes sees it (randomized response at that ε, run with a small probability q ≫ δ and silent
  otherwise, has ε ≈ ε_alt at δ but shows itself once in about 1/q draws), so no attack-based power exists:
  :func:`power_unavailable` says why and the estimators record ``power = None``.

The figure depends only on (route, strategy, sizes, design, α, δ, claim, factor, simulations, seed), never on the
scores, so it is cached per process (:func:`cached_power`): repeated audits of the same shape cost nothing.

**Monte-Carlo error and the stopping rule.** At most ``trials`` simulated audits are run, looking at the count
after 1/8, 1/4, 1/2 and all of them (:data:`LOOK_FRACTIONS`); the one-sided 5 % Monte-Carlo error is split
equally over the looks (Bonferroni), and the simulation stops at the first look whose Clopper–Pearson lower limit
is ≥ ``min_power`` or whose upper limit is < ``min_power``. Whatever the look it stops at, the reported lower
limit is below the true power with probability ≤ 5 % (a union bound over the looks), which is what
:func:`privaudit.audit.verdict.decide` compares with ``min_power``: Monte-Carlo error cannot inflate it. A
clearly powerful (or powerless) audit stops after ``trials``/8 simulations.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.errors import InvalidParameterError
from privaudit.progress import progress_bar
from privaudit.stats.assumptions import Design, MechanismFamily
from privaudit.stats.estimates import PowerEstimate
from privaudit.stats.routes import Route
from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import Bonferroni, Explicit, Strategy, ThresholdGrid

#: Fractions of the maximum number of simulations at which the stopping rule looks.
LOOK_FRACTIONS = (0.125, 0.25, 0.5, 1.0)
#: One-sided confidence of the reported lower (and upper) limit, valid under the stopping rule.
MC_CONFIDENCE = 0.95
#: Audits with at least this many scores in all show a progress bar for their power simulation (when asked).
PROGRESS_FROM = 100_000
_CACHE_SIZE = 2048
_CACHE: OrderedDict[Hashable, PowerEstimate] = OrderedDict()

ALTERNATIVE = ("an optimal attack on a Gaussian mechanism at {factor:g}× the claim (μ = {mu:.4g}, ε = {epsilon:.4g} at "
               "δ = {delta:g}), audited with the same route, strategy, sample sizes, design, α and δ")


def monte_carlo_interval(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided Clopper–Pearson interval for a Monte-Carlo proportion."""
    tail = (1.0 - confidence) / 2.0
    return _lower_limit(successes, trials, tail), _upper_limit(successes, trials, tail)


def _lower_limit(successes: int, trials: int, level: float) -> float:
    """One-sided Clopper–Pearson lower limit at error ``level``."""
    return 0.0 if successes == 0 else float(stats.beta.ppf(level, successes, trials - successes + 1))


def _upper_limit(successes: int, trials: int, level: float) -> float:
    """One-sided Clopper–Pearson upper limit at error ``level``."""
    return 1.0 if successes == trials else float(stats.beta.ppf(1.0 - level, successes + 1, trials - successes))


def check_power_arguments(claimed_epsilon: float, factor: float, trials: int, min_power: float = 0.8) -> None:
    """The claim, the alternative's factor, the simulations and the power target, or one clear error."""
    if not claimed_epsilon >= 0 or not np.isfinite(claimed_epsilon):
        raise InvalidParameterError(f"claimed_epsilon must be a finite non-negative number, got {claimed_epsilon}")
    if not factor >= 1 or not np.isfinite(factor):
        raise InvalidParameterError(f"power factor must be a number ≥ 1 (how many times less private), got {factor}")
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        raise InvalidParameterError(f"power trials must be a positive integer, got {trials!r}")
    if not 0.0 < min_power < 1.0:
        raise InvalidParameterError(f"min_power must lie in (0, 1), got {min_power}")


def alternative_mu(claimed_epsilon: float, delta: float, factor: float) -> float:
    """μ_alt with ε(μ_alt, δ) = factor × claimed ε for μ-GDP (Dong, Roth & Su 2022, Cor. 2.13); needs δ > 0."""
    return gaussian_mu_for(factor * claimed_epsilon, delta)


def rank_invariance_problem(route: Route, strategy: Strategy) -> str | None:
    """Why a route's bound is *not* a function of the scores' order alone (None when it is).

    Rank rules (order statistics, quantile grids of the out-scores, splits that pick an observed score as the
    threshold, guess counts) compare scores only with each other. An explicit threshold or a grid of numeric
    thresholds sits at a place on the score's own scale, and a route that is not ``order_only`` (``one-run-paired``
    ranks its pairs by score *differences*) reads that scale too; their power depends on the attack's scale, which
    "optimal" does not fix.
    """
    if isinstance(strategy, Explicit) or (isinstance(strategy, Bonferroni) and isinstance(strategy.family, ThresholdGrid)):
        return (f"{route.name} with numeric thresholds fixed on the score's scale: its power depends on that scale, not "
                "only on the mechanism, so no optimal-attack power applies")
    if not route.order_only:
        return (f"{route.name} reads score differences, which depend on the score's scale, not only on its order, so no "
                "optimal-attack power applies")
    return None


def power_unavailable(family: MechanismFamily, route: Route, strategy: Strategy, delta: float, factor: float) -> str | None:
    """Why no attack-based power exists for this audit (None when the canonical Gaussian alternative applies)."""
    if family is MechanismFamily.LEDGER:
        return ("no attack-based power for a declared ledger mechanism yet: its canonical alternative (the same "
                "mechanism with its noise scaled to factor× the claimed ε, attacked optimally) is not simulated here, "
                "and the Gaussian alternative is not that mechanism")
    if family is not MechanismFamily.GAUSSIAN:
        return (f"no attack-based power for mechanism family '{family.value}': a mechanism with ε = {factor:g}× the claim "
                "can act on membership so rarely that no audit of these sizes sees it (e.g. randomized response at that "
                "ε, run with a small probability q ≫ δ and silent otherwise), so an attack's silence is no evidence of "
                "privacy; declare --mechanism gaussian where it holds")
    if delta == 0:
        return "no attack-based power at δ = 0: every Gaussian mechanism has ε = ∞ there, so none sits at a finite ε"
    return rank_invariance_problem(route, strategy)


def gaussian_scores(rng: np.random.Generator, mu: float, n_in: int, n_out: int, design: Design) -> AuditScores | None:
    """One audit's scores under the canonical alternative: in ~ N(μ, 1), out ~ N(0, 1), memberships by ``design``.

    ``trials`` and ``fixed`` keep the audit's counts (the counts carry no information about μ, so conditioning on
    them keeps every probability); ``bernoulli`` redraws each of the n_in + n_out canaries' fair coins, as the
    design does (None when a side comes out empty: that audit certifies nothing).
    """
    if design is Design.BERNOULLI:
        m = n_in + n_out
        n_in = int(rng.binomial(m, 0.5))
        n_out = m - n_in
        if n_in == 0 or n_out == 0:
            return None
    return AuditScores.trusted(rng.normal(mu, 1.0, n_in), rng.normal(0.0, 1.0, n_out))


@dataclass(frozen=True)
class _Simulation:
    refuted: int
    runs: int
    lower: float
    upper: float


def _looks(trials: int) -> list[int]:
    return sorted({max(1, math.ceil(trials * f)) for f in LOOK_FRACTIONS})


def simulate(audit_once: Callable[[np.random.Generator], float], *, claimed_epsilon: float, trials: int, seed: int,
             min_power: float, label: str = "power", progress: bool = False) -> _Simulation:
    """Run simulated audits (``audit_once(rng)`` → ε_lb) with the stopping rule of the module docstring.

    The limits are exact one-sided Clopper–Pearson limits (Clopper & Pearson 1934, Biometrika 26) at level
    (1 − MC_CONFIDENCE)/K for K looks, so the union bound over the looks keeps the reported limit valid.
    """
    looks = _looks(trials)
    level = (1.0 - MC_CONFIDENCE) / len(looks)
    rng = np.random.default_rng(seed)
    refuted = runs = 0
    lower, upper = 0.0, 1.0
    with progress_bar(label, total=trials, enabled=progress, transient=True) as bar:
        for look in looks:
            while runs < look:
                refuted += int(audit_once(rng) > claimed_epsilon)
                runs += 1
                bar.advance(status=f"{refuted}/{runs} refuted")
            lower, upper = _lower_limit(refuted, runs, level), _upper_limit(refuted, runs, level)
            if lower >= min_power or upper < min_power:
                break
    return _Simulation(refuted, runs, lower, upper)


def cached_power(key: Hashable, compute: Callable[[], PowerEstimate]) -> PowerEstimate:
    """The power for ``key`` (everything it depends on), computed once per process."""
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    value = compute()
    _CACHE[key] = value
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return value


def clear_power_cache() -> None:
    """Forget every cached power figure (tests that count simulations use it)."""
    _CACHE.clear()


@dataclass(frozen=True)
class PowerRequest:
    """What a power figure is asked for: P[ε_lb > ``claimed_epsilon``] at δ against the canonical Gaussian alternative
    at ``factor`` × the claim (module docstring), simulated with the stopping rule for at most ``trials`` audits from
    ``seed`` until the power is clearly above or below ``min_power``; ``progress`` shows a bar for large audits.
    Checked when made (:func:`check_power_arguments`)."""

    claimed_epsilon: float
    delta: float
    factor: float = 2.0
    trials: int = 200
    seed: int = 0
    min_power: float = 0.8
    progress: bool = False

    def __post_init__(self) -> None:
        check_power_arguments(self.claimed_epsilon, self.factor, self.trials, self.min_power)

    def cache_key(self) -> tuple[float, float, float, int, int, float]:
        """The request's part of a power cache key."""
        return (float(self.claimed_epsilon), float(self.delta), float(self.factor), self.trials, self.seed,
                float(self.min_power))


def _estimate(sim: _Simulation, request: PowerRequest, *, mu: float, rounds: int, method: str) -> PowerEstimate:
    return PowerEstimate(
        probability=sim.refuted / sim.runs,
        lower=sim.lower,
        claimed_epsilon=float(request.claimed_epsilon),
        delta=float(request.delta),
        factor=float(request.factor),
        alternative_epsilon=float(request.factor * request.claimed_epsilon),
        alternative_mu=float(mu),
        rounds=rounds,
        trials=sim.runs,
        max_trials=request.trials,
        seed=request.seed,
        min_power=float(request.min_power),
        interval=(sim.lower, sim.upper),
        method=method,
    )


def canonical_power(
    bound: Callable[[AuditScores], float],
    request: PowerRequest,
    *,
    sizes: tuple[int, int],
    design: Design,
    key: Hashable = None,
    mu: float | None = None,
    rounds: int = 1,
    method_suffix: str = "",
    label: str = "power",
) -> PowerEstimate:
    """P[bound(scores of the canonical alternative) > claimed ε] (module docstring), cached under ``key``.

    ``sizes`` are the audit's (n_in, n_out); ``mu`` overrides μ_alt (a single round of a composed run at μ_alt/√T,
    :mod:`privaudit.stats.gdp_composition`); ``label`` names the progress bar, shown when ``request.progress`` and the
    audit has ≥ :data:`PROGRESS_FROM` scores.
    """
    n_in, n_out = sizes
    claimed_epsilon, delta, factor = request.claimed_epsilon, request.delta, request.factor
    total_mu = alternative_mu(claimed_epsilon, delta, factor)
    drawn_mu = total_mu if mu is None else float(mu)

    def compute() -> PowerEstimate:
        def audit_once(rng: np.random.Generator) -> float:
            scores = gaussian_scores(rng, drawn_mu, n_in, n_out, design)
            if scores is None:
                return 0.0
            try:
                return float(bound(scores))
            except InvalidParameterError:  # e.g. a split of a redrawn side too small to split: certifies nothing
                return 0.0

        sim = simulate(audit_once, claimed_epsilon=claimed_epsilon, trials=request.trials, seed=request.seed,
                       min_power=request.min_power, label=f"{label} (stops once clear)",
                       progress=request.progress and n_in + n_out >= PROGRESS_FROM)
        method = ALTERNATIVE.format(factor=factor, mu=total_mu, epsilon=factor * claimed_epsilon, delta=delta) + method_suffix
        return _estimate(sim, request, mu=total_mu, rounds=rounds, method=method)

    if key is None:
        return compute()
    counts = (n_in + n_out,) if design is Design.BERNOULLI else (n_in, n_out)  # bernoulli redraws the counts
    return cached_power(("single", key, counts, design, *request.cache_key(), drawn_mu, rounds), compute)


def canonical_rounds_power(
    bound: Callable[[Sequence[AuditScores]], float],
    sizes: Sequence[tuple[int, int]],
    request: PowerRequest,
    *,
    key: Hashable = None,
    method_suffix: str = "",
) -> PowerEstimate:
    """The power of a bound over T rounds when the run is T equal Gaussian rounds of total μ_alt (μ_alt/√T each).

    Each round keeps its observed counts (``trials`` design: independent in/out observations per round). Equal
    rounds are the least favourable split of a fixed total for the composed bound in the model where each round's
    bound falls short of its μ_t by a slack s set by the round's sample sizes: for any split with Σ μ_t² = μ²,
    ‖(μ_t − s)₊‖₂ ≥ ‖μ‖₂ − ‖min(μ_t, s)‖₂ ≥ μ − s√T (triangle inequality), with equality for equal rounds.
    """
    if not sizes:
        raise InvalidParameterError("power needs at least one round")
    claimed_epsilon, delta, factor = request.claimed_epsilon, request.delta, request.factor
    total_mu = alternative_mu(claimed_epsilon, delta, factor)
    per_round = total_mu / math.sqrt(len(sizes))

    def compute() -> PowerEstimate:
        def audit_once(rng: np.random.Generator) -> float:
            drawn = [gaussian_scores(rng, per_round, n_in, n_out, Design.TRIALS) for n_in, n_out in sizes]
            return float(bound([s for s in drawn if s is not None]))

        sim = simulate(audit_once, claimed_epsilon=claimed_epsilon, trials=request.trials, seed=request.seed,
                       min_power=request.min_power, label=f"power · {len(sizes)} rounds (stops once clear)",
                       progress=request.progress and sum(a + b for a, b in sizes) >= PROGRESS_FROM)
        method = (ALTERNATIVE.format(factor=factor, mu=total_mu, epsilon=factor * claimed_epsilon, delta=delta)
                  + f"; {len(sizes)} equal Gaussian rounds of μ = {per_round:.4g} each" + method_suffix)
        return _estimate(sim, request, mu=total_mu, rounds=len(sizes), method=method)

    if key is None:
        return compute()
    return cached_power(("rounds", key, tuple(sizes), *request.cache_key()), compute)


def declared(power: PowerEstimate | None, attack_optimal: bool) -> PowerEstimate | None:
    """``power`` with the auditor's declaration recorded (whether the attack is optimal for the declared mechanism)."""
    return None if power is None else replace(power, attack_optimal=bool(attack_optimal))
