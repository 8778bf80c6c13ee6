"""What a check is and what it returns: the :class:`Check` protocol, :class:`CheckResult` and its sub-tests.

A check compares what a run *declares* (its ledger's mechanisms and their stated assumptions) with what it *recorded*
(global models, client releases, sampled clients). Each check

* names what it needs from the run (:meth:`Check.missing` lists what this run did not record: then it is not run,
  and says why);
* runs at a significance level handed to it by the runner (:mod:`privaudit.check.run` shares the overall α among
  the statistical checks that run, Bonferroni), and states its null hypothesis and level;
* returns one :class:`CheckResult`: passed / failed / not-run, its deciding statistic and p-value, the reason in one
  line, what it assumed, what it needed that the run did not record, its sub-tests, the rounds a failure concerns
  (whose ledger events a failure marks invalid) and, where the measured noise is below the declared one, a
  certified ε lower bound (:class:`CertifiedBound`).

Deterministic checks (a norm above its clip, a count that contradicts a fixed-size sample, a release without a
ledger event) have no false-flag probability beyond float rounding, which their tolerances cover: they take no share
of α (:meth:`Check.statistical` is false).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from privaudit.check.record import RunRecord


#: The prefix of every note ``privaudit check`` writes into a ledger (:mod:`privaudit.check.marking`).
MARK = "privaudit check"


class Status(str, Enum):
    """The outcome of one check."""

    PASSED = "passed"
    FAILED = "failed"
    NOT_RUN = "not-run"


@dataclass(frozen=True)
class SubTest:
    """One statistical (or exact) test inside a check: its null hypothesis, statistic, p-value and level.

    ``p_value`` is the test's own p-value (before the check's Bonferroni split); it rejects when ``p_value ≤ level``.
    ``None`` p-value: an exact comparison (``rejected`` says how it came out).
    """

    name: str
    null: str
    statistic: float | None
    p_value: float | None
    level: float
    rejected: bool
    detail: str = ""
    #: log₁₀ of the p-value where it underflows to 0 (orders the rejections: the strongest evidence is reported first)
    log10_p: float | None = None

    @property
    def strength(self) -> float:
        """−log₁₀ p (∞ for an exact rejection), for ordering."""
        if self.p_value is None:
            return math.inf if self.rejected else 0.0
        if self.log10_p is not None and math.isfinite(self.log10_p):
            return -self.log10_p
        return -math.log10(self.p_value) if self.p_value > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "null": self.null, "statistic": _finite(self.statistic), "p_value": self.p_value,
                "log10_p": _finite(self.log10_p), "level": self.level, "rejected": self.rejected, "detail": self.detail}


@dataclass(frozen=True)
class CertifiedBound:
    """A certified ε lower bound for the mechanism as implemented, from a measured noise scale.

    With confidence ``confidence`` the noise is at most ``ratio_upper`` × the declared one; the declared events of the
    checked rounds with their noise multipliers scaled by that ratio, composed as the ledger composes them, have
    ε ≥ ``epsilon`` at ``delta`` (``accountant``: which privaudit accountant gave the lower end). ``claimed``: the ε
    the ledger states for the same subject (its upper bound at δ), when known; ``refutes`` when the bound exceeds it.
    """

    epsilon: float
    delta: float
    confidence: float
    ratio_upper: float | None
    subject: str
    rounds: tuple[int, ...]
    accountant: str
    assumptions: tuple[str, ...]
    claimed: float | None = None
    scope: str = "all checked tensors"

    @property
    def refutes(self) -> bool:
        return self.claimed is not None and self.epsilon > self.claimed * (1 + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "confidence": self.confidence,
                "ratio_upper": self.ratio_upper, "subject": self.subject, "rounds": list(self.rounds),
                "accountant": self.accountant, "assumptions": list(self.assumptions), "claimed": self.claimed,
                "refutes": self.refutes, "scope": self.scope}


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check (see the module docstring). ``level`` is the α share it ran at (0 for exact checks)."""

    name: str
    status: Status
    reason: str
    null: str = ""
    statistic: float | None = None
    p_value: float | None = None
    level: float = 0.0
    assumptions: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    tests: tuple[SubTest, ...] = ()
    rounds: tuple[int, ...] = ()
    bound: CertifiedBound | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    #: ledger indices of the events a failure concerns, where they are not the rounds' client-level events
    events: tuple[int, ...] = ()

    @property
    def failed(self) -> bool:
        return self.status is Status.FAILED

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "reason": self.reason,
            "null": self.null,
            "statistic": _finite(self.statistic),
            "p_value": self.p_value,
            "level": self.level,
            "assumptions": list(self.assumptions),
            "needs": list(self.needs),
            "tests": [t.to_dict() for t in self.tests],
            "rounds": list(self.rounds),
            "events": list(self.events),
            "bound": None if self.bound is None else self.bound.to_dict(),
            "details": dict(self.details),
        }


