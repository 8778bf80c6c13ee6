"""Name → attack registry, so the CLI can list and build attacks without if-chains.

Each entry pairs an attack class with its frozen configuration dataclass. :func:`build_attack` turns
keyword options into that configuration, rejecting unknown names and options with one-line
:class:`~privaudit.errors.InvalidParameterError` messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from privaudit.errors import InvalidParameterError

from .adaptive_mg import AdaptiveMGAttack, AdaptiveMGConfig
from .analytic import AnalyticAttack, AnalyticConfig
from .base import InversionAttack
from .dlg import DLGAttack, DLGConfig
from .imprint import ImprintAttack, ImprintConfig
from .inverting_gradients import InvertingGradientsAttack, InvertingGradientsConfig
from .label_attack import LabelInferenceAttack, LabelInferenceConfig

ATTACKS: dict[str, tuple[type[InversionAttack], type]] = {
    AnalyticAttack.name: (AnalyticAttack, AnalyticConfig),
    LabelInferenceAttack.name: (LabelInferenceAttack, LabelInferenceConfig),
    DLGAttack.name: (DLGAttack, DLGConfig),
    InvertingGradientsAttack.name: (InvertingGradientsAttack, InvertingGradientsConfig),
    AdaptiveMGAttack.name: (AdaptiveMGAttack, AdaptiveMGConfig),
    ImprintAttack.name: (ImprintAttack, ImprintConfig),
}


def available_attacks() -> dict[str, str]:
    """Registered attack names with a one-line description each."""
    return {name: cls.description for name, (cls, _) in ATTACKS.items()}


def attack_options(name: str) -> dict[str, Any]:
    """The configurable options of attack ``name`` with their defaults."""
    _, config_cls = _lookup(name)
    return {f.name: f.default for f in dataclasses.fields(config_cls)}


def build_attack(name: str, *, device: torch.device | str = "cpu", **options: Any) -> InversionAttack:
    """Instantiate attack ``name`` with ``options`` overriding its configuration defaults."""
    attack_cls, config_cls = _lookup(name)
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidParameterError(
            f"attack {name!r} has no option {', '.join(map(repr, unknown))}; options: {', '.join(sorted(known))}"
        )
    return attack_cls(config_cls(**options), device)


def _lookup(name: str) -> tuple[type[InversionAttack], type]:
    try:
        return ATTACKS[name]
    except KeyError:
        raise InvalidParameterError(f"unknown attack {name!r}; choose one of: {', '.join(ATTACKS)}") from None
