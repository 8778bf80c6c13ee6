"""What a checkpoint audit tests: the trained federation's recipe, its ledger, and the (ε, δ) claim.

Both checkpoint workflows (:mod:`~privaudit.audit.workflows.checkpoint_one_run` and
:mod:`~privaudit.audit.workflows.gradient_canaries`) re-train the checkpoint's recipe (its manifest's
``train_spec``) with canaries, and audit either the ledger's own claim (its largest per-client ε at δ) or a claim
the user gives. When the claim *is* the ledger's ε, the ledger cannot also certify it — that would make
"consistent" true by construction — so it stays in the result as context and only the attack decides.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from privaudit.audit.verdict import AccountingEvidence, VerdictResult
from privaudit.checks import finite_non_negative, integer_at_least, probability_open
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.checkpoint import read_ledger, read_manifest
from privaudit.stats.assumptions import MechanismFamily, family_of_mechanisms
from privaudit.stats.estimates import LowerBound

LEDGER_LABEL = "the checkpoint's ledger: largest per-client ε"


def training_recipe(checkpoint: Path, audit: str):
    """The checkpoint's :class:`~privaudit.fl.run.TrainSpec`; an audit that re-trains needs one."""
    # torch (attacks.membership): a checkpoint audit that re-trains needs it; privaudit.audit itself stays torch-free
    from attacks.membership import train_spec_from_dict

    recipe = read_manifest(checkpoint).get("train_spec")
    if not isinstance(recipe, dict):
        raise CheckpointError(f"{checkpoint} records no training recipe (train_spec): a {audit} re-trains the "
                              "checkpoint with canaries, so it needs a run made by 'privaudit train'")
    return train_spec_from_dict(recipe)


def ledger_assumptions_hold(events) -> bool:
    """A ledger certifies only if every event is valid and none rests on an assumption recorded as unverified
    (e.g. Upcycled-FL Thm 6.2's sensitivity τ/|D| for SGD-trained models, which the engine records with that word)."""
    return all(e.valid for e in events) and not any("unverified" in a for e in events for a in e.assumptions)


def run_mechanism_family(checkpoint: Path) -> tuple[MechanismFamily, str]:
    """The mechanism family of a trained run, from its ledger (:func:`privaudit.stats.assumptions.family_of_mechanisms`).

    A run with an invalid event (e.g. a clip bound that depends on the data) is ``any``: its noise scale is not fixed.
    """
    events = read_ledger(checkpoint).events
    if any(not e.valid for e in events):
        return MechanismFamily.ANY, "some releases' accounting assumptions fail, so their trade-off curve is unknown"
    return family_of_mechanisms([e.mechanism for e in events])


@dataclass(frozen=True, kw_only=True)
class CheckpointAuditOptions:
    """What every checkpoint audit takes: the claim's δ (and ε, else the ledger's), α, the accountant and seeds.

    ``attack_optimal`` is the auditor's declaration that the attack is optimal for the run's (Gaussian) mechanism —
    its score a strictly increasing function of the privacy loss of a worst-case pair of neighbours. Only then can
    the attack's silence make the claim "consistent" (:func:`privaudit.audit.verdict.decide`); it is recorded in the
    result and never set by privaudit itself. Validated when built, so a bad value is refused before any training.
    """

    delta: float = 1e-5
    significance: float = 0.05
    claimed_epsilon: float | None = None
    accountant: str = "auto"
    seed: int = 0
    power_trials: int = 200
    attack_optimal: bool = False

    def __post_init__(self) -> None:
        probability_open("delta", self.delta)
        probability_open("significance", self.significance)
        if self.claimed_epsilon is not None:
            finite_non_negative("the claimed ε", self.claimed_epsilon)
        integer_at_least("power trials", self.power_trials, 1)
        if not isinstance(self.attack_optimal, bool):
            raise InvalidParameterError(f"attack_optimal must be True or False, got {self.attack_optimal!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CheckpointClaim:
    """The claim under audit: ``epsilon`` at ``delta``, from the ledger (``recorded`` is its summary) or the user."""

    checkpoint: Path
    epsilon: float
    delta: float
    events: tuple
    recorded: Any = None  # the ledger's summary when the claim is the ledger's own ε

    @property
    def from_ledger(self) -> bool:
        return self.recorded is not None

    @property
    def source(self) -> str:
        return ("the checkpoint's ledger (so the verdict rests on the attack alone)" if self.from_ledger
                else "--claimed-epsilon")

    def ledger_evidence(self) -> list[AccountingEvidence]:
        """The ledger's ε as accounting evidence (empty when the claim was given by the user)."""
        if not self.from_ledger:
            return []
        assumptions = tuple(dict.fromkeys(a for e in self.events for a in e.assumptions))
        return [AccountingEvidence(label=LEDGER_LABEL, accountant=self.recorded.accountant, upper=self.recorded.max_epsilon,
                                   implementation=True, assumptions_hold=ledger_assumptions_hold(self.events),
                                   assumptions=assumptions[:12])]

    def recorded_dict(self) -> dict[str, Any] | None:
        if not self.from_ledger:
            return None
        return {"accountant": self.recorded.accountant, "max_epsilon": self.recorded.max_epsilon,
                "all_valid": self.recorded.all_valid}


def checkpoint_claim(checkpoint: Path, delta: float, accountant: str, claimed_epsilon: float | None) -> CheckpointClaim:
    """The claim to audit: ``claimed_epsilon`` when given, else the ledger's largest per-client ε at ``delta``."""
    ledger = read_ledger(checkpoint)
    events = tuple(ledger.events)
    if claimed_epsilon is not None:
        claimed = finite_non_negative("the claimed ε", claimed_epsilon)
        return CheckpointClaim(checkpoint, claimed, float(delta), events)
    if not any(e.has_guarantee for e in events):  # no events, or only non-private releases (ε = ∞)
        raise InvalidParameterError(f"{checkpoint} records no privacy mechanism, so there is no claim to audit; "
                                    "give --claimed-epsilon")
    summary = ledger.summary(delta, accountant)
    if not math.isfinite(summary.max_epsilon):
        raise InvalidParameterError(f"{checkpoint}'s ledger gives ε = ∞ at δ = {delta:g}; give --claimed-epsilon")
    return CheckpointClaim(checkpoint, summary.max_epsilon, float(delta), events, summary)


@dataclass(frozen=True)
class CheckpointAuditOutcome:
    """The parts every checkpoint audit reports, as the ``claim-audit`` result data the report renders."""

    claim_id: str
    where: str
    claim: CheckpointClaim
    bounds: list[LowerBound]
    verdict: VerdictResult
    attack: dict[str, Any]
    details: dict[str, Any]
    notes: list[str]
    seconds: float

    @property
    def claimed_epsilon(self) -> float:
        return self.claim.epsilon

    @property
    def delta(self) -> float:
        return self.claim.delta

    def data(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "paper": None,
            "where": self.where,
            "statement": "the trained federation satisfies the (ε, δ) its ledger records",
            "claimed": {"epsilon": self.claim.epsilon, "delta": self.claim.delta},
            "accountant": [e.to_dict() for e in self.claim.ledger_evidence()],
            "lower_bounds": [b.to_dict() for b in self.bounds],
            "verdict": self.verdict.verdict.value,
            "reason": self.verdict.reason,
            "refuted_by": list(self.verdict.refuted_by),
            "family_confidence": self.verdict.family_confidence,
            "notes": [*self.verdict.notes, *self.notes],
            "attack": self.attack,
            "details": self.details,
            "trials": 1,
            "seconds": self.seconds,
        }
