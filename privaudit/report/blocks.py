"""Format-neutral report blocks: what a section or an evidence page is made of.

:mod:`privaudit.report.render` turns them into Markdown (a report's sections, or one standalone evidence page)
and into one self-contained HTML file. Text in blocks is already Markdown-inline (``**bold**``, ``*italic*``,
backticks, ``<br>`` inside table cells); the renderers add the block structure only.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Paragraph:
    """One paragraph; a ``\\n`` inside it is a line break within the paragraph (no blank line)."""

    text: str


@dataclass
class Bullets:
    items: list[str]
    marker: str = "-"  # "-" or "*": both are Markdown bullets; pages keep the marker they were written with


@dataclass
class Table:
    header: list[str]
    rows: list[list[str]]
    #: per column "left" (default) or "right" (rendered ``---:``); ``None`` = all left
    align: list[str] | None = None


@dataclass
class Figure:
    """A figure drawn for a report: written to ``figures/<name>.png``, shown with its caption."""

    name: str
    png: bytes
    caption: str


@dataclass
class Heading:
    """A heading inside a page or section (level 2 = ``##`` on a standalone page)."""

    level: int
    text: str


@dataclass
class Image:
    """A PNG shown on a standalone page as ``![alt](file)``, the file written next to the page.

    ``png`` holds the bytes: drawn from the result's data, or read from a figure file the result declares as an
    input (an artifact of the run that cannot be redrawn from the numbers, e.g. a reconstruction grid).
    """

    file: str
    alt: str
    png: bytes


@dataclass
class Images:
    """Images shown one per line, without blank lines between them."""

    images: list[Image]


Block = Paragraph | Bullets | Table | Figure | Heading | Images


@dataclass
class Section:
    key: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    #: a lead section opens the report: rendered right under the title, before the intro and the contents
    lead: bool = False


@dataclass
class Page:
    """A standalone evidence page: ``# title`` then its blocks (``reports/<name>.md`` and its figures)."""

    title: str
    blocks: list[Block]

    def images(self) -> list[Image]:
        return [image for block in self.blocks if isinstance(block, Images) for image in block.images]
