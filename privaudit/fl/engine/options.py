"""Named options of algorithms and privatizers, shared by the library registry and the CLI.

An :class:`Option` is what a user can set (``--mu 0.5``): its Python name, command-line flag, type, choices
and help. Algorithm and privacy specs list their options; the ``train`` command builds its flags from every
spec, so an algorithm with its own options is added by registering a spec — never by editing the command.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from privaudit.errors import InvalidParameterError


@dataclass(frozen=True)
class Option:
    name: str
    type: type
    help: str
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def convert(self, value: Any) -> Any:
        if self.choices is not None:
            text = str(value).strip().lower()
            if text not in self.choices:
                raise InvalidParameterError(f"{self.flag} must be one of {', '.join(self.choices)}, got {value!r}")
            return text
        try:
            if self.type is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            return self.type(value)
        except (TypeError, ValueError):
            raise InvalidParameterError(f"{self.flag} must be a {self.type.__name__}, got {value!r}") from None


def take_options(given: Mapping[str, Any], options: Iterable[Option]) -> dict[str, Any]:
    """The values of ``options`` present (not ``None``) in ``given``, converted."""
    out = {}
    for option in options:
        value = given.get(option.name)
        if value is not None:
            out[option.name] = option.convert(value)
    return out


def reject_unused(given: Mapping[str, Any], used: Iterable[str], what: str, owners: Mapping[str, list[str]]) -> None:
    """Refuse options that were set but mean nothing for ``what``."""
    unused = sorted(k for k, v in given.items() if v is not None and k not in set(used))
    if unused:
        name = unused[0]
        where = owners.get(name)
        hint = f" (it applies to {', '.join(where)})" if where else ""
        raise InvalidParameterError(f"option --{name.replace('_', '-')} does not apply to {what}{hint}")
