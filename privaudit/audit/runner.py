"""Run claim audits: readings → trials (through the executor, resumable) → ε lower bounds → verdicts → result JSON.

Entry points:

* :func:`run_claim` — one claim of the registry (``privaudit audit --claim ID``);
* :func:`run_suite` — every claim of a named suite (``privaudit audit --suite default``);
* :func:`privaudit.audit.workflows.checkpoint_one_run.run_one_run_audit` — a one-run canary audit of a trained federation.

For each reading of a claim (``privaudit.audit.plan``) the runner runs its trials with
:func:`privaudit.executor.run_trials` into ``<out>/trials/<claim>/<reading>/trials.jsonl`` (a re-run skips the
trials already there; a ``plan.json`` beside it refuses to mix trials of a different plan), seeds every trial
from the audit seed, the claim and the reading, calls the reading's ``analyse``, computes each estimator's
lower bound with its share α/k of the reading's significance (so the reading's family-wise confidence is
1 − α), with its ceiling and — for readings of a Gaussian mechanism — the power of an optimal attack on a
Gaussian mechanism at 2× the claim (:mod:`privaudit.stats.power`), and decides the reading's
verdict with :func:`privaudit.audit.verdict.decide`. The claim's verdict combines its paper and
implementation readings (:func:`overall_verdict`) and names its basis — one verdict per role, e.g. "refuted (as
implemented), consistent (as stated)" (:func:`verdicts_by_role`, :func:`verdict_basis`), so a reader can tell which
reading was refuted; validity readings only check the audit itself.

The result is one ``claim-audit`` file per claim, ``<out>/<claim_id>.json`` (:mod:`privaudit.report.results`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.audit.claims import Claim, get_claim
from privaudit.audit.comparison import (
    ComparisonResult,
    comparison_by_role,
    is_comparison_claim,
    overall_comparison,
)
from privaudit.audit.plan import Analysis, ClaimDetails, Reading, Role
from privaudit.audit.suites import get_suite
from privaudit.audit.verdict import Verdict, VerdictResult, decide
from privaudit.device import default_device, describe_device, resolve_device
from privaudit.errors import InvalidParameterError
from privaudit.executor import EXECUTORS, make_executor, make_trials, run_trials
from privaudit.output_folder import folder_for
from privaudit.progress import step
from privaudit.report.results import make_result, write_result
from privaudit.stats.assumptions import design_of, mechanism_family
from privaudit.stats.claim_power import ClaimPower
from privaudit.stats.estimates import LowerBound, jsonable
from privaudit.stats.estimators import RouteOptions, estimate
from privaudit.stats.metrics import attack_metrics
from privaudit.stats.routes import route
from privaudit.stats.strategies import Explicit

PLAN_FILE = "plan.json"
ROC_POINTS = 256


@dataclass(frozen=True)
class AuditSettings:
    """How to run: trials per reading, significance, seed, executor, output folder, power simulation size."""

    trials: int | None = None
    significance: float = 0.05
    seed: int = 0
    executor: str = "in-process"
    workers: int | None = None
    address: str | None = None
    out: Path | None = None
    power_trials: int = 200
    power_factor: float = 2.0
    min_power: float = 0.8
    bootstrap_resamples: int = 200
    progress: bool = True
    torch_threads: int | None = 1

    def __post_init__(self) -> None:
        if self.trials is not None and (isinstance(self.trials, bool) or not isinstance(self.trials, int) or self.trials < 1):
            raise InvalidParameterError(f"trials must be a positive integer, got {self.trials!r}")
        if not (isinstance(self.significance, int | float) and 0.0 < float(self.significance) < 1.0):
            raise InvalidParameterError(f"significance must lie in (0, 1), got {self.significance!r}")
        if isinstance(self.power_trials, bool) or int(self.power_trials) < 1:
            raise InvalidParameterError(f"power trials must be a positive integer, got {self.power_trials!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise InvalidParameterError(f"the audit seed must be a non-negative integer, got {self.seed!r}")
        if self.torch_threads is not None and int(self.torch_threads) < 1:
            raise InvalidParameterError(f"torch threads must be at least 1, got {self.torch_threads}")
        if self.workers is not None and int(self.workers) < 1:
            raise InvalidParameterError(f"workers must be at least 1, got {self.workers}")
        check_executor(self.executor)
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))


def check_executor(name: str) -> None:
    """Refuse an unknown executor, or Ray when it is not installed, before any work is done."""
    key = str(name).strip().lower()
    known = {"in-process", "inprocess", "local", "process", "processes", "pool", "ray"}
    if key not in known:
        raise InvalidParameterError(f"unknown executor {name!r}; choose one of: {', '.join(EXECUTORS)}")
    if key == "ray" and importlib.util.find_spec("ray") is None:
        raise InvalidParameterError("the ray executor needs Ray, which is not installed: pip install 'privaudit[ray]'")


# ------------------------------------------------------------------------------------------------
# outcomes
# ------------------------------------------------------------------------------------------------
@dataclass
class ReadingOutcome:
    reading: Reading
    analysis: Analysis
    bounds: list[LowerBound]
    verdict: VerdictResult
    metrics: dict[str, Any] | None
    trials: int
    seconds: float
    not_run: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        r = self.reading
        return {
            "reading": r.reading_id,
            "title": r.title,
            "role": r.role.value,
            "description": r.description,
            "claimed": {"epsilon": r.claimed_epsilon, "delta": r.claimed_delta, "note": r.claim_note},
            "accountant": [{**e.to_dict(), "reading": r.reading_id} for e in self.analysis.evidence],
            "lower_bounds": [{**b.to_dict(), "reading": r.reading_id} for b in self.bounds],
            "mechanism": r.mechanism,
            "attack_optimal": r.attack_optimal,
            "routes_not_run": list(self.not_run),
            "verdict": self.verdict.verdict.value,
            "reason": self.verdict.reason,
            "refuted_by": list(self.verdict.refuted_by),
            "family_confidence": self.verdict.family_confidence,
            "notes": [*self.verdict.notes, *self.analysis.notes],
            "attack": None if r.attack is None else {
                **r.attack.to_dict(),
                "estimators": [{"name": e.name, "pilot_trials": e.pilot} for e in r.estimators],
                "metrics": self.metrics,
            },
            "trials": self.trials,
            "seconds": self.seconds,
            "details": jsonable(dict(self.analysis.details)),
        }


@dataclass
class ClaimAudit:
    claim: Claim
    readings: list[ReadingOutcome]
    details: dict[str, Any]
    verdict: Verdict
    reason: str
    notes: list[str] = field(default_factory=list)
    settings: AuditSettings | None = None
    seconds: float = 0.0
    path: Path | None = None
    by_role: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def trials(self) -> int:
        return sum(o.trials for o in self.readings)

    @property
    def basis(self) -> str:
        """The verdict with its basis, e.g. ``refuted (as implemented), consistent (as stated)``."""
        return verdict_basis(self.by_role or verdicts_by_role(self.readings))

    def data(self) -> dict[str, Any]:
        readings = [o.to_dict() for o in self.readings]
        return {
            **self.claim.to_dict(),
            "accountant": [e for r in readings for e in r["accountant"]],
            "lower_bounds": [b for r in readings for b in r["lower_bounds"]],
            "verdict": self.verdict.value,
            "verdict_basis": self.basis,
            "verdicts_by_role": self.by_role or verdicts_by_role(self.readings),
            "reason": self.reason,
            "notes": self.notes,
            "readings": readings,
            "details": jsonable(self.details),
            "trials": self.trials,
            "seconds": self.seconds,
        }


def overall_verdict(outcomes: Sequence[ReadingOutcome]) -> tuple[Verdict, str, list[str]]:
    """The claim's verdict from its paper and implementation readings.

    refuted — some such reading is refuted (the claim is false for a mechanism it is made about);
    consistent — every such reading is consistent; inconclusive — otherwise. A refuted *validity* reading
    means the audit refuted a correct mechanism: it is reported as a failed validity check. A claim that states no ε
    (its readings carry their own ``decision``) is combined by :func:`privaudit.audit.comparison.overall_comparison`.
    """
    if is_comparison_claim(outcomes):
        return overall_comparison(outcomes)  # type: ignore[return-value]
    notes = [f"validity check failed: {o.reading.reading_id} was refuted ({o.verdict.reason})"
             for o in outcomes if o.reading.role is Role.VALIDITY and o.verdict.verdict is Verdict.REFUTED]
    decisive = [o for o in outcomes if o.reading.role is not Role.VALIDITY]
    refuted = [o for o in decisive if o.verdict.verdict is Verdict.REFUTED]
    if refuted:
        head = refuted[0]
        more = f" (and {len(refuted) - 1} more reading(s))" if len(refuted) > 1 else ""
        return Verdict.REFUTED, f"{head.reading.reading_id}: {head.verdict.reason}{more}", notes
    if decisive and all(o.verdict.verdict is Verdict.CONSISTENT for o in decisive):
        return Verdict.CONSISTENT, "; ".join(f"{o.reading.reading_id}: {o.verdict.reason}" for o in decisive), notes
    if not decisive:
        return Verdict.INCONCLUSIVE, "no paper or implementation reading could run", notes
    open_ = [o for o in decisive if o.verdict.verdict is Verdict.INCONCLUSIVE]
    return Verdict.INCONCLUSIVE, f"{open_[0].reading.reading_id}: {open_[0].verdict.reason}", notes


#: How each role reads in a verdict's basis: the paper's claim as stated, as implemented, and the audit's own check.
ROLE_BASIS = {Role.IMPLEMENTATION: "as implemented", Role.PAPER: "as stated", Role.VALIDITY: "validity check"}


def verdicts_by_role(outcomes: Sequence[ReadingOutcome]) -> dict[str, dict[str, Any]]:
    """One verdict per role, so a reader can tell *which* reading of the claim was refuted.

    ``{"implementation": {"verdict", "basis": "as implemented", "reason", "readings": {id: verdict}}, "paper": …,
    "validity": …}`` — only the roles that have readings, implementation first. Within a role the rule of
    :func:`overall_verdict` applies (refuted if any reading is; consistent if all are; else inconclusive); for
    validity readings "consistent" means the check passed. Comparison claims: :func:`~privaudit.audit.comparison.comparison_by_role`.
    """
    if is_comparison_claim(outcomes):
        return comparison_by_role(outcomes)
    out: dict[str, dict[str, Any]] = {}
    for role in ROLE_BASIS:
        group = [o for o in outcomes if o.reading.role is role]
        if not group:
            continue
        refuted = [o for o in group if o.verdict.verdict is Verdict.REFUTED]
        if refuted:
            verdict, head = Verdict.REFUTED, refuted[0]
        elif all(o.verdict.verdict is Verdict.CONSISTENT for o in group):
            verdict, head = Verdict.CONSISTENT, group[0]
        else:
            verdict, head = Verdict.INCONCLUSIVE, next(o for o in group if o.verdict.verdict is Verdict.INCONCLUSIVE)
        reason = f"{head.reading.reading_id}: {head.verdict.reason}"
        if len(group) > 1:
            reason += f" (readings: {', '.join(f'{o.reading.reading_id} {o.verdict.verdict.value}' for o in group)})"
        out[role.value] = {"verdict": verdict.value, "basis": ROLE_BASIS[role], "reason": reason,
                           "readings": {o.reading.reading_id: o.verdict.verdict.value for o in group}}
    return out


def verdict_basis(by_role: dict[str, dict[str, Any]]) -> str:
    """``refuted (as implemented), consistent (as stated)`` — the claim's verdict per basis (validity checks aside)."""
    parts = [f"{v['verdict']} ({v['basis']})" for role, v in by_role.items() if role != Role.VALIDITY.value]
    return ", ".join(parts) or "no paper or implementation reading ran"


