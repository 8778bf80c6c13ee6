"""Range checks at the API boundary: each returns the value converted, or raises one clear line.

Every public entry point validates its inputs once, here, and raises
:class:`~privaudit.errors.InvalidParameterError` with a sentence naming the parameter, the allowed range and the
value it got; inner code trusts what it receives. No numpy, no torch: every layer may use these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from privaudit.errors import InvalidParameterError


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}") from None


def probability_open(name: str, value: Any) -> float:
    """A number in the open interval (0, 1): a significance level α, a δ that must be positive."""
    number = _number(name, value)
    if not 0.0 < number < 1.0:
        raise InvalidParameterError(f"{name} must lie in (0, 1), got {value}")
    return number


def finite_positive(name: str, value: Any) -> float:
    """A finite number > 0: a noise scale, a clip norm, a canary magnitude."""
    number = _number(name, value)
    if not (math.isfinite(number) and number > 0.0):
        raise InvalidParameterError(f"{name} must be a finite positive number, got {value}")
    return number


def finite_non_negative(name: str, value: Any) -> float:
    """A finite number ≥ 0: a claimed ε."""
    number = _number(name, value)
    if not (math.isfinite(number) and number >= 0.0):
        raise InvalidParameterError(f"{name} must be a finite number ≥ 0, got {value}")
    return number


def integer_at_least(name: str, value: Any, minimum: int) -> int:
    """An int (never a bool or a float) ≥ ``minimum``: counts of canaries, trials, rounds, clients."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    if value < minimum:
        raise InvalidParameterError(f"{name} must be an integer ≥ {minimum}, got {value}")
    return value


def spelling(value: Any) -> str:
    """The one spelling of an enum value at the boundary: stripped, lower case, ``-`` between words (``add_remove``,
    ``Add-Remove`` and ``add-remove`` are one name)."""
    return str(value).strip().lower().replace("_", "-")


def parse_enum(enum: type[Enum], value: Any, what: str, aliases: Mapping[str, Enum] | None = None) -> Any:
    """The member of ``enum`` that ``value`` names (a member, or its value in any case, ``_`` or ``-``, or one of the
    ``aliases``, keyed by :func:`spelling`); else one :class:`~privaudit.errors.InvalidParameterError` that lists the
    choices."""
    if isinstance(value, enum):
        return value
    key = spelling(value)
    for member in enum:
        if spelling(member.value) == key:
            return member
    if aliases and key in aliases:
        return aliases[key]
    names = [repr(spelling(m.value)) for m in enum]
    choices = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    raise InvalidParameterError(f"unknown {what} {value!r}; use {choices}")
