"""Helpers shared by CLI commands: error conversion and JSON output."""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from privaudit.errors import PrivauditError

# typer >= 0.29 vendors click as ``typer._click``; older releases depend on click itself.
click_exceptions = importlib.import_module(
    "typer._click.exceptions" if importlib.util.find_spec("typer._click") else "click.exceptions"
)

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> typer.Exit:
    """Print one error line on stderr and return the exit-2 exception to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code=2)


def cli_errors(func: F) -> F:
    """Turn :class:`PrivauditError` raised by the library into one stderr line and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except PrivauditError as exc:
            raise fail(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def json_safe(value: Any) -> Any:
    """Make a result JSON-serialisable: infinities become the string ``"inf"``, NaN is refused."""
    if isinstance(value, float):
        if math.isnan(value):
            raise ValueError("refusing to serialise NaN")
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(json_safe(obj), indent=2, sort_keys=False, ensure_ascii=False) + "\n")
