"""``privaudit compute-epsilon`` (work in progress)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command("compute-epsilon")
    def compute_epsilon() -> None:
        """Compute ε for a mechanism, a schedule or a trained federation."""
