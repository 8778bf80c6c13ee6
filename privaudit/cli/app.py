"""The ``privaudit`` command line: a thin typer layer over the library.

Each sub-command lives in its own module under :mod:`privaudit.cli.commands` and registers itself on
:data:`app`. Command modules import heavy libraries (torch, matplotlib) only inside their functions, so
``privaudit compute-epsilon`` starts as fast as numpy and scipy allow.

Bad input never produces a traceback: :func:`main` turns usage errors and :class:`PrivauditError` into
one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys

import typer

from privaudit import __version__
from privaudit.cli.commands import register_all
from privaudit.cli.common import click_exceptions, option_names_kept_whole
from privaudit.errors import PrivauditError, Terminated
from privaudit.report.command_line import privaudit_command

app = typer.Typer(
    name="privaudit",
    help="Check the privacy claims of differentially private federated learning.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def _root(
    version: bool = typer.Option(False, "--version", help="Print the privaudit version and exit."),
) -> None:
    """Check the privacy claims of differentially private federated learning."""
    if version:
        typer.echo(__version__)
        raise typer.Exit(0)


register_all(app)


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and, as a console script, exits with) the process exit code."""
    command = typer.main.get_command(app)
    try:
        # what result files record as the command; --help at least 80 columns wide (option names never cut)
        with privaudit_command(sys.argv[1:] if argv is None else argv), option_names_kept_whole():
            result = command.main(args=argv, prog_name="privaudit", standalone_mode=False)
    except click_exceptions.UsageError as exc:
        hint = f" (see 'privaudit {exc.ctx.command_path.split(' ', 1)[1]} --help')" if exc.ctx and " " in exc.ctx.command_path else ""
        typer.echo(f"error: {_one_line(exc.format_message())}{hint}", err=True)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("error: aborted", err=True)
        return 130  # 128 + SIGINT: the shell's code for Ctrl-C
    except Terminated as exc:  # SIGTERM while a process pool ran (privaudit.executor): the pool is already stopped
        typer.echo(f"error: {exc}", err=True)
        return 143  # 128 + SIGTERM, as a process killed by SIGTERM reports it
    except BrokenPipeError:  # output piped into `head` and closed early: not an error of the user's input
        return 0
    except click_exceptions.ClickException as exc:
        typer.echo(f"error: {_one_line(exc.format_message())}", err=True)
        return exc.exit_code
    except PrivauditError as exc:
        typer.echo(f"error: {_one_line(str(exc))}", err=True)
        return 2
    if result == 130:  # typer turns Ctrl-C (KeyboardInterrupt) into Exit(130) without a word
        typer.echo("error: aborted", err=True)
    return result if isinstance(result, int) else 0


def entry() -> None:  # pragma: no cover - console-script shim
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
