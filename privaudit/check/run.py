"""``privaudit check RUN``: every check on one run, α shared among those that run, the ledger marked where one fails.

One typed request (:class:`CheckRequest`), one function (:func:`run_check`), one result (:class:`CheckReport`).

**Statistical validity.** Under the null that the run implements what its ledger declares, the probability that
``check`` flags it is at most α: the statistical checks that run (noise, randomness, and sampling where it tests a
declared Poisson sample — those whose needs the run meets, decided before any runs) each get α/k (Bonferroni over the
k that run), and split their share again over their own sub-tests; the exact checks (clipping, accounting, sampling
of every client or a fixed-size sample) compare numbers whose only error is float rounding, which their tolerances
cover, and spend none of α. Power and the false-flag rate are measured, not assumed: ``benchmarks/check_bugs.py`` runs
seeded-bug federations and correct ones (``reports/check-bugs.md``).

**Readings.** A failed check marks the events it concerns invalid (:mod:`privaudit.check.marking`; with ``mark``, in
the checkpoint, so ``compute-epsilon --checkpoint`` then states no guarantee). Where the measured noise is below the
declared one, a certified ε lower bound for the mechanism as implemented follows (:mod:`privaudit.check.bound`); the
claim — the ε the ledger states, or one given — reads "refuted (as implemented)" when that bound exceeds it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from privaudit.check.accounting import AccountingCheck
from privaudit.check.base import Check, CheckResult, Status, not_run
from privaudit.check.clipping import ClippingCheck
from privaudit.check.declared import ClipSite, Overrides
from privaudit.check.marking import marked_ledger, write_marks
from privaudit.check.noise import NoiseCheck
from privaudit.check.randomness import RandomnessCheck
from privaudit.check.record import RunRecord
from privaudit.check.sampling import SamplingCheck
from privaudit.check.seeds import DEFAULT_SEEDS
from privaudit.checks import finite_non_negative, integer_at_least, probability_open
from privaudit.errors import InvalidParameterError, PrivauditError

#: The ``"schema"`` of a check result (``privaudit/schemas/check.schema.json``).
CHECK_SCHEMA = "privaudit.check/1"
CHECK_NAMES = ("clipping", "noise", "randomness", "sampling", "accounting")


@dataclass(frozen=True)
class CheckRequest:
    """What to check and how. ``run``: a checkpoint directory; ``alpha``: the family-wise level of the whole check;
    ``delta``: the δ of the certified bound and of the ledger's ε it is compared with; ``claimed_epsilon``: compare the
    bound with this ε instead of the ledger's; ``clip``, ``divisor``, ``clipped_at``: what the run does not declare
    (:class:`~privaudit.check.declared.Overrides`); ``seeds``: the seed space searched (0: no search); ``only``: a
    subset of :data:`CHECK_NAMES`; ``mark``: write the marked ledger into the checkpoint; ``summary``: state the
    ledger's guarantee after marking (an accountant call)."""

    run: Path
    alpha: float = 0.05
    delta: float = 1e-5
    claimed_epsilon: float | None = None
    clip: float | None = None
    divisor: str | float | None = None
    clipped_at: ClipSite | str | None = None
    seeds: int = DEFAULT_SEEDS
    accountant: str = "auto"
    only: tuple[str, ...] = ()
    mark: bool = False
    summary: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "run", Path(self.run))
        object.__setattr__(self, "alpha", probability_open("alpha", self.alpha))
        object.__setattr__(self, "delta", probability_open("delta", self.delta))
        if self.claimed_epsilon is not None:
            object.__setattr__(self, "claimed_epsilon", finite_non_negative("claimed ε", self.claimed_epsilon))
        integer_at_least("seeds", self.seeds, 0)
        unknown = [name for name in self.only if name not in CHECK_NAMES]
        if unknown:
            raise InvalidParameterError(f"unknown check {unknown[0]!r}; choose from {', '.join(CHECK_NAMES)}")
        Overrides(self.clip, self.divisor, self.clipped_at)  # validated here, where the user made the mistake

    @property
    def overrides(self) -> Overrides:
        return Overrides(self.clip, self.divisor, self.clipped_at)


@dataclass(frozen=True)
class CheckReport:
    """The checks of one run and what follows from them."""

    run: str
    framework: str
    rounds: int
    alpha: float
    delta: float
    results: tuple[CheckResult, ...]
    statistical: int
    reading: str
    claim: str
    marked: tuple[str, ...] = ()
    marks_written: bool = False
    mark_problem: str | None = None
    guarantee: str | None = None
    declared: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ran(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.status is not Status.NOT_RUN)

    @property
    def failed(self) -> tuple[CheckResult, ...]:
        return tuple(r for r in self.results if r.failed)

    @property
    def exit_code(self) -> int:
        """0 when every check that ran passed, 1 when one failed (2, bad input, is raised before)."""
        return 1 if self.failed else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": CHECK_SCHEMA,
            "run": self.run,
            "framework": self.framework,
            "rounds": self.rounds,
            "alpha": self.alpha,
            "delta": self.delta,
            "alpha_sharing": (f"Bonferroni: α/{self.statistical} = {self.alpha / self.statistical:.4g} for each of the "
                              f"{self.statistical} statistical check(s) that ran; exact checks spend none"
                              if self.statistical else "no statistical check ran"),
            "outcome": "failed" if self.failed else ("passed" if self.ran else "nothing checked"),
            "reading": self.reading,
            "claim": self.claim,
            "checks": [r.to_dict() for r in self.results],
            "marked": list(self.marked),
            "marks_written": self.marks_written,
            "mark_problem": self.mark_problem,
            "guarantee": self.guarantee,
            "declared": list(self.declared),
        }