# ------------------------------------------------------------------------------------------------
# running
# ------------------------------------------------------------------------------------------------
def _reading_seed(seed: int, claim_id: str, reading_id: str) -> int:
    sequence = np.random.SeedSequence([int(seed), zlib.crc32(claim_id.encode()), zlib.crc32(reading_id.encode())])
    return int(sequence.generate_state(1, np.uint32)[0])


def _plan_fingerprint(reading: Reading, base_seed: int) -> dict[str, Any]:
    plan = reading.trials
    assert plan is not None
    spec = json.loads(json.dumps(dict(plan.spec), sort_keys=True))
    digest = hashlib.sha256(json.dumps({"fn": f"{plan.fn.__module__}.{plan.fn.__qualname__}", "spec": spec,
                                        "seed": base_seed}, sort_keys=True).encode()).hexdigest()
    return {"fn": f"{plan.fn.__module__}.{plan.fn.__qualname__}", "seed": base_seed, "spec": spec, "sha256": digest}


def _guard_plan(directory: Path, fingerprint: dict[str, Any]) -> None:
    folder = folder_for(directory, "audit")  # the audit's --out: a failed write moves it, trials and all (output_folder)
    path = folder.file(PLAN_FILE)
    if path.exists():
        try:
            existing = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            existing = {}
        if existing.get("sha256") != fingerprint["sha256"]:
            raise InvalidParameterError(
                f"{directory} holds trials of a different audit plan (other parameters or seed); "
                "use another --out directory or remove it"
            )
        return
    folder.save(PLAN_FILE, json.dumps(fingerprint, indent=1) + "\n")


