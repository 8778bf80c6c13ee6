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


def parse_attack_options(name: str, pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["key=value", ...]`` → typed options of attack ``name`` (the CLI's ``--option``).

    Each value is read as its field's default type: ``true``/``false`` for booleans, integers, floats, text; a field
    whose default is ``None`` takes a number, ``true``/``false``, ``none`` or text. Unknown keys and unreadable values
    are one :class:`InvalidParameterError` line each; the configuration's own checks run when the attack is built.
    """
    _, config_cls = _lookup(name)
    defaults = {f.name: f.default for f in dataclasses.fields(config_cls)}
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key, text = key.strip().replace("-", "_"), text.strip()
        if not sep or not key:
            raise InvalidParameterError(f"--option takes KEY=VALUE, got {pair!r}")
        if key not in defaults:
            raise InvalidParameterError(f"attack {name!r} has no option {key!r}; options: {', '.join(sorted(defaults))}")
        options[key] = _typed_value(key, text, defaults[key])
    return options


def _typed_value(key: str, text: str, default: Any) -> Any:
    lowered = text.lower()
    try:
        if isinstance(default, bool):
            if lowered not in ("true", "false"):
                raise ValueError
            return lowered == "true"
        if isinstance(default, int):
            return int(text)
        if isinstance(default, float):
            return float(text)
        if isinstance(default, str):
            return text
        if lowered in ("none", "true", "false"):
            return {"none": None, "true": True, "false": False}[lowered]
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text
    except ValueError:
        kind = type(default).__name__
        raise InvalidParameterError(f"option {key!r} takes a {kind} (default {default!r}), got {text!r}") from None


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
