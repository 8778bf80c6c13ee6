"""Evidence pages: each committed ``reports/<name>.md`` is rendered from one result file ``reports/evidence/<name>.json``.

One result kind per page. The pages are plug-ins: each paper declares its own in its ``PAPER`` value
(:class:`privaudit.plugins.EvidencePageRef`: kind, page name, renderer, and the data keys and inputs a result of
that kind must hold), and :func:`privaudit.report.results.evidence_pages` reads them from the registry
(:func:`privaudit.plugins.papers`), so this module names no paper. A renderer is a :class:`PageRenderer`; it is imported only when a page of its kind is
drawn. The paper's evidence run trains, writes the result file and calls :func:`write_page`; ``privaudit report
reports/evidence/<name>.json --out reports/<name>.md`` (``make evidence`` for all of them) re-renders a page from
its committed result file without training. A result's declared inputs (another result it is joined with, a figure
the run drew) must all exist: a missing one is one error that names the file, never a dropped section.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from privaudit.errors import InvalidParameterError
from privaudit.report.blocks import Page, Section
from privaudit.report.render import page_markdown
from privaudit.report.results import Result, evidence_pages, read_result


class PageRenderer(Protocol):
    """What an :class:`~privaudit.plugins.EvidencePageRef`'s ``renderer`` refers to: the page of one result.

    It reads only the result (its ``data``, ``provenance`` and declared ``inputs``) and draws its figures itself; the
    page's Markdown and image files are written by :func:`write_page`.
    """

    def __call__(self, result: Result) -> Page: ...


@dataclass(frozen=True)
class PageFiles:
    markdown: Path
    images: tuple[Path, ...]


def result_path_for(page: str | Path) -> Path:
    """Where a page's result file lives: ``<page dir>/evidence/<page name>.json`` (``reports/x.md`` → ``reports/evidence/x.json``)."""
    page = Path(page)
    return page.parent / "evidence" / f"{page.stem}.json"


def render_page(result: Result) -> Page:
    """The page of an evidence result; a declared input that is missing is one :class:`InvalidParameterError`."""
    pages = evidence_pages()
    spec = pages.get(result.kind)
    if spec is None:
        raise InvalidParameterError(f"{result.source or result.title}: a '{result.kind}' result has no evidence page "
                                    f"(evidence kinds: {', '.join(sorted(pages))})")
    missing = result.missing_inputs()
    if missing:
        raise InvalidParameterError(f"{result.source or result.title}: cannot render the {spec.name} page, declared "
                                    f"input(s) missing: {'; '.join(missing)}")
    renderer: PageRenderer = spec.renderer.load()
    return renderer(result)


def write_page(result: Result | str | Path, out: str | Path) -> PageFiles:
    """Render ``result`` (or the result file at that path) to the Markdown file ``out``, images beside it."""
    if not isinstance(result, Result):
        result = read_result(result)
    out = Path(out)
    if out.suffix != ".md":
        raise InvalidParameterError(f"{out}: an evidence page is a Markdown file (.md)")
    markdown, images = page_markdown(render_page(result))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown)
    written = []
    for name, png in images.items():
        path = out.parent / name
        if not (path.is_file() and path.read_bytes() == png):  # a declared figure rendered in place is left untouched
            path.write_bytes(png)
        written.append(path)
    return PageFiles(out, tuple(written))


def evidence_section(result: Result) -> Section:
    """The page as one section of a ``privaudit report`` (the renderer puts its headings one level down)."""
    page = render_page(result)
    return Section(f"evidence-{evidence_pages()[result.kind].name}", page.title, list(page.blocks))


__all__ = ["PageFiles", "PageRenderer", "evidence_section", "render_page", "result_path_for", "write_page"]
