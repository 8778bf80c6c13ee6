"""The one interface every record-level membership attack implements.

An attack is built from a frozen configuration dataclass (:mod:`attacks.membership.registry` maps names to
(class, configuration) pairs, as LeakPro's ``attack_factory_mia`` does); :meth:`MembershipAttack.run` scores
the given examples on the target model and splits the scores by the truth into a
:class:`~attacks.membership.scores.MembershipScores`.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from privaudit.errors import InvalidParameterError

from .examples import MembershipExamples
from .scores import MembershipScores
from .target import TargetModel


def config_record(config: Any) -> dict[str, Any]:
    """A JSON-ready record of a configuration dataclass."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


class MembershipAttack(ABC):
    """Base class: holds the configuration; ``run`` times ``score`` and records the settings in ``meta``."""

    name: ClassVar[str]
    description: ClassVar[str]
    #: what the attack needs beyond the target's weights ("weights", "recipe" = retrains shadow federations)
    needs: ClassVar[tuple[str, ...]] = ("weights",)

    def __init__(self, config: Any) -> None:
        self.config = config

    @abstractmethod
    def score(self, target: TargetModel, examples: MembershipExamples) -> np.ndarray:
        """One score per example, larger = member."""

    def run(self, target: TargetModel, examples: MembershipExamples) -> MembershipScores:
        if len(examples) == 0:
            raise InvalidParameterError("no examples to attack")
        started = time.perf_counter()
        scores = np.asarray(self.score(target, examples), dtype=np.float64)
        if scores.shape != (len(examples),):
            raise RuntimeError(f"attack {self.name} returned {scores.shape} scores for {len(examples)} examples")
        meta = {
            "attack": self.name,
            "target": target.source,
            "config": config_record(self.config),
            "seconds": time.perf_counter() - started,
            **self.extra_meta(),
        }
        return MembershipScores.from_labels(scores, examples.member, meta)

    def extra_meta(self) -> dict[str, Any]:
        """Attack-specific facts learnt while scoring (e.g. shadow-model accuracy)."""
        return {}
