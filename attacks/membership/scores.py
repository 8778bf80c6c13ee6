"""What membership attacks return: immutable in/out score arrays (larger = member) and per-round observations.

The layering follows tensorflow/privacy's membership-inference ``data_structures`` (immutable inputs and
results, presentation elsewhere). Scores are handed to the auditor (:mod:`privaudit.audit`) unchanged: the
*in* scores belong to examples, canaries or releases that were part of training, the *out* scores to those
that were not, and a larger score always means "member". Nothing here computes ε.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attacks.metrics import roc_auc, tpr_at_fpr
from privaudit.errors import InvalidParameterError
from privaudit.output_folder import write_file
from privaudit.stats.scores import AuditScores, score_array


@dataclass(frozen=True, eq=False)
class MembershipScores(AuditScores):
    """Scores of members (``in_scores``) and non-members (``out_scores``); larger means "member".

    The auditor's own score type (:class:`privaudit.stats.scores.AuditScores`, validated by the same
    :func:`~privaudit.stats.scores.score_array`) with ``meta``: JSON-ready facts about how the scores were made
    (attack, signal, threat model, the theoretical μ of a mechanism-level test, ...). Arrays are float64,
    one-dimensional, finite, read-only; a side may be empty (e.g. a round in which no canary was inserted),
    :meth:`is_complete` says so.
    """

    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "in_scores", score_array("member scores", self.in_scores, allow_empty=True))
        object.__setattr__(self, "out_scores", score_array("non-member scores", self.out_scores, allow_empty=True))
        object.__setattr__(self, "meta", dict(self.meta))

    @classmethod
    def from_labels(cls, scores: Any, member: Any, meta: Mapping[str, Any] | None = None) -> MembershipScores:
        """Split one score array by a boolean membership array."""
        values = np.asarray(scores, dtype=np.float64).ravel()
        bits = np.asarray(member, dtype=bool).ravel()
        if values.shape != bits.shape:
            raise InvalidParameterError(f"{values.size} scores for {bits.size} membership labels")
        return cls(values[bits], values[~bits], meta or {})

    def is_complete(self) -> bool:
        """Both sides hold at least one score (what the auditor needs)."""
        return self.n_in > 0 and self.n_out > 0

    def as_pair(self) -> tuple[np.ndarray, np.ndarray]:
        """``(in_scores, out_scores)``, the auditor's input boundary."""
        return self.in_scores, self.out_scores

    def with_meta(self, **extra: Any) -> MembershipScores:
        return MembershipScores(self.in_scores, self.out_scores, {**self.meta, **extra})

    def summary(self) -> dict[str, Any]:
        """AUC and TPR at 0.1 % / 1 % FPR of the empirical ROC (plain estimates; intervals are the auditor's)."""
        if not self.is_complete():
            raise InvalidParameterError("a ROC needs at least one member and one non-member score")
        return {
            "n_in": self.n_in,
            "n_out": self.n_out,
            "auc": roc_auc(self.in_scores, self.out_scores),
            "tpr_at_fpr": {"0.001": tpr_at_fpr(self.in_scores, self.out_scores, 1e-3),
                           "0.01": tpr_at_fpr(self.in_scores, self.out_scores, 1e-2)},
        }

    def save_npz(self, path: str | Path) -> Path:
        """Write ``in_scores`` and ``out_scores`` to an ``.npz`` file (``meta`` goes to the result JSON)."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, in_scores=self.in_scores, out_scores=self.out_scores)
        return write_file(path, buffer.getvalue())  # atomically; a failure names the file

    @classmethod
    def load_npz(cls, path: str | Path, meta: Mapping[str, Any] | None = None) -> MembershipScores:
        with np.load(Path(path)) as data:
            return cls(data["in_scores"], data["out_scores"], meta or {})


@dataclass(frozen=True, eq=False)
class RoundObservations:
    """Per-round white-box observations: one :class:`MembershipScores` per training round.

    Round t's scores come from that round's release only, so the auditor can bound μ_t per round and compose
    μ_total = √(Σ μ_t²) (Nasr et al. 2023; ``privaudit.audit.compose_mu``) where its assumptions hold.
    ``rounds`` are the iteration numbers. :meth:`pairs` drops rounds with an empty side — which rounds those
    are depends on the membership bits only, never on the scores.
    """

    rounds: tuple[int, ...]
    per_round: tuple[MembershipScores, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.rounds) != len(self.per_round):
            raise InvalidParameterError("one score set per round is needed")
        object.__setattr__(self, "meta", dict(self.meta))

    def pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(in_t, out_t), ...]`` for the rounds with both sides (``gdp_rounds_lower_bound``'s input)."""
        return [s.as_pair() for s in self.per_round if s.is_complete()]

    def complete_rounds(self) -> tuple[int, ...]:
        return tuple(r for r, s in zip(self.rounds, self.per_round, strict=True) if s.is_complete())

    def pooled(self) -> MembershipScores:
        """All rounds' observations in one in/out pair (valid for the auditor only if rounds are exchangeable)."""
        ins = [s.in_scores for s in self.per_round]
        outs = [s.out_scores for s in self.per_round]
        return MembershipScores(np.concatenate(ins) if ins else [], np.concatenate(outs) if outs else [],
                                {**self.meta, "pooled_rounds": len(self.rounds)})


def gaussian_separation(scores: MembershipScores) -> float:
    """(mean_in − mean_out) / pooled std: the μ of two equal-variance Gaussians fitted to the scores.

    A moment estimate used to compare a mechanism-level test with its theory; not a lower bound.
    """
    if scores.n_in < 2 or scores.n_out < 2:
        raise InvalidParameterError("the separation needs at least two scores per side")
    pooled = math.sqrt((np.var(scores.in_scores, ddof=1) + np.var(scores.out_scores, ddof=1)) / 2)
    return float((scores.in_scores.mean() - scores.out_scores.mean()) / pooled) if pooled > 0 else math.inf


def concatenate(parts: Sequence[MembershipScores], meta: Mapping[str, Any] | None = None) -> MembershipScores:
    """Several score sets as one (e.g. every client's scores in the client-release threat model)."""
    if not parts:
        raise InvalidParameterError("nothing to concatenate")
    return MembershipScores(np.concatenate([p.in_scores for p in parts]), np.concatenate([p.out_scores for p in parts]),
                            meta if meta is not None else dict(parts[0].meta))
