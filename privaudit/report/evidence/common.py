"""What every evidence page shares: where its files live and how it says it is regenerated."""

from __future__ import annotations

from privaudit.report.blocks import Paragraph
from privaudit.report.results import Result

#: Where committed evidence lives, relative to the repository: result files and the pages rendered from them.
RESULTS_DIR = "reports/evidence"
PAGES_DIR = "reports"


def rerender_command(name: str) -> str:
    """The command that re-renders ``reports/<name>.md`` (and its figures) from its committed result file."""
    return f"privaudit report {RESULTS_DIR}/{name}.json --out {PAGES_DIR}/{name}.md"


def regenerate(result: Result, name: str) -> Paragraph:
    """The page's one regenerate statement: re-render (no training) and re-run, from the result's provenance.

    ``provenance["origin"]`` (``{"file", "commit", "note"}``) marks a result file that was not written by the run
    itself but made later from the run's committed output; its note is shown.
    """
    prov = result.provenance or {}
    text = (f"Regenerate: `{rerender_command(name)}` re-renders this page from the committed result file "
            f"`{RESULTS_DIR}/{name}.json` without training (`make evidence` re-renders every evidence page); "
            f"`{prov.get('command') or '—'}` re-runs the experiment.")
    origin = prov.get("origin")
    if isinstance(origin, dict) and origin.get("note"):  # a result file made from an earlier run's committed output
        text += f" {origin['note']}"
    return Paragraph(text)
