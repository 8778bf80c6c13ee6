"""The validity suite for verdicts: P[consistent | true ε ≥ factor × claimed ε] ≤ 1 − min_power, checked by simulation.

"Consistent" from an attack promises (:func:`privaudit.audit.verdict.decide`): if the mechanism's true ε is at
least ``factor`` × the claimed ε, the audit says "consistent" with probability at most 1 − ``min_power`` (0.2 at
the defaults), up to the Monte-Carlo error of its power figure. A cell of this suite is a mechanism whose true ε is
known exactly (:mod:`privaudit.stats.validity_scenarios`), an attack on it (optimal, weak, saturating, discrete or
zero-signal), a design, a declared mechanism family (a true one) and a declaration of the attack as optimal or
not; the claim is true ε / ``claim_divisor``. :func:`evaluate_consistency` runs the pipeline a user gets — every
route valid for the declared family and design at its share of α (:func:`privaudit.stats.estimators.audit_scores`,
as ``privaudit audit --scores`` does), their power, then :func:`~privaudit.audit.verdict.decide` — R times on fresh
seeded draws, and counts the verdicts.

Three kinds of cell (``kind``):

* ``gate`` — claim ≤ true ε / factor, every declaration true: the property must hold. The gate is a one-sided
  binomial test of P[consistent] ≤ 1 − min_power at :data:`privaudit.stats.validity.TEST_LEVEL`, like the
  coverage gate, so a correct auditor fails it with probability ≤ 10⁻³ per cell.
* ``earnable`` — the claim is true (claim = true ε), the attack optimal and declared so: how often the word can be
  earned at all (reported, not gated).
* ``false-declaration`` — a weak attack declared optimal at true ε = factor × claim: what a false declaration costs
  (reported, not gated; the property's assumption is broken on purpose).

This module sits in :mod:`privaudit.audit` because it exercises ``decide``; the scenarios and attacks are in
:mod:`privaudit.stats.validity_scenarios`. The full grid is ``benchmarks/validity_grid.py`` (``make validity``).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy import stats

from privaudit.accounting.gaussian import gaussian_mu_for
from privaudit.audit.verdict import Verdict, decide
from privaudit.errors import InvalidParameterError
from privaudit.stats.claim_power import ClaimPower
from privaudit.stats.estimators import audit_scores
from privaudit.stats.ledger_scenarios import LedgerMechanism
from privaudit.stats.power import monte_carlo_interval
from privaudit.stats.validity import TEST_LEVEL
from privaudit.stats.validity_scenarios import (
    Attack,
    Bernoulli,
    Design,
    GaussianMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    Scenario,
    SubsampledGaussian,
    Trials,
    attack_seed,
    draw_attacked_scores,
)

KINDS = ("gate", "earnable", "false-declaration")


@dataclass(frozen=True)
class ConsistencyCell:
    """One scenario × attack × design × declaration; the claim is true ε / ``claim_divisor`` (picklable)."""

    scenario: Scenario
    attack: Attack
    design: Design
    mechanism: object  # a family name, or a declared curve family (LedgerFamily)
    attack_optimal: bool = False
    claim_divisor: float = 2.0
    kind: str = "gate"
    delta: float = 1e-5
    significance: float = 0.05
    power_factor: float = 2.0
    min_power: float = 0.8
    power_trials: int = 200

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidParameterError(f"consistency cell kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.mechanism not in self.scenario.claims:
            raise InvalidParameterError(f"'{self.mechanism}' is not a true mechanism claim about {self.scenario.name} "
                                        f"(true: {', '.join(self.scenario.claims)})")
        if self.kind == "gate" and self.claim_divisor < self.power_factor:
            raise InvalidParameterError("a gate cell needs true ε ≥ factor × claimed ε (claim_divisor ≥ power_factor)")

    @property
    def key(self) -> str:
        declared = "declared optimal" if self.attack_optimal else "not declared"
        return (f"{self.kind} | {self.scenario.name} | {self.attack.name} | {self.design.label} | {self.mechanism} | "
                f"{declared} | claim = ε/{self.claim_divisor:g}")

    def claimed_epsilon(self) -> float:
        return self.scenario.true_epsilon(self.delta) / self.claim_divisor


@dataclass(frozen=True)
class ConsistencyResult:
    """Verdict counts of one cell over ``runs`` audits, with P[consistent]'s 95 % interval and the gate's p-value.

    ``status``: ``pass`` (point estimate ≤ 1 − min_power), ``flag`` (above, not significantly), ``fail`` (the
    one-sided binomial test rejects P[consistent] ≤ 1 − min_power at TEST_LEVEL), or ``report`` for cells that are
    measured, not gated. ``power_lower`` is the largest Monte-Carlo lower limit of the routes' power (the same in
    every repetition where the counts are fixed; its first repetition's value otherwise), ``None`` where no
    attack-based power applies.
    """

    cell: ConsistencyCell
    runs: int
    consistent: int
    refuted: int
    inconclusive: int
    true_epsilon: float
    claimed_epsilon: float
    interval: tuple[float, float]
    p_value: float
    status: str
    power_lower: float | None
    example_reason: str
    seconds: float

    @property
    def rate(self) -> float:
        return self.consistent / self.runs


def excess_p_value(consistent: int, runs: int, bound: float) -> float:
    """P[Bin(runs, bound) ≥ consistent]: small when P[consistent] is significantly above ``bound``."""
    return float(stats.binom.sf(consistent - 1, runs, bound)) if consistent > 0 else 1.0


def evaluate_consistency(cell: ConsistencyCell, runs: int, base_seed: int = 0, *,
                         test_level: float = TEST_LEVEL) -> ConsistencyResult:
    """Run ``cell`` ``runs`` times through ``audit_scores`` + ``decide`` and count the verdicts (module docstring)."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise InvalidParameterError(f"runs must be a positive integer, got {runs!r}")
    start = time.perf_counter()
    true_epsilon = cell.scenario.true_epsilon(cell.delta)
    claim = cell.claimed_epsilon()
    counts: Counter[str] = Counter()
    power_lower: float | None = None
    example = ""
    for rep in range(runs):
        rng = np.random.default_rng(attack_seed(base_seed, cell.scenario, cell.attack, cell.design, rep))
        in_scores, out_scores = draw_attacked_scores(cell.scenario, cell.attack, cell.design, rng)
        if in_scores.size == 0 or out_scores.size == 0:  # an empty side: the audit certifies and supports nothing
            counts[Verdict.INCONCLUSIVE.value] += 1
            continue
        power = ClaimPower(claim, cell.power_factor, cell.power_trials, 0, cell.min_power, attack_optimal=cell.attack_optimal)
        outcomes = audit_scores(in_scores, out_scores, mechanism=cell.mechanism, design=cell.design.design,
                                significance=cell.significance, delta=cell.delta, claim=power)
        bounds = [o.bound for o in outcomes if o.bound is not None]
        verdict = decide(claim, cell.delta, bounds, min_power=cell.min_power)
        counts[verdict.verdict.value] += 1
        if power_lower is None:
            lowers = [b.power.lower for b in bounds if b.power is not None]
            power_lower = max(lowers) if lowers else None
        if not example or verdict.verdict is Verdict.CONSISTENT:
            example = verdict.reason
    consistent = counts[Verdict.CONSISTENT.value]
    bound = 1.0 - cell.min_power
    p_value = excess_p_value(consistent, runs, bound)
    if cell.kind != "gate":
        status = "report"
    elif p_value < test_level:
        status = "fail"
    elif consistent / runs > bound:
        status = "flag"
    else:
        status = "pass"
    return ConsistencyResult(cell, runs, consistent, counts[Verdict.REFUTED.value], counts[Verdict.INCONCLUSIVE.value],
                             true_epsilon, claim, monte_carlo_interval(consistent, runs), p_value, status, power_lower,
                             example, time.perf_counter() - start)


