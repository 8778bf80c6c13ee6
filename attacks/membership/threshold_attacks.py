"""Attacks that threshold one per-example signal of the target model (no shadow models).

LOSS (Yeom, Giacomelli, Fredrikson & Jha 2018), confidence and entropy (Salem et al. 2019), modified
entropy (Song & Mittal 2021). Each returns the signal of :mod:`attacks.membership.signals` oriented so that
larger means member; the threshold is the auditor's choice (a strategy fixed in advance), not the attack's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import MembershipAttack
from .examples import MembershipExamples
from .signals import membership_signal
from .target import TargetModel


@dataclass(frozen=True)
class SignalConfig:
    """Signal attacks have no options."""


class SignalAttack(MembershipAttack):
    signal: ClassVar[str]

    def score(self, target: TargetModel, examples: MembershipExamples) -> np.ndarray:
        return membership_signal(self.signal, target.logits(examples.x), examples.y)

    def extra_meta(self) -> dict:
        return {"signal": self.signal}


class LossAttack(SignalAttack):
    name = "loss"
    signal = "loss"
    description = "LOSS: s = −ℓ(x, y), the negative cross-entropy (Yeom et al. 2018)"


class ConfidenceAttack(SignalAttack):
    name = "confidence"
    signal = "confidence"
    description = "confidence: s = p_y, the true-class probability (Salem et al. 2019)"


class EntropyAttack(SignalAttack):
    name = "entropy"
    signal = "entropy"
    description = "entropy: s = −H(p), confident predictions look like members (Salem et al. 2019)"


class ModifiedEntropyAttack(SignalAttack):
    name = "modified-entropy"
    signal = "modified-entropy"
    description = "modified entropy: s = −Mentr(p, y) (Song & Mittal 2021, eq. 4)"
