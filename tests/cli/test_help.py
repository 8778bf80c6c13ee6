"""Every command's ``--help`` lists each of its options exactly once, whole, at any terminal width.

At 40 columns rich used to cut option names to what fits (``--yogi-b…`` for both ``--yogi-beta1`` and
``--yogi-beta2``), so ``train --help`` listed one option twice and two not at all.
"""

from __future__ import annotations

import contextlib
import io
import re

import click
import pytest
import typer

from privaudit.cli.app import app, main


def _commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, group)] if path else []
    if isinstance(group, click.Group):
        for name, command in group.commands.items():
            found += _commands(command, (*path, name))
    return found


COMMANDS = _commands(typer.main.get_command(app))


def _listed(help_text: str) -> list[str]:
    """The first-column names of every options panel row (``--defense,--defence`` counts as ``--defense``)."""
    names = []
    for line in help_text.splitlines():
        match = re.match(r"^│ (?:\*\s{1,3}|\s{0,3})(--?[^\s,│]+)", line)  # "*" marks a required option
        if match:
            names.append(match.group(1))
    return names


@pytest.mark.parametrize("columns", ["40", "80", "200"])
@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_lists_every_option_once_and_whole(path, columns, monkeypatch):
    monkeypatch.setenv("COLUMNS", columns)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*path, "--help"])
    assert code == 0
    command = dict(COMMANDS)[path]
    expected = [*sorted(p.opts[0] for p in command.params if isinstance(p, click.Option) and not p.hidden), "--help"]
    listed = _listed(out.getvalue())
    if isinstance(command, click.Group):
        listed = [name for name in listed if name.startswith("-")]
    duplicates = sorted({name for name in listed if listed.count(name) > 1})
    assert not duplicates, f"listed twice at {columns} columns: {duplicates}\n{out.getvalue()}"
    assert sorted(listed) == sorted(expected), out.getvalue()
