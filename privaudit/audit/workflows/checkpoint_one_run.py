"""One-run audit of a trained federation (``privaudit audit --checkpoint DIR --canaries m --one-run``).

Steinke, Nasr & Jagielski (2023) audit a mechanism from a *single* training run: m canaries are each included
independently with probability ½, the run is trained once, every canary is scored, and the guesses on the
most and least confident canaries give an ε lower bound (spec ``auditing.md`` §2.5; the f-DP variant of
Mahloujifar et al. 2024, §2.6). A checkpoint's own run holds no canaries, so the audit re-trains the
checkpoint's recipe (its manifest's ``train_spec``: same data, algorithm, privacy mechanism and seed) once with
m input canaries inserted (:mod:`privaudit.fl.canaries.inputs`), scores them on the final global model with a
black-box membership signal (:func:`attacks.membership.score_input_canaries`, LOSS by default), and bounds ε
with ``one-run`` and an f-DP one-run route at α/2 each: ``one-run-fdp`` (Gaussian curve) when the run's ledger shows
Gaussian releases without subsampling, else ``one-run-fdp-box`` (the (ε, δ)-DP curve, valid for any mechanism;
objective perturbation, for example, is pure ε-DP and Laplace-like, where the Gaussian curve would over-claim).

The claim audited is the checkpoint's own accounting (its ledger's largest per-client ε at δ) unless
``claimed_epsilon`` is given. Caveats the report states: the one-run bound's 2mδ term makes it vacuous for
large m·δ (at δ = 1e-3 even a perfect attack certifies at most ≈ 3.6, spec §5.3), and a black-box final-model
attack is far from tight for DP training (§4) — an honest "inconclusive" is the usual outcome.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.audit.verdict import AccountingEvidence, VerdictResult, decide
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.stats.assumptions import MechanismFamily, family_of_mechanisms
from privaudit.stats.estimates import LowerBound
from privaudit.stats.estimators import estimate
from privaudit.stats.metrics import attack_metrics


@dataclass
class OneRunAudit:
    checkpoint: Path
    canaries: int
    inserted: int
    claimed_epsilon: float
    delta: float
    bounds: list[LowerBound]
    evidence: list[AccountingEvidence]
    verdict: VerdictResult
    metrics: dict[str, Any]
    details: dict[str, Any]
    seconds: float
    path: Path | None = None

    @property
    def claim_id(self) -> str:
        return f"checkpoint:{self.checkpoint.name}"

    def data(self) -> dict[str, Any]:
        attack = {"name": "input canaries, one run (Steinke, Nasr & Jagielski 2023)",
                  "threat_model": "black-box: the final global model", "canaries": self.canaries,
                  "inserted": self.inserted, "metrics": self.metrics}
        return checkpoint_claim_data(self.claim_id, f"one-run audit of {self.checkpoint}", self.claimed_epsilon, self.delta,
                                     self.evidence, self.bounds, self.verdict, [], attack, self.details, self.seconds)


def checkpoint_claim_data(claim_id: str, where: str, claimed_epsilon: float, delta: float,
                          evidence: list[AccountingEvidence], bounds: list[LowerBound], verdict: VerdictResult,
                          notes: list[str], attack: dict[str, Any], details: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The ``claim-audit`` result data of a checkpoint audit (one run): the claim is the ledger's (or the given) ε."""
    return {
        "claim_id": claim_id,
        "paper": None,
        "where": where,
        "statement": "the trained federation satisfies the (ε, δ) its ledger records",
        "claimed": {"epsilon": claimed_epsilon, "delta": delta},
        "accountant": [e.to_dict() for e in evidence],
        "lower_bounds": [b.to_dict() for b in bounds],
        "verdict": verdict.verdict.value,
        "reason": verdict.reason,
        "refuted_by": list(verdict.refuted_by),
        "family_confidence": verdict.family_confidence,
        "notes": [*verdict.notes, *notes],
        "attack": attack,
        "details": details,
        "trials": 1,
        "seconds": seconds,
    }


def _recipe(checkpoint: Path):
    from attacks.membership import train_spec_from_dict
    from privaudit.fl.engine.checkpoint import read_manifest

    manifest = read_manifest(checkpoint)
    recipe = manifest.get("train_spec")
    if not isinstance(recipe, dict):
        raise CheckpointError(f"{checkpoint} records no training recipe (train_spec): a one-run audit re-trains the "
                              "checkpoint with canaries, so it needs a run made by 'privaudit train'")
    return train_spec_from_dict(recipe)


def _claimed(checkpoint: Path, delta: float, accountant: str) -> tuple[float, Any]:
    from privaudit.fl.engine.checkpoint import read_ledger

    ledger = read_ledger(checkpoint)
    if not any(e.has_guarantee for e in ledger.events):  # no events, or only non-private releases (ε = ∞)
        raise InvalidParameterError(f"{checkpoint} records no privacy mechanism, so there is no claim to audit; "
                                    "give --claimed-epsilon")
    summary = ledger.summary(delta, accountant)
    if not math.isfinite(summary.max_epsilon):
        raise InvalidParameterError(f"{checkpoint}'s ledger gives ε = ∞ at δ = {delta:g}; give --claimed-epsilon")
    return summary.max_epsilon, summary


def run_mechanism_family(checkpoint: Path) -> tuple[MechanismFamily, str]:
    """The mechanism family of a trained run, from its ledger (:func:`privaudit.stats.assumptions.family_of_mechanisms`).

    A run with an invalid event (e.g. a clip bound that depends on the data) is ``any``: its noise scale is not fixed.
    """
    from privaudit.fl.engine.checkpoint import read_ledger

    events = read_ledger(checkpoint).events
    if any(not e.valid for e in events):
        return MechanismFamily.ANY, "some releases' accounting assumptions fail, so their trade-off curve is unknown"
    return family_of_mechanisms([e.mechanism for e in events])


