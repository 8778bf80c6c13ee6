"""One-run audit of a trained federation (``privaudit audit --checkpoint DIR --canaries m --one-run``).

Steinke, Nasr & Jagielski (2023) audit a mechanism from a *single* training run: m canaries are each included
independently with probability ½, the run is trained once, every canary is scored, and the guesses on the
most and least confident canaries give an ε lower bound (Steinke, Nasr & Jagielski, NeurIPS 2023; the f-DP variant of
Mahloujifar, Melis & Chaudhuri 2024). A checkpoint's own run holds no canaries, so the audit re-trains the
checkpoint's recipe (its manifest's ``train_spec``: same data, algorithm, privacy mechanism and seed) once with
m input canaries inserted (:mod:`privaudit.fl.canaries.inputs`), scores them on the final global model with a
black-box membership signal (:func:`attacks.membership.score_input_canaries`, LOSS by default), and bounds ε
with ``one-run`` and an f-DP one-run route at α/2 each: ``one-run-fdp`` (Gaussian curve) when the run's ledger shows
Gaussian releases without subsampling, else ``one-run-fdp-box`` (the (ε, δ)-DP curve, valid for any mechanism;
objective perturbation, for example, is pure ε-DP and Laplace-like, where the Gaussian curve would over-claim).

The claim audited is the checkpoint's own accounting (its ledger's largest per-client ε at δ) unless
``claimed_epsilon`` is given. Caveats the report states: the one-run bound's 2mδ term makes it vacuous for
large m·δ (at δ = 1e-3 even a perfect attack certifies at most ≈ 3.6, :mod:`privaudit.stats.one_run`), and a
black-box final-model attack is far from tight for DP training (Jagielski, Ullman & Oprea 2020; Nasr et al. 2021)
— an honest "inconclusive" is the usual outcome.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from privaudit.audit.verdict import decide
from privaudit.audit.workflows.checkpoint_claim import (
    CheckpointAuditOptions,
    CheckpointAuditOutcome,
    CheckpointClaim,
    checkpoint_claim,
    run_mechanism_family,
    training_recipe,
)
from privaudit.checks import integer_at_least
from privaudit.errors import InvalidParameterError
from privaudit.stats.assumptions import MechanismFamily
from privaudit.stats.claim_power import ClaimPower
from privaudit.stats.estimators import estimate
from privaudit.stats.ledger_family import LedgerFamily
from privaudit.stats.metrics import attack_metrics

RESULT_FILE = "one-run.json"


@dataclass(frozen=True)
class OneRunOptions(CheckpointAuditOptions):
    """How a one-run checkpoint audit is run: m input canaries of ``canary_kind``, scored with ``signal``."""

    canaries: int
    canary_kind: str = "mislabelled"
    signal: str = "loss"

    def __post_init__(self) -> None:
        super().__post_init__()
        integer_at_least("the number of one-run canaries", self.canaries, 2)


@dataclass(frozen=True)
class OneRunAudit(CheckpointAuditOutcome):
    canaries: int = 0
    inserted: int = 0


def _one_run_scores(spec, options: OneRunOptions, progress: bool):
    """Train the recipe once with the canaries inserted at random; their membership scores and the canaries."""
    # torch (attacks, the canary engine): only when the audit trains; privaudit.audit itself stays torch-free
    from attacks.membership import TargetModel, score_input_canaries
    from attacks.membership.target import load_training_data
    from privaudit.fl.canaries.compose import run_spec_on_dataset
    from privaudit.fl.canaries.inputs import insert_input_canaries, make_input_canaries

    dataset = load_training_data(spec)
    drawn = make_input_canaries(dataset, options.canaries, kind=options.canary_kind, seed=options.seed)
    augmented = insert_input_canaries(dataset, drawn)
    result = run_spec_on_dataset(spec, augmented, progress=progress)
    target = TargetModel.from_result(result, augmented, spec)
    in_s, out_s = score_input_canaries(target, drawn, signal=options.signal).as_pair()
    if len(in_s) == 0 or len(out_s) == 0:
        raise InvalidParameterError(f"with {options.canaries} canaries no canary landed on one side; use more canaries")
    return in_s, out_s, drawn


def bound_one_run(checkpoint: Path, claim: CheckpointClaim, in_s, out_s, options: CheckpointAuditOptions, *,
                  gaussian_routes: tuple[str, ...] = ("one-run", "one-run-fdp"), ledger: LedgerFamily | None = None):
    """The one-run routes' ε lower bounds on Bernoulli canary scores, the verdict and the attack's metrics.

    Routes: ``gaussian_routes`` (default ``one-run`` and ``one-run-fdp``) for a Gaussian ledger; else, given the run's
    own curve family ``ledger`` (:class:`privaudit.stats.ledger_family.LedgerFamily`, e.g. T subsampled Gaussian
    releases), ``one-run-fdp-ledger`` against it; else ``one-run`` and ``one-run-fdp-box``; α split equally over them
    (chosen from the ledger, before any score is seen). The ledger never certifies its own claim
    (:mod:`privaudit.audit.workflows.checkpoint_claim`): the attack decides. Returns
    ``(bounds, verdict, metrics, family, family_reason, routes)``.
    """
    family, family_reason = run_mechanism_family(checkpoint)
    if family is MechanismFamily.GAUSSIAN:
        routes = gaussian_routes
    elif ledger is not None:
        routes = ("one-run-fdp-ledger",)
        family_reason = f"{family_reason}; the run's own curve family: {ledger}"
    else:
        routes = ("one-run", "one-run-fdp-box")
    share = float(options.significance) / len(routes)
    power = ClaimPower(claim.epsilon, trials=options.power_trials, seed=options.seed, attack_optimal=options.attack_optimal)
    bounds = [estimate(name, in_s, out_s, mechanism=ledger if name == "one-run-fdp-ledger" else family,
                       design="bernoulli", significance=share, delta=claim.delta, claim=power)
              for name in routes]
    verdict = decide(claim.epsilon, claim.delta, bounds, [])
    metrics = attack_metrics(in_s, out_s, n_resamples=200, seed=options.seed).to_dict()
    metrics.pop("roc", None)
    return bounds, verdict, metrics, family, family_reason, routes


def run_one_run_audit(checkpoint: str | Path, options: OneRunOptions, *, progress: bool = True) -> OneRunAudit:
    """Re-train the checkpoint's recipe once with input canaries and bound ε in one run (see the module docstring)."""
    started = time.perf_counter()
    checkpoint = Path(checkpoint)
    spec = training_recipe(checkpoint, "one-run audit")
    claim: CheckpointClaim = checkpoint_claim(checkpoint, options.delta, options.accountant, options.claimed_epsilon)
    in_s, out_s, drawn = _one_run_scores(spec, options, progress)
    bounds, verdict, metrics, family, family_reason, routes = bound_one_run(checkpoint, claim, in_s, out_s, options)
    details = {"canary_kind": drawn.kind, "signal": options.signal, "train_spec": spec.to_dict(),
               "mechanism_family": family.value, "mechanism_family_reason": family_reason,
               "routes": list(routes), "design": "bernoulli: each canary inserted independently with probability ½",
               "recorded_ledger": claim.recorded_dict(),
               "note": "one-run bounds lose power as m·δ grows (the 2mδ term); see each bound's ceiling",
               "claim_source": claim.source}
    inserted = int(drawn.inserted.sum())
    attack = {"name": "input canaries, one run (Steinke, Nasr & Jagielski 2023)",
              "threat_model": "black-box: the final global model", "canaries": options.canaries,
              "inserted": inserted, "metrics": metrics}
    return OneRunAudit(claim_id=f"checkpoint:{checkpoint.name}", where=f"one-run audit of {checkpoint}", claim=claim,
                       bounds=bounds, verdict=verdict, attack=attack, details=details, notes=[],
                       seconds=time.perf_counter() - started, canaries=options.canaries, inserted=inserted)
