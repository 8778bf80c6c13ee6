"""Helpers shared by CLI commands: error conversion, options assembled from registries, output folders, JSON output.

A command's request checks its ``--out`` before any work starts (:mod:`privaudit.request_checks`), and the command writes
through its output folder (:mod:`privaudit.output_folder`; :func:`save_outputs` for a result written at the end), which
never loses finished work: when a write fails anyway (the disk filled, the folder was removed), the work goes to a
fresh temporary folder and the error line names the file and says where.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import inspect
import json
import math
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import typer

from privaudit.errors import OutputError, PrivauditError
from privaudit.output_folder import OutputFolder, opened

# typer >= 0.29 vendors click as ``typer._click``; older releases depend on click itself.
click_exceptions = importlib.import_module(
    "typer._click.exceptions" if importlib.util.find_spec("typer._click") else "click.exceptions"
)

F = TypeVar("F", bound=Callable[..., Any])


#: ``--help`` is rendered at least this many columns wide (:func:`option_names_kept_whole`).
MIN_HELP_WIDTH = 80


@contextlib.contextmanager
def option_names_kept_whole() -> Iterator[None]:
    """Within the block, ``--help`` renders at least :data:`MIN_HELP_WIDTH` columns wide.

    Narrower, rich cuts the options' names to what fits, so two options that share a prefix read as one option listed
    twice (``--yogi-b…`` for ``--yogi-beta1`` and ``--yogi-beta2`` at 40 columns). A wider terminal keeps its width, and
    a ``TERMINAL_WIDTH`` the user set is left alone: typer takes its help width from that variable when it imports
    ``typer.rich_utils`` (the first time it renders help) and from ``rich_utils.MAX_WIDTH`` after that.
    """
    if os.environ.get("TERMINAL_WIDTH"):
        yield
        return
    width = max(MIN_HELP_WIDTH, shutil.get_terminal_size().columns)
    os.environ["TERMINAL_WIDTH"] = str(width)
    loaded = sys.modules.get("typer.rich_utils")
    if loaded is not None:
        loaded.MAX_WIDTH = width
    try:
        yield
    finally:
        os.environ.pop("TERMINAL_WIDTH", None)
        rich_utils = sys.modules.get("typer.rich_utils")
        if rich_utils is not None:
            rich_utils.MAX_WIDTH = None


def option(name: str, annotation: Any, default: Any, *flags: str, help: str, panel: str | None = None,
           hidden: bool = False) -> inspect.Parameter:
    """A typer option as a keyword-only parameter, for commands whose options are assembled from registries."""
    info = typer.Option(default, *flags, help=help, rich_help_panel=panel, hidden=hidden)
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)


def command_signature(func: Callable[..., Any], parameters: list[inspect.Parameter]) -> None:
    """Give ``func(**flags)`` the signature typer reads its options from (one clear error for a name used twice)."""
    names = [p.name for p in parameters]
    clash = sorted({name for name in names if names.count(name) > 1})
    if clash:
        raise RuntimeError(f"{func.__name__}: options declared twice: {clash}")
    func.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    func.__annotations__ = {p.name: p.annotation for p in parameters}


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


T = TypeVar("T")


@dataclass(frozen=True)
class SavedOutputs:
    """Where a command's finished result went: ``value`` is what the writer returned (``None`` if nothing was
    written), ``problem`` says why it is not in ``--out`` (``None`` when it is)."""

    value: Any
    problem: str | None = None


def save_outputs(write: Callable[[Path], T], out: Path, *, command: str, flag: str = "--out") -> SavedOutputs:
    """``write(out)``; if that fails, ``write`` into a temporary folder, so the finished work is kept.

    The one mechanism of :mod:`privaudit.output_folder`: ``out`` is the command's output folder (:func:`opened` by it,
    or one of its own), so a folder that moved already during the run (a checkpoint or trial journal that filled the
    disk) receives the result in the same temporary folder. The command prints its summary either way and then, if
    :attr:`SavedOutputs.problem` is set, raises :func:`fail` with it (exit code 2): the line names the file that could
    not be written and where the work went. If even the temporary folder cannot be written, ``value`` is ``None`` and
    the problem says so: the command must then print its result instead.
    """
    with opened(out, command) as folder:  # the command's own (reported here), or the one it opened for the whole run
        try:
            value = folder.run(write)
        except OutputError as exc:
            return SavedOutputs(None, f"{exc}; the result was printed instead")
    moved = folder.relocation
    return SavedOutputs(value, None if moved is None else moved.message(flag, "result"))


def relocation_problem(folder: OutputFolder, *, flag: str = "--out", what: str = "work") -> str | None:
    """The error line of a command whose output folder moved during the run (``None`` if it did not)."""
    moved = folder.relocation
    return None if moved is None else moved.message(flag, what)


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