def _assumptions_hold(events) -> bool:
    """A ledger certifies only if every event is valid and none rests on an assumption recorded as unverified
    (e.g. Thm 6.2's sensitivity τ/|D| for SGD-trained models, spec U2, which the engine records with that word)."""
    return all(e.valid for e in events) and not any("unverified" in a for e in events for a in e.assumptions)


def run_one_run_audit(
    checkpoint: str | Path,
    canaries: int,
    *,
    out: str | Path | None = None,
    delta: float = 1e-5,
    significance: float = 0.05,
    claimed_epsilon: float | None = None,
    accountant: str = "auto",
    canary_kind: str = "mislabelled",
    signal: str = "loss",
    seed: int = 0,
    power_trials: int = 200,
    progress: bool = True,
) -> OneRunAudit:
    """Re-train the checkpoint's recipe once with ``canaries`` input canaries and bound ε in one run."""
    if isinstance(canaries, bool) or not isinstance(canaries, int) or canaries < 2:
        raise InvalidParameterError(f"a one-run audit needs at least 2 canaries, got {canaries!r}")
    if not 0.0 < float(delta) < 1.0:
        raise InvalidParameterError(f"delta must lie in (0, 1), got {delta}")
    if not 0.0 < float(significance) < 1.0:
        raise InvalidParameterError(f"significance must lie in (0, 1), got {significance}")
    started = time.perf_counter()
    checkpoint = Path(checkpoint)
    spec = _recipe(checkpoint)
    if claimed_epsilon is None:
        claimed, recorded = _claimed(checkpoint, float(delta), accountant)
    else:
        claimed, recorded = float(claimed_epsilon), None
        if not (math.isfinite(claimed) and claimed >= 0):
            raise InvalidParameterError(f"the claimed ε must be a finite number ≥ 0, got {claimed_epsilon}")

    from attacks.membership import TargetModel, score_input_canaries
    from attacks.membership.target import load_training_data
    from privaudit.fl.canaries.compose import run_spec_on_dataset
    from privaudit.fl.canaries.inputs import insert_input_canaries, make_input_canaries

    dataset = load_training_data(spec)
    drawn = make_input_canaries(dataset, canaries, kind=canary_kind, seed=seed)
    augmented = insert_input_canaries(dataset, drawn)
    result = run_spec_on_dataset(spec, augmented, progress=progress)
    target = TargetModel.from_result(result, augmented, spec)
    scores = score_input_canaries(target, drawn, signal=signal)
    in_s, out_s = scores.as_pair()
    if len(in_s) == 0 or len(out_s) == 0:
        raise InvalidParameterError(f"with {canaries} canaries no canary landed on one side; use more canaries")
    family, family_reason = run_mechanism_family(checkpoint)
    routes = ("one-run", "one-run-fdp" if family is MechanismFamily.GAUSSIAN else "one-run-fdp-box")
    share = float(significance) / 2
    bounds = [estimate(name, in_s, out_s, mechanism=family, design="bernoulli", significance=share, delta=float(delta),
                       claimed_epsilon=claimed, power_trials=int(power_trials), power_seed=seed) for name in routes]
    evidence = []
    if recorded is not None:
        from privaudit.fl.engine.checkpoint import read_ledger

        events = read_ledger(checkpoint).events
        assumptions = tuple(dict.fromkeys(a for e in events for a in e.assumptions))
        evidence.append(AccountingEvidence(
            label="the checkpoint's ledger: largest per-client ε", accountant=recorded.accountant, upper=recorded.max_epsilon,
            implementation=True, assumptions_hold=_assumptions_hold(events), assumptions=assumptions[:12]))
    # When the claim *is* the ledger's ε, the ledger cannot also certify it (that would make "consistent" true by
    # construction): only the attack decides, and the ledger stays in the result as context.
    verdict = decide(claimed, float(delta), bounds, [] if recorded is not None else evidence)
    metrics = attack_metrics(in_s, out_s, n_resamples=200, seed=seed).to_dict()
    metrics.pop("roc", None)
    details = {"canary_kind": drawn.kind, "signal": signal, "train_spec": spec.to_dict(),
               "mechanism_family": family.value, "mechanism_family_reason": family_reason,
               "routes": list(routes), "design": "bernoulli: each canary inserted independently with probability ½",
               "recorded_ledger": None if recorded is None else {"accountant": recorded.accountant,
                                                                  "max_epsilon": recorded.max_epsilon,
                                                                  "all_valid": recorded.all_valid},
               "note": "one-run bounds lose power as m·δ grows (the 2mδ term); see each bound's ceiling",
               "claim_source": ("the checkpoint's ledger (so the verdict rests on the attack alone)" if recorded is not None
                                else "--claimed-epsilon")}
    audit = OneRunAudit(checkpoint, canaries, int(drawn.inserted.sum()), claimed, float(delta), bounds, evidence, verdict,
                        metrics, details, time.perf_counter() - started)
    if out is not None:
        from privaudit.report.results import make_result, write_result

        config = {"checkpoint": str(checkpoint), "canaries": canaries, "delta": float(delta), "significance": float(significance),
                  "canary_kind": canary_kind, "signal": signal, "seed": seed, "accountant": accountant}
        audit.path = write_result(Path(out) / "one-run.json",
                                  make_result("claim-audit", f"{audit.claim_id}: {verdict.verdict.value}", audit.data(), config, seed=seed))
    return audit
