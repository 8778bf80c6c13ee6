"""What ``privaudit report`` asks, as one checked value, and the library function that renders it.

A :class:`ReportRequest` names result files (or folders holding them, or a report's merged ``results.json``) and
where they go: a report folder (``report.md``, one self-contained ``report.html``, the merged ``results.json`` and
``figures/``; :func:`privaudit.report.build.build_report`) or, for an ``out`` ending in ``.md``, one evidence result's
standalone page (:func:`privaudit.report.build.build_page`). Making it checks that ``out`` can be written, before
anything is read or rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from privaudit.report import build
from privaudit.report.build import PageFiles, ReportFiles
from privaudit.request_checks import check_out_folder

DEFAULT_TITLE = "privaudit audit report"


@dataclass(frozen=True)
class ReportRequest:
    """``inputs`` rendered into ``out`` (a folder, or a page ``*.md``); ``title`` and ``note`` (a paragraph under the
    title) apply to report folders."""

    inputs: tuple[Path, ...]
    out: Path = Path("reports/report")
    title: str = DEFAULT_TITLE
    note: str | None = None

    def __post_init__(self) -> None:
        check_out_folder(self.out.parent if self.page else self.out)  # before reading and rendering, not after

    @property
    def page(self) -> bool:
        """Whether one evidence result is rendered as its standalone page."""
        return self.out.suffix == ".md"


def render(request: ReportRequest) -> PageFiles | ReportFiles:
    """The page or the report folder the request asks for (a full disk: the report goes to a temporary folder, which
    the output folder's ``relocation`` names)."""
    if request.page:
        return build.build_page(list(request.inputs), request.out)
    return build.build_report(list(request.inputs), request.out, title=request.title, note=request.note)
