"""Scoring input-space canaries on a trained model (black-box, final model).

The canaries and their membership bits come from :func:`privaudit.fl.canaries.inputs.make_input_canaries`;
every canary is scored with one per-example signal of :mod:`attacks.membership.signals` (default the LOSS
signal −ℓ; mislabelled canaries that were trained on have a small loss on their wrong label). In-scores are
the inserted canaries', out-scores the others' — the pairs a one-run audit (Steinke, Nasr & Jagielski 2023)
or a multi-run audit consumes.
"""

from __future__ import annotations

from privaudit.fl.canaries.inputs import InputCanaries

from .scores import MembershipScores
from .signals import membership_signal
from .target import TargetModel


def score_input_canaries(target: TargetModel, canaries: InputCanaries, *, signal: str = "loss") -> MembershipScores:
    """Scores of the inserted (in) and held-back (out) canaries under ``target``; larger = member."""
    scores = membership_signal(signal, target.logits(canaries.x), canaries.y)
    meta = {"attack": "input-canaries", "canary_kind": canaries.kind, "signal": signal, "threat_model": "final-model",
            "canaries": canaries.count, "target": target.source}
    return MembershipScores.from_labels(scores, canaries.inserted, meta)
