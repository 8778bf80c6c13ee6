"""Scores with a known true ε, and the designs they are drawn under: the validity suite's ground truth.

* **Scenarios** draw attack scores whose true ε at the audited δ is known exactly:

  - :class:`NullScores` — in- and out-scores identically distributed (ε_true = 0 at every δ), in four
    shapes: continuous N(0, 1), heavy-tailed (standard Cauchy), discrete with ties (integers 0..3) and
    constant.
  - :class:`GaussianMechanism` — in ~ N(μ, 1), out ~ N(0, 1), exactly μ-GDP; ε(δ) by the exact profile
    of Dong, Roth & Su 2022, Cor. 2.13 (:func:`privaudit.accounting.gaussian.gaussian_epsilon`).
  - :class:`LaplaceMechanism` — in ~ Lap(1, b), out ~ Lap(0, b) with b = 1/ε₀; pure ε₀-DP (Dwork & Roth
    2014, Thm 3.6), exact profile in :func:`laplace_delta`.
  - :class:`RandomizedResponse` — binary scores, P[1 | in] = e^ε₀/(1 + e^ε₀) = P[0 | out]; pure ε₀-DP,
    the extremal (ε, δ) mechanism of Kairouz, Oh & Viswanath 2015, exact profile in
    :func:`randomized_response_delta`.
  - :class:`SubsampledGaussian` — in ~ (1 − q)·N(0, 1) + q·N(μ, 1), out ~ N(0, 1): one Poisson-subsampled
    Gaussian step (the dominating pair of Zhu, Dong & Wang 2022 under add/remove neighbours), not Gaussian-shaped;
    exact profile of both directions in :func:`subsampled_gaussian_delta`, checked against privaudit's ``ctd``
    accountant in the tests.

  The score of each scenario is the mechanism's output itself (a post-processing, so it can never leak
  more than the mechanism), and for the three mechanisms it is monotone in the likelihood ratio, the
  strongest attack there is.

* **Attacks** (:class:`Attack`) turn the mechanism's output — the optimal score — into what a real attack scores:
  ``optimal`` (the output itself), ``weak`` (plus independent N(0, s²) noise), ``saturating`` (min(score, t)),
  ``discrete`` (rounded to a grid of step s) and ``zero-signal`` (N(0, 1), independent of membership). Each is a
  post-processing of the output, so it never leaks more than the mechanism; only ``optimal`` is an optimal attack.
  The verdict suite (:mod:`privaudit.audit.verdict_validity`) uses them to check that "consistent" is never earned
  by an attack's weakness.

* **Designs** say where the scores come from, as the estimators' ``design`` argument does:
  :class:`Trials` (independent runs: n_in in-scores and n_out out-scores, each iid), :class:`Fixed` (one
  run, m canaries, exactly n_in of them chosen uniformly at random to be in) and :class:`Bernoulli`
  (one run, each canary in independently with probability ½ — the design the one-run audit of Steinke,
  Nasr & Jagielski 2023 and the f-DP audit of Mahloujifar, Melis & Chaudhuri 2024 assume). Memberships
  are drawn first (:func:`draw_scores`), then each canary's score from the in- or out-distribution.

numpy and scipy only.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.errors import InvalidParameterError
from privaudit.stats.ledger_family import LedgerFamily

#: Mechanism claims an auditor can make, from the most general to the most specific.
CLAIM_ANY, CLAIM_GAUSSIAN, CLAIM_PURE = "any", "gaussian", "pure"
#: The declared-ledger claim "one Gaussian release, noise unknown" (route one-run-fdp-ledger; its σ only indexes it).
CLAIM_GAUSSIAN_LEDGER = LedgerFamily.subsampled_gaussian(1, 1.0, 1.0)


# --------------------------------------------------------------------------------------------------
# Exact privacy profiles of the two pure mechanisms (the Gaussian one lives in privaudit.accounting)
# --------------------------------------------------------------------------------------------------


def _check_epsilon0(epsilon0: float) -> float:
    value = float(epsilon0)
    if not math.isfinite(value) or value <= 0.0:
        raise InvalidParameterError(f"the mechanism's pure ε₀ must be a positive finite number, got {epsilon0}")
    return value


def _check_profile_delta(delta: float) -> float:
    value = float(delta)
    if math.isnan(value) or not 0.0 <= value < 1.0:
        raise InvalidParameterError(f"delta must lie in [0, 1), got {delta}")
    return value


def _check_profile_epsilon(epsilon: float, epsilon0: float) -> float:
    """Validate (ε, ε₀) of a profile evaluation and return ε₀."""
    if math.isnan(epsilon) or epsilon < 0:
        raise InvalidParameterError(f"the privacy profile is evaluated at ε ≥ 0, got {epsilon}")
    return _check_epsilon0(epsilon0)


def laplace_delta(epsilon: float, epsilon0: float) -> float:
    """δ(ε) of the Laplace mechanism Lap(0, b) vs Lap(1, b), b = 1/ε₀ (sensitivity 1).

    The privacy loss of output x is (|x| − |x − 1|)/b: −ε₀ for x ≤ 0, (2x − 1)ε₀ on (0, 1), ε₀ for
    x ≥ 1. For 0 ≤ ε < ε₀ the hockey-stick divergence sup_S P(S) − e^ε Q(S) is attained at
    S = {x > t}, t = (1 + ε/ε₀)/2, where P(S) = 1 − ½e^{−(ε₀ − ε)/2} and Q(S) = ½e^{−(ε₀ + ε)/2}:

        δ(ε) = 1 − ½e^{−(ε₀−ε)/2} − ½e^{ε}·e^{−(ε₀+ε)/2} = 1 − e^{(ε − ε₀)/2},   and 0 for ε ≥ ε₀.

    The pair is symmetric (x ↦ 1 − x swaps P and Q), so the swapped direction has the same profile.
    """
    epsilon0 = _check_profile_epsilon(epsilon, epsilon0)
    return 0.0 if epsilon >= epsilon0 else float(-math.expm1((epsilon - epsilon0) / 2.0))


def laplace_epsilon(delta: float, epsilon0: float) -> float:
    """Smallest ε ≥ 0 with :func:`laplace_delta` ≤ δ: max(0, ε₀ + 2 ln(1 − δ)); ε₀ at δ = 0."""
    epsilon0 = _check_epsilon0(epsilon0)
    delta = _check_profile_delta(delta)
    return max(0.0, epsilon0 + 2.0 * math.log1p(-delta))


def randomized_response_delta(epsilon: float, epsilon0: float) -> float:
    """δ(ε) of binary randomized response with P[1 | in] = P[0 | out] = p = e^ε₀/(1 + e^ε₀).

    Over the four subsets of {0, 1}, P(S) − e^ε Q(S) is largest at S = {1} (for ε ≥ 0):

        δ(ε) = max(0, p − e^ε (1 − p)) = max(0, (e^ε₀ − e^ε)/(1 + e^ε₀))

    (Kairouz, Oh & Viswanath 2015: the (ε, δ) region of every (ε₀, 0)-DP mechanism contains this one's).
    """
    epsilon0 = _check_profile_epsilon(epsilon, epsilon0)
    if epsilon >= epsilon0:
        return 0.0
    # (e^ε₀ − e^ε)/(1 + e^ε₀) = e^{ε₀}(1 − e^{ε−ε₀})/(1 + e^{ε₀}) = −expm1(ε − ε₀)·σ(ε₀)
    return float(-math.expm1(epsilon - epsilon0) / (1.0 + math.exp(-epsilon0)))


def randomized_response_epsilon(delta: float, epsilon0: float) -> float:
    """Smallest ε ≥ 0 with :func:`randomized_response_delta` ≤ δ: max(0, ln(e^ε₀ − δ(1 + e^ε₀))).

    Written as ε₀ + ln(1 − δ(1 + e^{−ε₀})) so that large ε₀ does not overflow; 0 when the argument of the
    logarithm falls to 1 or below.
    """
    epsilon0 = _check_epsilon0(epsilon0)
    delta = _check_profile_delta(delta)
    shrink = 1.0 - delta * (1.0 + math.exp(-epsilon0))
    if shrink <= 0.0:
        return 0.0
    return max(0.0, epsilon0 + math.log(shrink))




# --------------------------------------------------------------------------------------------------
# Scenarios: score distributions with a known true ε
# --------------------------------------------------------------------------------------------------

NULL_SHAPES = ("continuous", "heavy-tailed", "discrete", "constant")


@dataclass(frozen=True)
class NullScores:
    """In and out scores identically distributed: the mechanism leaks nothing, ε_true = 0 at every δ.

    Shapes: ``continuous`` N(0, 1); ``heavy-tailed`` standard Cauchy (no mean); ``discrete`` uniform on the
    integers 0..3 (heavy ties); ``constant`` all 0 (every score tied).
    """

    shape: str = "continuous"

    def __post_init__(self) -> None:
        if self.shape not in NULL_SHAPES:
            raise InvalidParameterError(f"null shape must be one of {', '.join(NULL_SHAPES)}, got {self.shape!r}")

    family = "null"
    #: identical distributions are 0-DP, 0-GDP, pure 0-DP and the noise → ∞ limit of a Gaussian release: all true.
    claims = (CLAIM_ANY, CLAIM_GAUSSIAN, CLAIM_PURE, CLAIM_GAUSSIAN_LEDGER)

    @property
    def name(self) -> str:
        return f"null {self.shape}"

    def true_epsilon(self, delta: float) -> float:
        _check_profile_delta(delta)
        return 0.0

    def sample(self, rng: np.random.Generator, member: bool, size: int) -> np.ndarray:
        match self.shape:
            case "continuous":
                return rng.normal(0.0, 1.0, size)
            case "heavy-tailed":
                return rng.standard_cauchy(size)
            case "discrete":
                return rng.integers(0, 4, size).astype(np.float64)
        return np.zeros(size)


@dataclass(frozen=True)
class GaussianMechanism:
    """in ~ N(μ, 1), out ~ N(0, 1): the Gaussian mechanism, exactly μ-GDP (Dong, Roth & Su 2022)."""

    mu: float = 1.0

    def __post_init__(self) -> None:
        if not math.isfinite(self.mu) or self.mu <= 0:
            raise InvalidParameterError(f"mu must be a positive finite number, got {self.mu}")

    family = "gaussian"
    claims = (CLAIM_ANY, CLAIM_GAUSSIAN, CLAIM_GAUSSIAN_LEDGER)

    @property
    def name(self) -> str:
        return f"gaussian μ={self.mu:g}"

    def true_epsilon(self, delta: float) -> float:
        """Exact ε(δ) of μ-GDP; ∞ at δ = 0 (no Gaussian mechanism is pure DP)."""
        delta = _check_profile_delta(delta)
        return math.inf if delta == 0.0 else gaussian_epsilon(self.mu, delta)

    def sample(self, rng: np.random.Generator, member: bool, size: int) -> np.ndarray:
        return rng.normal(self.mu if member else 0.0, 1.0, size)


@dataclass(frozen=True)
class LaplaceMechanism:
    """in ~ Lap(1, 1/ε₀), out ~ Lap(0, 1/ε₀): the Laplace mechanism of sensitivity 1, pure ε₀-DP."""

    epsilon0: float = 2.0

    def __post_init__(self) -> None:
        _check_epsilon0(self.epsilon0)

    family = "laplace"
    claims = (CLAIM_ANY, CLAIM_PURE)

    @property
    def name(self) -> str:
        return f"laplace ε₀={self.epsilon0:g}"

    def true_epsilon(self, delta: float) -> float:
        return laplace_epsilon(delta, self.epsilon0)

    def sample(self, rng: np.random.Generator, member: bool, size: int) -> np.ndarray:
        return rng.laplace(1.0 if member else 0.0, 1.0 / self.epsilon0, size)


@dataclass(frozen=True)
class RandomizedResponse:
    """Binary scores, P[1 | in] = P[0 | out] = e^ε₀/(1 + e^ε₀): randomized response, pure ε₀-DP."""

    epsilon0: float = 2.0

    def __post_init__(self) -> None:
        _check_epsilon0(self.epsilon0)

    family = "randomized-response"
    claims = (CLAIM_ANY, CLAIM_PURE)

    @property
    def name(self) -> str:
        return f"randomized response ε₀={self.epsilon0:g}"

    def true_epsilon(self, delta: float) -> float:
        return randomized_response_epsilon(delta, self.epsilon0)

    def sample(self, rng: np.random.Generator, member: bool, size: int) -> np.ndarray:
        p_one = float(1.0 / (1.0 + math.exp(-self.epsilon0)))
        return (rng.random(size) < (p_one if member else 1.0 - p_one)).astype(np.float64)


def _subsampled_check(mu: float, q: float) -> tuple[float, float]:
    mu, q = float(mu), float(q)
    if not math.isfinite(mu) or mu <= 0:
        raise InvalidParameterError(f"mu must be a positive finite number, got {mu}")
    if not 0.0 < q <= 1.0:
        raise InvalidParameterError(f"the sampling rate q must lie in (0, 1], got {q}")
    return mu, q


def subsampled_gaussian_delta(epsilon: float, mu: float, q: float) -> float:
    """δ(ε) of one Poisson-subsampled Gaussian step, A = (1 − q)·N(0, 1) + q·N(μ, 1) vs N(0, 1), both directions.

    The privacy loss ln(1 − q + q·e^{μx − μ²/2}) of A against N(0, 1) is increasing in x, so the hockey-stick
    divergence is attained at a threshold (Zhu, Dong & Wang 2022; Balle & Wang 2018 for the Gaussian case):

    * removal (A ‖ N(0, 1)), t = (ln((e^ε − 1 + q)/q) + μ²/2)/μ:  δ = q·Φ̄(t − μ) − (e^ε − 1 + q)·Φ̄(t);
    * addition (N(0, 1) ‖ A), only while e^{−ε} > 1 − q, t' = (ln((e^{−ε} − 1 + q)/q) + μ²/2)/μ:
      δ = Φ(t') − e^ε·((1 − q)·Φ(t') + q·Φ(t' − μ)).

    Returns the larger (add/remove neighbours: the mechanism's δ(ε) is the worse direction's).
    """
    mu, q = _subsampled_check(mu, q)
    if math.isnan(epsilon) or epsilon < 0:
        raise InvalidParameterError(f"the privacy profile is evaluated at ε ≥ 0, got {epsilon}")
    t = (math.log((math.expm1(epsilon) + q) / q) + mu * mu / 2.0) / mu
    removal = q * stats.norm.sf(t - mu) - (math.expm1(epsilon) + q) * stats.norm.sf(t)
    addition = 0.0
    shrink = math.exp(-epsilon) - 1.0 + q
    if shrink > 0:
        t_add = (math.log(shrink / q) + mu * mu / 2.0) / mu
        addition = stats.norm.cdf(t_add) - math.exp(epsilon) * ((1 - q) * stats.norm.cdf(t_add) + q * stats.norm.cdf(t_add - mu))
    return float(max(0.0, removal, addition))


def subsampled_gaussian_epsilon(delta: float, mu: float, q: float) -> float:
    """Smallest ε ≥ 0 with :func:`subsampled_gaussian_delta` ≤ δ (root of a decreasing function); ∞ at δ = 0."""
    mu, q = _subsampled_check(mu, q)
    delta = _check_profile_delta(delta)
    if delta == 0.0:
        return math.inf
    if subsampled_gaussian_delta(0.0, mu, q) <= delta:
        return 0.0
    high = 1.0
    while subsampled_gaussian_delta(high, mu, q) > delta:
        high *= 2.0
    return float(optimize.brentq(lambda e: subsampled_gaussian_delta(e, mu, q) - delta, 0.0, high, xtol=1e-12, rtol=1e-12))


@dataclass(frozen=True)
class SubsampledGaussian:
    """in ~ (1 − q)·N(0, 1) + q·N(μ, 1), out ~ N(0, 1): one Poisson-subsampled Gaussian step (not Gaussian-shaped)."""

    mu: float = 2.0
    q: float = 0.5

    def __post_init__(self) -> None:
        _subsampled_check(self.mu, self.q)

    family = "subsampled-gaussian"

    @property
    def claims(self) -> tuple[object, ...]:
        """A Gaussian mixture, neither G_μ-shaped nor pure DP: "any", and its own ledger (one step at rate q)."""
        return (CLAIM_ANY, LedgerFamily.subsampled_gaussian(1, self.q, 1.0 / self.mu))

    @property
    def name(self) -> str:
        return f"subsampled gaussian μ={self.mu:g} q={self.q:g}"

    def true_epsilon(self, delta: float) -> float:
        return subsampled_gaussian_epsilon(delta, self.mu, self.q)

    def sample(self, rng: np.random.Generator, member: bool, size: int) -> np.ndarray:
        if not member:
            return rng.normal(0.0, 1.0, size)
        return rng.normal(0.0, 1.0, size) + self.mu * (rng.random(size) < self.q)


Scenario = NullScores | GaussianMechanism | LaplaceMechanism | RandomizedResponse | SubsampledGaussian


# --------------------------------------------------------------------------------------------------
# Designs: where the in/out labels come from
# --------------------------------------------------------------------------------------------------


def _check_count(owner: str, name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidParameterError(f"{owner}.{name} must be an integer ≥ {minimum}, got {value!r}")


@dataclass(frozen=True)
class Trials:
    """Independent runs: ``n_in`` runs with the canary, ``n_out`` without, one score each (iid per side)."""

    n_in: int
    n_out: int

    def __post_init__(self) -> None:
        _check_count("Trials", "n_in", self.n_in, 1)
        _check_count("Trials", "n_out", self.n_out, 1)

    design = "trials"

    @property
    def label(self) -> str:
        return f"trials {self.n_in}/{self.n_out}"

    @property
    def m(self) -> int:
        return self.n_in + self.n_out

    def memberships(self, rng: np.random.Generator) -> np.ndarray:
        return np.concatenate([np.ones(self.n_in, dtype=bool), np.zeros(self.n_out, dtype=bool)])


@dataclass(frozen=True)
class Fixed:
    """One run with m = n_in + n_out canaries, exactly ``n_in`` of them (chosen uniformly at random) in."""

    n_in: int
    n_out: int

    def __post_init__(self) -> None:
        _check_count("Fixed", "n_in", self.n_in, 1)
        _check_count("Fixed", "n_out", self.n_out, 1)

    design = "fixed"

    @property
    def label(self) -> str:
        return f"fixed {self.n_in}/{self.n_out}"

    @property
    def m(self) -> int:
        return self.n_in + self.n_out

    def memberships(self, rng: np.random.Generator) -> np.ndarray:
        return rng.permutation(self.m) < self.n_in


@dataclass(frozen=True)
class Bernoulli:
    """One run with m canaries, each in independently with probability ½ (Steinke, Nasr & Jagielski 2023)."""

    m: int

    def __post_init__(self) -> None:
        _check_count("Bernoulli", "m", self.m, 2)

    design = "bernoulli"

    @property
    def label(self) -> str:
        return f"bernoulli(½) m={self.m}"

    def memberships(self, rng: np.random.Generator) -> np.ndarray:
        return rng.random(self.m) < 0.5


Design = Trials | Fixed | Bernoulli


def draw_scores(scenario: Scenario, design: Design, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(in-scores, out-scores) of one audit: memberships from ``design`` first, then each canary's score."""
    member = design.memberships(rng)
    k = int(member.sum())
    scores = np.empty(member.size, dtype=np.float64)
    scores[member] = scenario.sample(rng, True, k)
    scores[~member] = scenario.sample(rng, False, member.size - k)
    return scores[member], scores[~member]


def draw_seed(base_seed: int, scenario: Scenario, design: Design, rep: int) -> np.random.SeedSequence:
    """The seed of repetition ``rep`` of a scenario × design: the same for every route and strategy."""
    return np.random.SeedSequence(
        [int(base_seed), zlib.crc32(scenario.name.encode()), zlib.crc32(design.label.encode()), int(rep)]
    )


# --------------------------------------------------------------------------------------------------
# Attacks: what a real attack scores, as a post-processing of the optimal score (the mechanism's output)
# --------------------------------------------------------------------------------------------------

ATTACK_KINDS = ("optimal", "weak", "saturating", "discrete", "zero-signal")


@dataclass(frozen=True)
class Attack:
    """A post-processing of the mechanism's output (the optimal score); ``parameter`` is the kind's one knob.

    ``weak``: score + N(0, parameter²) drawn independently of everything else; ``saturating``: min(score,
    parameter); ``discrete``: round(score / parameter)·parameter; ``zero-signal``: N(0, 1) whatever the output and
    the membership; ``optimal``: the output itself (parameter unused).
    """

    kind: str = "optimal"
    parameter: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in ATTACK_KINDS:
            raise InvalidParameterError(f"attack kind must be one of {', '.join(ATTACK_KINDS)}, got {self.kind!r}")
        if not math.isfinite(self.parameter) or (self.kind in ("weak", "discrete") and self.parameter <= 0):
            raise InvalidParameterError(f"the {self.kind} attack needs a finite (positive) parameter, got {self.parameter}")

    @property
    def name(self) -> str:
        return self.kind if self.kind in ("optimal", "zero-signal") else f"{self.kind} {self.parameter:g}"

    def apply(self, rng: np.random.Generator, output: np.ndarray) -> np.ndarray:
        match self.kind:
            case "weak":
                return output + rng.normal(0.0, self.parameter, output.size)
            case "saturating":
                return np.minimum(output, self.parameter)
            case "discrete":
                return np.round(output / self.parameter) * self.parameter
            case "zero-signal":
                return rng.normal(0.0, 1.0, output.size)
        return output


def draw_attacked_scores(scenario: Scenario, attack: Attack, design: Design,
                         rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(in-scores, out-scores) of one audit by ``attack``: :func:`draw_scores`, then the attack's post-processing."""
    in_out, out_out = draw_scores(scenario, design, rng)
    return attack.apply(rng, in_out), attack.apply(rng, out_out)


def attack_seed(base_seed: int, scenario: Scenario, attack: Attack, design: Design, rep: int) -> np.random.SeedSequence:
    """The seed of repetition ``rep`` of a scenario × attack × design."""
    return np.random.SeedSequence([int(base_seed), zlib.crc32(scenario.name.encode()), zlib.crc32(attack.name.encode()),
                                   zlib.crc32(design.label.encode()), int(rep)])
