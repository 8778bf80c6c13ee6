"""CLI sub-commands, one module each; every module exposes ``register(app)``.

Keep module-level imports light (no torch, matplotlib, opacus): they run on every CLI start.
"""

from __future__ import annotations

import importlib

import typer

#: Sub-command modules in the order they appear in ``privaudit --help``.
COMMAND_MODULES = (
    "privaudit.cli.compute_epsilon",
    "privaudit.cli.train",
    "privaudit.cli.check",
    "privaudit.cli.attack",
    "privaudit.cli.audit",
    "privaudit.cli.report",
)


def register_all(app: typer.Typer) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