def consistency_grid() -> list[ConsistencyCell]:
    """The suite's cells: the gate cells (≥ 12: every scenario, attack kind and both designs), then the reported ones.

    Sizes are chosen so that the declared-optimal Gaussian cells sit where the power of an optimal attack at 2× the
    claim is just above 0.8 — the regime in which a wrongly calibrated power would say "consistent" too often; the
    μ = 0.2996 cell (true ε = 1.13, claim 0.377, 300 scores per side) is issue 24's measurement.
    """
    gaussian, laplace, rr = GaussianMechanism(1.0), LaplaceMechanism(2.0), RandomizedResponse(2.0)
    subsampled = SubsampledGaussian(2.0, 0.5)
    ledger = LedgerMechanism(10, 0.5, 3.0)  # the run's own declared mechanism: route one-run-fdp-ledger runs too
    issue = GaussianMechanism(round(gaussian_mu_for(1.13, 1e-5), 4))
    trials, small = Trials(400, 400), Trials(500, 500)
    optimal = Attack("optimal")
    weak, saturating, discrete, silent = Attack("weak", 1.0), Attack("saturating", 1.0), Attack("discrete", 1.0), Attack("zero-signal")
    return [
        # -- gate: true ε = 2 × claim (3 × for issue 24's case); every declaration true
        ConsistencyCell(gaussian, optimal, trials, "gaussian", True),
        ConsistencyCell(gaussian, optimal, Bernoulli(12_000), "gaussian", True),
        ConsistencyCell(issue, optimal, Trials(300, 300), "gaussian", True, claim_divisor=3.0),
        ConsistencyCell(gaussian, optimal, trials, "gaussian", False),
        ConsistencyCell(gaussian, optimal, trials, "any", True),
        ConsistencyCell(gaussian, weak, trials, "gaussian", False),
        ConsistencyCell(gaussian, saturating, trials, "gaussian", False),
        ConsistencyCell(gaussian, discrete, Bernoulli(2000), "gaussian", False),
        ConsistencyCell(gaussian, silent, trials, "gaussian", False),
        ConsistencyCell(laplace, optimal, small, "pure", True),
        ConsistencyCell(laplace, weak, Bernoulli(1000), "any", False),
        ConsistencyCell(rr, optimal, small, "pure", True),
        ConsistencyCell(rr, silent, Bernoulli(1000), "any", False),
        ConsistencyCell(subsampled, optimal, small, "any", True),
        ConsistencyCell(subsampled, saturating, Bernoulli(1000), "any", False),
        ConsistencyCell(ledger, optimal, Bernoulli(1000), ledger.ledger, True),
        # -- reported: can the word be earned (claim true, optimal attack declared), and what a false declaration costs
        ConsistencyCell(gaussian, optimal, trials, "gaussian", True, claim_divisor=1.0, kind="earnable"),
        ConsistencyCell(gaussian, optimal, Bernoulli(12_000), "gaussian", True, claim_divisor=1.0, kind="earnable"),
        ConsistencyCell(gaussian, optimal, Trials(100, 100), "gaussian", True, claim_divisor=1.0, kind="earnable"),
        ConsistencyCell(gaussian, weak, trials, "gaussian", True, kind="false-declaration"),
        ConsistencyCell(gaussian, silent, trials, "gaussian", True, kind="false-declaration"),
    ]
