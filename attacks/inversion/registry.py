"""Name → attack registry, so the CLI can list and build attacks without if-chains.

The built-in attacks (:data:`BUILT_IN`) come first, then the attacks the registered papers contribute
(``PAPER.attacks``: a name → a :class:`privaudit.plugins.Ref` to an :class:`~attacks.inversion.base.InversionAttack`
subclass), imported when the registry is first read. Each attack class names its frozen configuration dataclass
(``config_class``); :func:`build_attack` turns keyword options into that configuration, rejecting unknown names and
options with one-line :class:`~privaudit.errors.InvalidParameterError` messages.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from privaudit import plugins
from privaudit.errors import InvalidParameterError

from .analytic import AnalyticAttack
from .base import InversionAttack
from .dlg import DLGAttack
from .imprint import ImprintAttack
from .inverting_gradients import InvertingGradientsAttack
from .label_attack import LabelInferenceAttack

#: The attacks of this package, in the order they are listed.
BUILT_IN: tuple[type[InversionAttack], ...] = (
    AnalyticAttack, LabelInferenceAttack, DLGAttack, InvertingGradientsAttack, ImprintAttack,
)


def registered_attacks() -> dict[str, type[InversionAttack]]:
    """Every attack by name: the built-in ones, then the registered papers' (one clear error for a name used twice or
    a reference that is not an :class:`InversionAttack` subclass)."""
    found: dict[str, type[InversionAttack]] = {cls.name: cls for cls in BUILT_IN}
    for name, (paper, ref) in plugins.collected("attacks").items():
        cls = ref.load()
        if not (isinstance(cls, type) and issubclass(cls, InversionAttack)) or cls.name != name:
            raise InvalidParameterError(f"paper {paper.key!r} registers attack {name!r} as {ref.target}, which is not an "
                                        f"InversionAttack subclass named {name!r}")
        if name in found:
            raise InvalidParameterError(f"paper {paper.key!r} registers the attack {name!r}, which is built in")
        found[name] = cls
    return found


def available_attacks() -> dict[str, str]:
    """Registered attack names with a one-line description each."""
    return {name: cls.description for name, cls in registered_attacks().items()}


def attack_options(name: str) -> dict[str, Any]:
    """The configurable options of attack ``name`` with their defaults."""
    return {f.name: f.default for f in dataclasses.fields(_lookup(name).config_class)}


def parse_attack_options(name: str, pairs: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["key=value", ...]`` → typed options of attack ``name`` (the CLI's ``--option``).

    Each value is read as its field's default type: ``true``/``false`` for booleans, integers, floats, text; a field
    whose default is ``None`` takes a number, ``true``/``false``, ``none`` or text. Unknown keys and unreadable values
    are one :class:`InvalidParameterError` line each; the configuration's own checks run when the attack is built.
    """
    defaults = attack_options(name)
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
    attack_cls = _lookup(name)
    known = {f.name for f in dataclasses.fields(attack_cls.config_class)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise InvalidParameterError(
            f"attack {name!r} has no option {', '.join(map(repr, unknown))}; options: {', '.join(sorted(known))}"
        )
    return attack_cls(attack_cls.config_class(**options), device)


def _lookup(name: str) -> type[InversionAttack]:
    attacks = registered_attacks()
    try:
        return attacks[name]
    except KeyError:
        raise InvalidParameterError(f"unknown attack {name!r}; choose one of: {', '.join(attacks)}") from None