def not_run(name: str, reason: str, needs: Sequence[str] = (), assumptions: Sequence[str] = ()) -> CheckResult:
    """A check that could not run on this run, with the reason and what it needed."""
    return CheckResult(name, Status.NOT_RUN, reason, needs=tuple(needs), assumptions=tuple(assumptions))


@dataclass(frozen=True)
class Findings:
    """What a check reports besides its sub-tests: what it assumed, what it needed that the run did not record, the
    rounds (or ``events``: ledger indices) a failure concerns, a certified bound, details, and the one-line reason it
    gives when it passes."""

    assumptions: Sequence[str] = ()
    needs: Sequence[str] = ()
    rounds: Sequence[int] = ()
    bound: CertifiedBound | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    passed_reason: str = ""
    events: Sequence[int] = ()


def decide(name: str, null: str, tests: Sequence[SubTest], level: float, findings: Findings | None = None) -> CheckResult:
    """The result of a check made of ``tests``: failed when any rejects (its reason: the strongest rejection), else
    passed.

    Each sub-test ran at its own share of ``level`` (the check splits its level over its m sub-tests, Bonferroni), so
    the check rejects its null at ``level``. Its p-value is the Bonferroni-adjusted smallest sub-test p-value
    (min(1, m·min p) over the m tests that have one); its statistic is that test's statistic.
    """
    findings = findings or Findings()
    rejected = [t for t in tests if t.rejected]
    with_p = [t for t in tests if t.p_value is not None]
    best = min(with_p, key=lambda t: t.p_value, default=None)  # type: ignore[arg-type, return-value]
    p_value = None if best is None else min(1.0, len(with_p) * float(best.p_value))  # type: ignore[arg-type]
    statistic = None if best is None else best.statistic
    common = {"null": null, "p_value": p_value, "level": level, "assumptions": tuple(findings.assumptions),
              "needs": tuple(findings.needs), "tests": tuple(tests), "bound": findings.bound,
              "details": dict(findings.details)}
    if rejected:
        first = max(rejected, key=lambda t: t.strength)  # the strongest evidence first (exact rejections before all)
        reason = f"{first.name}: {first.detail}" if first.detail else first.name
        return CheckResult(name, Status.FAILED, reason, statistic=_finite(first.statistic), rounds=tuple(findings.rounds),
                           events=tuple(findings.events), **common)
    reason = findings.passed_reason or f"no test rejected its null at its level ({len(tests)} test(s))"
    return CheckResult(name, Status.PASSED, reason, statistic=statistic, **common)


@runtime_checkable
class Check(Protocol):
    """A declared-vs-observed check (one module per family under :mod:`privaudit.check`).

    ``name``: short, stable (``clipping``, ``noise``, ``randomness``, ``sampling``, ``accounting``);
    :meth:`statistical`: whether it takes a share of α on this run (decided before any check runs, from what the run
    declares: the sampling check is exact for every client or a fixed-size sample, statistical for Poisson);
    :meth:`missing`: what it needs that ``record`` lacks (empty: it can run); :meth:`run`: the check at significance
    ``level`` (0 for a check that is not statistical on this run).
    """

    name: str

    def statistical(self, record: RunRecord) -> bool: ...

    def missing(self, record: RunRecord) -> tuple[str, ...]: ...

    def run(self, record: RunRecord, level: float) -> CheckResult: ...


def _finite(value: float | None) -> float | None:
    """JSON has no infinity or NaN: a statistic that is not finite is written as ``None`` (the detail says it)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
