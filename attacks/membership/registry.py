"""Name → record-level membership attack, so the CLI lists and builds attacks without if-chains.

Each entry pairs an attack class with its frozen configuration dataclass (the pattern of LeakPro's
``attack_factory_mia``); :func:`build_attack` turns keyword options into that configuration and rejects
unknown names and options with one-line :class:`~privaudit.errors.InvalidParameterError` messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from privaudit.errors import InvalidParameterError

from .base import MembershipAttack
from .lira_attack import LiRAAttack, LiRAConfig
from .threshold_attacks import (
    ConfidenceAttack,
    EntropyAttack,
    LossAttack,
    ModifiedEntropyAttack,
    SignalConfig,
)

ATTACKS: dict[str, tuple[type[MembershipAttack], type]] = {
    LossAttack.name: (LossAttack, SignalConfig),
    ConfidenceAttack.name: (ConfidenceAttack, SignalConfig),
    EntropyAttack.name: (EntropyAttack, SignalConfig),
    ModifiedEntropyAttack.name: (ModifiedEntropyAttack, SignalConfig),
    LiRAAttack.name: (LiRAAttack, LiRAConfig),
}


def available_attacks() -> dict[str, str]:
    """Registered attack names with a one-line description each."""
    return {name: cls.description for name, (cls, _) in ATTACKS.items()}


def attack_options(name: str) -> dict[str, Any]:
    """The configurable options of attack ``name`` with their defaults."""
    _, config_cls = _lookup(name)
    return {f.name: f.default for f in dataclasses.fields(config_cls)}


def build_attack(name: str, **options: Any) -> MembershipAttack:
    """Instantiate attack ``name`` with ``options`` overriding its configuration defaults."""
    attack_cls, config_cls = _lookup(name)
    known = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(options) - known)
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise InvalidParameterError(f"attack {name!r} has no option {', '.join(map(repr, unknown))}; options: {listed}")
    return attack_cls(config_cls(**options))


def _lookup(name: str) -> tuple[type[MembershipAttack], type]:
    try:
        return ATTACKS[str(name).strip().lower()]
    except KeyError:
        raise InvalidParameterError(f"unknown membership attack {name!r}; choose one of: {', '.join(ATTACKS)}") from None