def _pilot_threshold(in_scores: np.ndarray, out_scores: np.ndarray) -> float:
    """A threshold from pilot trials only: the middle of the gap if they separate, else between the medians."""
    if in_scores.min() > out_scores.max():
        return float((in_scores.min() + out_scores.max()) / 2.0)
    return float((np.median(in_scores) + np.median(out_scores)) / 2.0)


def _bounds(reading: Reading, analysis: Analysis, settings: AuditSettings,
            power_seed: int) -> tuple[list[LowerBound], list[dict[str, str]]]:
    """The reading's bounds, and the estimators not run because their bound would not be valid for the reading.

    α is split over every estimator the reading names, run or not, so skipping one never raises another's share.
    """
    if analysis.in_scores is None or analysis.out_scores is None:
        return [], []
    if not reading.estimators:
        raise InvalidParameterError(f"reading {reading.reading_id} produced attack scores but names no estimator")
    share = float(settings.significance) / len(reading.estimators)
    claimed = reading.claimed_epsilon
    power_claim = claimed if math.isfinite(claimed) and claimed > 0 else None
    bounds, not_run = [], []
    for choice in reading.estimators:
        why = route(choice.name).not_applicable(mechanism_family(reading.mechanism),
                                                design_of(reading.design or route(choice.name).designs[0]))
        if why is not None:
            not_run.append({"estimator": choice.name, "reason": why})
            continue
        in_s, out_s = analysis.in_scores, analysis.out_scores
        strategy = choice.strategy
        details: dict[str, Any] = {}
        if choice.pilot:
            k = min(choice.pilot, len(in_s) - 1, len(out_s) - 1)
            if k < 1:
                raise InvalidParameterError(f"reading {reading.reading_id} needs more than {choice.pilot} trials for its pilot")
            threshold = _pilot_threshold(in_s[:k], out_s[:k])
            in_s, out_s = in_s[k:], out_s[k:]
            strategy = Explicit(threshold)
            details = {"pilot_trials": k, "threshold_from_pilot": threshold}
        power = ClaimPower(power_claim, settings.power_factor, int(settings.power_trials), power_seed, settings.min_power,
                           attack_optimal=reading.attack_optimal)
        bound = estimate(choice.name, in_s, out_s, mechanism=reading.mechanism, design=reading.design,
                         significance=share, delta=reading.claimed_delta, route_options=RouteOptions(strategy), claim=power)
        if details:
            bound = replace(bound, details={**bound.details, **details})
        bounds.append(bound)
    return bounds, not_run