def _checks(request: CheckRequest) -> list[Check]:
    return [ClippingCheck(), NoiseCheck(request.delta, request.accountant, request.claimed_epsilon),
            RandomnessCheck(request.seeds), SamplingCheck(), AccountingCheck()]


def run_check(request: CheckRequest) -> CheckReport:
    """Every check of ``request`` on its run (module docstring); bad input raises a :class:`PrivauditError`.

    A check left out by ``only`` is listed as not run, with that reason (it takes no share of α)."""
    record = RunRecord(request.run, request.overrides)
    checks = _checks(request)
    left_out = {c.name for c in checks if request.only and c.name not in request.only}
    needs = {c.name: ("not requested (--only " + " ".join(request.only) + ")",) if c.name in left_out else c.missing(record)
             for c in checks}
    statistical = [c for c in checks if not needs[c.name] and c.statistical(record)]
    share = request.alpha / len(statistical) if statistical else 0.0
    results = []
    for check in checks:
        if check.name in left_out:
            results.append(not_run(check.name, needs[check.name][0]))
            continue
        if needs[check.name]:
            results.append(not_run(check.name, needs[check.name][0], needs[check.name]))
            continue
        results.append(check.run(record, share if check in statistical else 0.0))
    results = [_with_declared_problems(r, record) for r in results]
    marked: tuple[str, ...] = ()
    written = False
    problem = None
    ledger = record.ledger
    if any(r.failed for r in results):
        central = {r: d.event for r, d in record.declared.central.items()}
        ledger, changes = marked_ledger(record.ledger, results, central)
        marked = tuple(changes)
        if request.mark and changes:
            try:
                write_marks(record.path, record.manifest, ledger, results)
                written = True
            except OSError as exc:
                problem = f"the marks could not be written into {record.path}: {exc.strerror or exc}"
    guarantee = None
    if request.summary:
        try:
            guarantee = ledger.summary(request.delta, request.accountant).statement
        except PrivauditError as exc:
            guarantee = f"the ledger's ε could not be computed: {exc}"
    reading, claim = _readings(results, request)
    return CheckReport(str(record.path), record.framework, record.rounds, request.alpha, request.delta, tuple(results),
                       len(statistical), reading, claim, marked, written, problem, guarantee,
                       tuple(d.describe() for _, d in sorted(record.declared.central.items())[:3]))


def _with_declared_problems(result: CheckResult, record: RunRecord) -> CheckResult:
    """A check that ran lists the rounds whose declaration could not be read as what it needed."""
    problems = record.declared.problems
    if not problems or result.status is Status.NOT_RUN or result.name not in ("noise", "randomness", "sampling"):
        return result
    extra = tuple(f"round {r}: {why}" for r, why in sorted(problems.items())[:3])
    return replace(result, needs=(*result.needs, *extra))


def _readings(results: Sequence[CheckResult], request: CheckRequest) -> tuple[str, str]:
    failed = [r for r in results if r.failed]
    ran = [r for r in results if r.status is not Status.NOT_RUN]
    bounds = [r.bound for r in results if r.bound is not None]
    refuting = [b for b in bounds if b.refutes]
    if refuting:
        b = max(refuting, key=lambda b: b.epsilon)
        claim = (f"refuted (as implemented): certified ε ≥ {_eps(b.epsilon)} at δ = {b.delta:g} (confidence "
                 f"{b.confidence:.4g}) > the claimed ε = {_eps(b.claimed)}")
    elif bounds:
        b = max(bounds, key=lambda b: b.epsilon)
        claim = (f"not refuted: certified ε ≥ {_eps(b.epsilon)} at δ = {b.delta:g}"
                 + (f", below the claimed ε = {_eps(b.claimed)}" if b.claimed is not None else ""))
    elif failed:
        claim = "no guarantee established: the run does not do what its ledger declares"
    else:
        claim = "no check contradicts the claim"
    if failed:
        reading = "the run does not do what it declares: " + "; ".join(f"{r.name} — {r.reason}" for r in failed)
    elif ran:
        reading = (f"consistent with its declaration: no check of {len(ran)} rejected at family-wise α = {request.alpha:g}")
    else:
        reading = "nothing could be checked: " + "; ".join(f"{r.name} — {r.reason}" for r in results)
    return reading, claim


def _eps(value: float | None) -> str:
    if value is None:
        return "?"
    return "∞" if math.isinf(value) else f"{value:.4g}"


def check_run(path: str | os.PathLike, **options: Any) -> CheckReport:
    """:func:`run_check` with the request's fields as keywords (``check_run("runs/x", alpha=0.01)``)."""
    return run_check(CheckRequest(Path(path), **options))
