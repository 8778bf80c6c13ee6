"""``privaudit report``: render result files, audit directories or a report's own merged ``results.json``.

Two outputs: a report directory (``--out DIR``: report.md, report.html, results.json, figures/) or, for one evidence
result file, its standalone page (``--out reports/<name>.md``: the Markdown and its figures beside it). The flags map to
a :class:`~privaudit.report.request.ReportRequest` (``--out`` checked before anything is read), rendered by
:func:`privaudit.report.request.render`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from privaudit.cli.common import cli_errors, fail, relocation_problem
from privaudit.output_folder import opened


def register(app: typer.Typer) -> None:
    @app.command("report")
    @cli_errors
    def report(
        inputs: list[Path] = typer.Argument(..., help="Result JSON files, directories that contain them, or a report's merged results.json."),
        out: Path = typer.Option(Path("reports/report"), "--out",
                                 help="Output directory (report.md, report.html, results.json, figures/); a path ending in .md "
                                      "renders one evidence result as its page (e.g. reports/evidence/<name>.json --out "
                                      "reports/<name>.md)."),
        title: str = typer.Option("privaudit audit report", "--title", help="Report title (report directories only)."),
        note: str | None = typer.Option(None, "--note", help="A paragraph under the title, e.g. how to regenerate the report "
                                                            "(report directories only)."),
    ) -> None:
        """Render any set of privaudit results into one report (Markdown and one self-contained HTML file)."""
        from rich.console import Console

        # the report stack (matplotlib) loads when the command runs, not at every CLI start
        from privaudit.report.request import ReportRequest, render

        request = ReportRequest(tuple(inputs), out, title=title, note=note)
        console = Console()
        if request.page:
            page = render(request)
            console.print(f"page: {page.markdown}  ({len(page.images)} figures)")
            return
        with opened(out, "report") as folder:  # a full disk: the report is written into a temporary folder instead
            files = render(request)
        console.print(f"report: {files.markdown}  ·  {files.html}  ·  {files.merged}  ({len(files.figures)} figures)")
        if files.missing:
            console.print(f"[dim]no results for: {', '.join(files.missing)}[/dim]")
        problem = relocation_problem(folder, what="report")
        if problem:
            raise fail(problem)