def _fmt(x: float) -> str:
    return "∞" if math.isinf(x) else f"{x:.4g}"


def _accounting_bracket(analysis: Analysis, claimed: float) -> str:
    """What the accounting of an attack-free reading does say: its certified bounds beside the claim."""
    impl = [e for e in analysis.evidence if e.implementation]
    lowers = [e.lower for e in impl if e.lower is not None]
    uppers = [e.upper for e in impl if e.assumptions_hold]
    parts = []
    if lowers:
        parts.append(f"certified ε ≥ {_fmt(max(lowers))}")
    if uppers:
        parts.append(f"ε ≤ {_fmt(min(uppers))} (an upper bound, which refutes nothing)")
    if not parts:
        return f"no certified bound on the examined mechanism's ε (claimed {_fmt(claimed)})"
    return f"accounting: {' and '.join(parts)} vs claimed {_fmt(claimed)}"


def _thin(values: list[Any], keep: np.ndarray) -> list[Any]:
    return [values[i] for i in keep]


def _metrics(analysis: Analysis, settings: AuditSettings, seed: int) -> dict[str, Any] | None:
    if analysis.in_scores is None or analysis.out_scores is None:
        return None
    metrics = attack_metrics(analysis.in_scores, analysis.out_scores, n_resamples=int(settings.bootstrap_resamples),
                             seed=seed).to_dict()
    roc = metrics["roc"]
    if len(roc["fpr"]) > ROC_POINTS:
        keep = np.unique(np.linspace(0, len(roc["fpr"]) - 1, ROC_POINTS).round().astype(int))
        metrics["roc"] = {k: _thin(v, keep) for k, v in roc.items()}
        metrics["roc"]["thinned_from"] = len(roc["fpr"])
    metrics["scores"] = {"in": _score_summary(analysis.in_scores), "out": _score_summary(analysis.out_scores)}
    return metrics


