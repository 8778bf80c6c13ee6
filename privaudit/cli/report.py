"""``privaudit report``: render result files or audit directories into Markdown + HTML + merged JSON."""

from __future__ import annotations

from pathlib import Path

import typer

from privaudit.cli.common import cli_errors


def register(app: typer.Typer) -> None:
    @app.command("report")
    @cli_errors
    def report(
        inputs: list[Path] = typer.Argument(..., help="Result JSON files and/or directories that contain them."),
        out: Path = typer.Option(Path("reports/report"), "--out", help="Output directory (report.md, report.html, results.json, figures/)."),
        title: str = typer.Option("privaudit audit report", "--title", help="Report title."),
    ) -> None:
        """Render any set of privaudit results into one report (Markdown and one self-contained HTML file)."""
        from rich.console import Console

        from privaudit.report.build import build_report

        files = build_report(list(inputs), out, title=title)
        console = Console()
        console.print(f"report: {files.markdown}  ·  {files.html}  ·  {files.merged}  ({len(files.figures)} figures)")
        if files.missing:
            console.print(f"[dim]no results for: {', '.join(files.missing)}[/dim]")
