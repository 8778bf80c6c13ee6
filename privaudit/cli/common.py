"""Helpers shared by CLI commands: error conversion, output folders checked before the work, JSON output.

A command that writes files checks its ``--out`` with :func:`check_out_folder` before any work starts, and writes
through :func:`save_outputs`, which never loses a finished result: when writing fails at the end anyway (the disk
filled, the folder was removed), the files go to a fresh temporary folder and the error line says where.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer

from privaudit.errors import InvalidParameterError, PrivauditError

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
    """Turn :class:`PrivauditError` raised by the library into one stderr line and exit code 2.

    An :class:`OSError` that reaches the command (a file the user named cannot be read or written) is one line
    too; a closed output pipe is left to :func:`privaudit.cli.app.main`, which treats it as success.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except PrivauditError as exc:
            raise fail(str(exc)) from None
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise fail(os_error_message(exc)) from None

    return wrapper  # type: ignore[return-value]


def os_error_message(exc: OSError) -> str:
    """``<file>: <reason>`` of an :class:`OSError`, without the ``[Errno N]`` noise."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename is not None else reason


# -- output folders ---------------------------------------------------------------------------------
def check_out_folder(folder: Path, files: tuple[str, ...] = (), *, flag: str = "--out") -> Path:
    """Fail now, with one line, when ``folder`` cannot receive ``files``; returns ``folder``.

    Called before the work, so that a typo in ``--out`` never costs a finished run. Nothing is created: an
    existing folder is probed with a temporary file (deleted at once); a folder still to be made needs its
    nearest existing ancestor to be a writable directory. Each of ``files`` that already exists must be a
    file, not a folder.
    """
    folder = Path(folder)
    if folder.exists():
        if not folder.is_dir():
            raise InvalidParameterError(f"{flag} {folder} is a file, not a folder")
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=".privaudit-write-check-"):
                pass
        except OSError as exc:
            raise InvalidParameterError(f"{flag} {folder} is not writable ({exc.strerror or exc})") from None
        for name in files:
            if (folder / name).is_dir():
                raise InvalidParameterError(f"{flag} {folder}: {folder / name} is a folder, so the {name} file cannot be written")
        return folder
    ancestor = folder.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InvalidParameterError(f"{flag} {folder} cannot be created: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"{flag} {folder} cannot be created: {ancestor} is not writable")
    return folder


T = TypeVar("T")


@dataclass(frozen=True)
class SavedOutputs:
    """Where a command's finished result went: ``value`` is what the writer returned (``None`` if nothing was
    written), ``problem`` says why it is not in ``--out`` (``None`` when it is)."""

    value: Any
    problem: str | None = None


def save_outputs(write: Callable[[Path], T], out: Path, *, command: str, flag: str = "--out") -> SavedOutputs:
    """``write(out)``; if that fails, ``write`` into a new temporary folder, so the finished work is kept.

    The command prints its summary either way and then, if :attr:`SavedOutputs.problem` is set, raises
    :func:`fail` with it (exit code 2). If even the temporary folder cannot be written, ``value`` is ``None``
    and the problem says so: the command must then print its result instead.
    """
    try:
        return SavedOutputs(write(Path(out)))
    except OSError as exc:
        first = f"could not write {flag} {out} ({os_error_message(exc)})"
    try:
        rescue = Path(tempfile.mkdtemp(prefix=f"privaudit-{command}-"))
        value = write(rescue)
    except OSError as exc:
        return SavedOutputs(None, f"{first}, nor a temporary folder ({os_error_message(exc)}); the result was printed instead")
    return SavedOutputs(value, f"{first}; the finished result was saved to {rescue} instead")


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