def _score_summary(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(np.mean(values)), "std": float(np.std(values)), "min": float(np.min(values)),
            "max": float(np.max(values))}


def _limit_torch_threads(settings: AuditSettings) -> None:
    """In-process trials train tiny models: one torch thread is fastest (pool workers set theirs themselves)."""
    if settings.torch_threads is not None and settings.executor.strip().lower() in ("in-process", "inprocess", "local"):
        import torch

        torch.set_num_threads(int(settings.torch_threads))


def run_reading(claim: Claim, reading: Reading, settings: AuditSettings) -> ReadingOutcome:
    """Trials (if any) → analysis → lower bounds → verdict, for one reading."""
    started = time.perf_counter()
    # one line per reading (its analysis can train a federation for minutes); its trials then advance a bar
    step(f"{claim.claim_id} · {reading.reading_id}: {reading.title}", enabled=settings.progress)
    base_seed = _reading_seed(settings.seed, claim.claim_id, reading.reading_id)
    results: list[Any] = []
    if reading.trials is not None:
        plan = reading.trials
        out_dir = None
        if settings.out is not None:
            out_dir = settings.out / "trials" / claim.claim_id / reading.reading_id
            _guard_plan(out_dir, _plan_fingerprint(reading, base_seed))
        trials = make_trials([dict(plan.spec)] * int(plan.count), base_seed, prefix=reading.reading_id)
        _limit_torch_threads(settings)
        executor = make_executor(settings.executor, workers=settings.workers, address=settings.address)
        results = run_trials(plan.fn, trials, out_dir, executor, progress=settings.progress,
                             label=f"{claim.claim_id} · {plan.label}")
    analysis = reading.analyse(results)
    if analysis.claimed_epsilon is not None:
        reading = replace(reading, claimed_epsilon=float(analysis.claimed_epsilon))
    bounds, not_run = _bounds(reading, analysis, settings, power_seed=base_seed)
    if reading.decision is not None:  # a claim that states no ε: the reading's own rule (privaudit.audit.comparison)
        verdict = reading.decision(analysis, float(settings.significance))
        if isinstance(verdict, ComparisonResult) and verdict.basis:
            analysis = replace(analysis, details={**analysis.details, "decision": dict(verdict.basis)})
    else:
        verdict = decide(reading.claimed_epsilon, reading.claimed_delta, bounds, analysis.evidence,
                         min_power=settings.min_power)
        if verdict.verdict is Verdict.INCONCLUSIVE and not bounds:
            verdict = replace(verdict, reason=f"{verdict.reason}; {_accounting_bracket(analysis, reading.claimed_epsilon)}")
    metrics = _metrics(analysis, settings, base_seed)
    return ReadingOutcome(reading, analysis, bounds, verdict, metrics, len(results), time.perf_counter() - started,
                          not_run)


