"""What a recipe hands the runner: readings of a claim, each with its trials, analysis and estimators.

A *claim* (``privaudit.audit.claims``) is tested under one or more *readings*: the mechanism as the paper
states it, as the reference code runs it, or a setting whose answer is known (a validity check). A recipe
(``privaudit.audit.recipes``) turns a claim into readings; the runner (``privaudit.audit.runner``) runs
each reading's trials through the executor, calls its ``analyse`` on the trial results, computes the ε
lower bounds with the reading's estimators, and decides the reading's verdict.

Everything here is a frozen value. ``TrialPlan.fn`` must be a module-level function (the process pool and
Ray pickle it by reference) and ``TrialPlan.spec`` JSON-able; ``analyse`` runs in the main process only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from privaudit.audit.verdict import AccountingEvidence, VerdictResult
from privaudit.errors import InvalidParameterError
from privaudit.stats.routes import ROUTES
from privaudit.stats.strategies import Strategy


class Role(str, Enum):
    """What a reading stands for; the claim's overall verdict is decided by the first two only."""

    PAPER = "paper"  # the mechanism as the paper states and analyses it
    IMPLEMENTATION = "implementation"  # the mechanism as the reference code runs it
    VALIDITY = "validity"  # a setting whose answer is known: a correct mechanism must not be refuted
    FACT = "fact"  # established by construction or exact accounting, reported beside the verdict (privaudit.audit.comparison)


@dataclass(frozen=True)
class EstimatorChoice:
    """One estimator consulted by a reading; the reading's α is split equally over its estimators.

    ``pilot`` > 0 spends the first ``pilot`` trials on choosing an explicit threshold (the midpoint between
    the pilot in- and out-scores, Jagielski et al. 2020: a threshold picked on separate runs) and bounds on
    the remaining trials with :class:`~privaudit.stats.strategies.Explicit`; ``strategy`` is then ignored.
    """

    name: str
    strategy: Strategy | None = None
    pilot: int = 0

    def __post_init__(self) -> None:
        if self.name not in ROUTES:
            raise InvalidParameterError(f"unknown estimator {self.name!r}")
        if int(self.pilot) < 0:
            raise InvalidParameterError("pilot trials must be ≥ 0")


@dataclass(frozen=True)
class TrialPlan:
    """``count`` trials of ``fn(spec, seed)``; every trial returns ``{"in": score, "out": score, ...}``."""

    fn: Callable[[dict[str, Any], int], Any]
    spec: Mapping[str, Any]
    count: int
    label: str

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or int(self.count) < 1:
            raise InvalidParameterError(f"a trial plan needs at least one trial, got {self.count!r}")


@dataclass(frozen=True)
class AttackInfo:
    """What the attack is, for the report: its name, the threat model, the canary and the score."""

    name: str
    threat_model: str
    canary: str
    score: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "threat_model": self.threat_model, "canary": self.canary, "score": self.score}


@dataclass(frozen=True, eq=False)
class Analysis:
    """A reading's evidence, from its trial results: accounting evidence, attack scores and details.

    ``in_scores``/``out_scores`` are None for accounting-only readings. ``details`` is JSON-able (numbers
    the report shows next to the verdict: measured sensitivities, participation counts, recovery errors).
    ``claimed_epsilon`` replaces the reading's when the claimed value is only known after the run (a per-client
    budget drawn during training).
    """

    evidence: tuple[AccountingEvidence, ...] = ()
    in_scores: np.ndarray | None = None
    out_scores: np.ndarray | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    claimed_epsilon: float | None = None


@dataclass(frozen=True)
class Reading:
    """One way of testing a claim (see the module docstring).

    ``mechanism`` is the family of the mechanism this reading audits (``any`` | ``gaussian`` | ``pure``,
    :mod:`privaudit.stats.assumptions`) and ``design`` how its trials produce scores (None: each route's own). The
    runner runs only the estimators whose bounds are valid under both, and lists the others with the reason.

    ``attack_optimal`` declares the reading's attack optimal for its (Gaussian) mechanism — the score a strictly
    increasing function of the privacy loss of a worst-case pair of neighbours. Only then can the attack's silence
    make the reading "consistent" (:func:`privaudit.audit.verdict.decide`); a recipe sets it only with a comment
    saying why it holds.

    ``decision`` replaces the (ε, δ) rule for claims that state no ε (:mod:`privaudit.audit.comparison`): the runner
    calls ``decision(analysis, significance)`` instead of ``decide``; such readings set ``claimed_epsilon`` and
    ``claimed_delta`` to None.
    """

    reading_id: str
    title: str
    role: Role
    description: str
    claimed_epsilon: float | None  # None: the claim states no ε (a comparison reading, see ``decision``)
    claimed_delta: float | None
    analyse: Callable[[Sequence[Any]], Analysis]
    trials: TrialPlan | None = None
    estimators: tuple[EstimatorChoice, ...] = ()
    attack: AttackInfo | None = None
    claim_note: str = ""
    mechanism: str = "any"
    design: str | None = None
    attack_optimal: bool = False
    decision: Callable[[Analysis, float], VerdictResult] | None = None


@dataclass(frozen=True)
class ClaimDetails:
    """Claim-level numbers a recipe adds to the result (e.g. the paper's comparison under each reading)."""

    details: Mapping[str, Any]
    notes: tuple[str, ...] = ()
