"""Label-only attack: the labels of the attacked examples from the last layer's update.

Wraps :func:`attacks.inversion.labels.infer_labels` (iDLG for one example, bias-corrected counts for a
batch) in the common attack interface so the CLI can run it by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from privaudit.errors import InvalidParameterError

from .base import InversionAttack
from .functional_model import FunctionalModel
from .labels import infer_labels
from .threat_model import InversionPayload, InversionResult


@dataclass(frozen=True)
class LabelInferenceConfig:
    """``strategy``: ``"auto"``, ``"idlg"`` or ``"bias-corrected"`` (``"given"`` would leak nothing new)."""

    strategy: str = "auto"

    def __post_init__(self) -> None:
        if self.strategy not in ("auto", "idlg", "bias-corrected"):
            raise InvalidParameterError(
                f"unknown label strategy {self.strategy!r}; choose one of: auto, idlg, bias-corrected"
            )


class LabelInferenceAttack(InversionAttack):
    """Infer labels only; ignores labels in the attacker's knowledge (it is what is being measured)."""

    name: ClassVar[str] = "label"
    description: ClassVar[str] = "label inference from the logit layer's update (iDLG, bias-corrected counts)"
    config_class: ClassVar[type] = LabelInferenceConfig

    def __init__(self, config: LabelInferenceConfig | None = None, device: torch.device | str = "cpu") -> None:
        super().__init__(config or LabelInferenceConfig(), device)

    def _run(self, payload: InversionPayload, model: FunctionalModel, generator: torch.Generator) -> InversionResult:
        strategy = self.config.strategy
        if strategy == "auto":
            strategy = "idlg" if payload.knowledge.num_examples == 1 else "bias-corrected"
        labels, rule = infer_labels(payload, model, generator, strategy)
        return InversionResult(
            attack=self.name, images=None, labels=labels.cpu(), settings={"label_strategy": rule, "labels_paired": False}
        )