def run_claim(claim_id: str, settings: AuditSettings | None = None, **options: Any) -> ClaimAudit:
    """Audit one registered claim; writes ``<out>/<claim_id>.json`` when ``settings.out`` is set.

    ``options`` are :class:`AuditSettings` fields (a shortcut for ``run_claim(id, AuditSettings(...))``).
    """
    settings = settings or AuditSettings(**options)
    claim = get_claim(claim_id)
    started = time.perf_counter()
    trials = settings.trials or claim.default_trials
    parts = claim.recipe_function()(claim, trials)
    outcomes, details, notes = [], {}, []
    for part in parts:
        if isinstance(part, ClaimDetails):
            details.update(part.details)
            notes.extend(part.notes)
        else:
            outcomes.append(run_reading(claim, part, settings))
    verdict, reason, validity_notes = overall_verdict(outcomes)
    audit = ClaimAudit(claim, outcomes, details, verdict, reason, [*notes, *validity_notes], settings,
                       time.perf_counter() - started, by_role=verdicts_by_role(outcomes))
    if settings.out is not None:
        audit.path = folder_for(settings.out, "audit").save_with(f"{claim.claim_id}.json",
                                                                 lambda path: write_claim_result(audit, path))
    return audit


def write_claim_result(audit: ClaimAudit, path: Path) -> Path:
    s = audit.settings or AuditSettings()
    config = {"claim_id": audit.claim.claim_id, "trials_per_reading": s.trials or audit.claim.default_trials,
              "significance": s.significance, "seed": s.seed, "executor": s.executor, "workers": s.workers,
              "power_trials": s.power_trials, "power_factor": s.power_factor, "min_power": s.min_power,
              # where the trials' federations trained (``privaudit audit --device``): results repeat per seed and device
              "device": describe_device(resolve_device(default_device()))}
    title = f"{audit.claim.claim_id}: {audit.basis}"
    result = make_result("claim-audit", title, audit.data(), config, seed=s.seed)
    return write_result(path, result)


@dataclass
class SuiteAudit:
    name: str
    audits: list[ClaimAudit]


def run_suite(name: str, settings: AuditSettings | None = None, **options: Any) -> SuiteAudit:
    """Run every claim of suite ``name`` at the suite's trial counts (``settings.trials`` overrides them)."""
    settings = settings or AuditSettings(**options)
    audits = [run_claim(entry.claim_id, replace(settings, trials=settings.trials or entry.trials))
              for entry in get_suite(name)]
    return SuiteAudit(name, audits)
