"""Render blocks to Markdown (figures as PNG files) and to one self-contained HTML file.

Two Markdown layouts: a report (:func:`to_markdown`: title, its lead sections (the overview it opens with), intro,
contents, one ``##`` per section, figures under ``figures/``) and a standalone evidence page (:func:`page_markdown`:
``# title`` and its blocks, figures next to the page). The HTML embeds every figure as a ``data:`` URI and carries its own small stylesheet: one file that
opens anywhere, with no scripts and no network access.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence

from privaudit.report.blocks import Block, Bullets, Figure, Heading, Images, Page, Paragraph, Section, Table

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#1b1b1b;line-height:1.45}
h1{border-bottom:2px solid #2e86c1;padding-bottom:.3em}
h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:1em 0;font-size:.86em;width:100%}
th,td{border:1px solid #ccc;padding:.35em .5em;vertical-align:top;text-align:left}
th{background:#f0f4f8}
tr:nth-child(even) td{background:#fafafa}
figure{margin:1.2em 0}
figure img{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#555}
.refuted{color:#b03a2e;font-weight:600}.consistent{color:#1e8449;font-weight:600}.inconclusive{color:#9a7d0a;font-weight:600}
.not-supported{color:#b03a2e;font-weight:600}.supported{color:#1e8449;font-weight:600}.fact{color:#1f618d;font-weight:600}
.meta{color:#666;font-size:.85em}
nav ul{columns:2}
"""

_BOLD = re.compile(r"\*\*(.+?)\*\*")


def _inline_html(text: str) -> str:
    """Escape, then allow **bold**, verdict colouring and <br> (the only markup our blocks use)."""
    escaped = html.escape(text).replace("&lt;br&gt;", "<br>")
    escaped = _BOLD.sub(r"<strong>\1</strong>", escaped)
    for verdict in ("refuted", "consistent", "inconclusive", "not supported", "supported", "fact"):  # the last three:
        css = verdict.replace(" ", "-")  # comparison claims (privaudit.audit.comparison)
        escaped = escaped.replace(f"<strong>{verdict}</strong>", f'<strong class="{css}">{verdict}</strong>')
    return escaped


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table_markdown(block: Table) -> list[str]:
    align = block.align or ["left"] * len(block.header)
    lines = ["| " + " | ".join(_md_cell(h) for h in block.header) + " |",
             "|" + "".join("---:|" if a == "right" else "---|" for a in align)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
    return lines


def _block_markdown(block: Block, figure_dir: str | None, files: dict[str, bytes], heading_offset: int) -> list[str]:
    """The block's Markdown lines (no trailing blank line); figures and images are added to ``files``."""
    if isinstance(block, Paragraph):
        return [block.text]
    if isinstance(block, Bullets):
        return [f"{block.marker} {item}" for item in block.items]
    if isinstance(block, Table):
        return _table_markdown(block)
    if isinstance(block, Heading):
        return ["#" * (block.level + heading_offset) + " " + block.text]
    if isinstance(block, Images):
        lines = []
        for image in block.images:
            rel = image.file if figure_dir is None else f"{figure_dir}/{image.file}"
            files[rel] = image.png
            lines.append(f"![{image.alt}]({rel})")
        return lines
    if isinstance(block, Figure):
        rel = f"{block.name}.png" if figure_dir is None else f"{figure_dir}/{block.name}.png"
        files[rel] = block.png
        return [f"![{block.caption}]({rel})", "", f"*{block.caption}*"]
    raise TypeError(f"not a report block: {block!r}")


def _lead_first(sections: Sequence[Section]) -> tuple[list[Section], list[Section]]:
    """(lead sections, the others), each in their given order: lead sections open the report (e.g. its overview figure)."""
    return [s for s in sections if s.lead], [s for s in sections if not s.lead]


def to_markdown(title: str, intro: Sequence[str], sections: Sequence[Section], figure_dir: str = "figures") -> tuple[str, dict[str, bytes]]:
    """(markdown text, {relative figure path: PNG bytes}): title, lead sections, intro, contents, the other sections."""
    lead, rest = _lead_first(sections)
    lines = [f"# {title}", ""]
    files: dict[str, bytes] = {}

    def add(section: Section) -> None:
        lines.extend([f'<a id="{section.key}"></a>', f"## {section.title}", ""])
        for block in section.blocks:
            lines.extend([*_block_markdown(block, figure_dir, files, heading_offset=1), ""])

    for section in lead:
        add(section)
    lines += [text for line in intro for text in (line, "")]
    lines += ["Contents: " + " · ".join(f"[{s.title}](#{s.key})" for s in [*lead, *rest]), ""]
    for section in rest:
        add(section)
    return "\n".join(lines), files


def page_markdown(page: Page) -> tuple[str, dict[str, bytes]]:
    """A standalone page: ``# title``, then each block followed by one blank line; images beside the page.

    Returns (markdown text ending in one newline, {file name: PNG bytes}).
    """
    files: dict[str, bytes] = {}
    chunks = [f"# {page.title}"]
    chunks += ["\n".join(_block_markdown(block, None, files, heading_offset=0)) for block in page.blocks]
    return "\n\n".join(chunks) + "\n", files


def to_html(title: str, intro: Sequence[str], sections: Sequence[Section]) -> str:
    lead, rest = _lead_first(sections)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]

    def add(section: Section) -> None:
        parts.append(f'<section id="{section.key}"><h2>{html.escape(section.title)}</h2>')
        parts.extend(_block_html(block) for block in section.blocks)
        parts.append("</section>")

    for section in lead:
        add(section)
    parts += [f'<p class="meta">{_inline_html(line)}</p>' for line in intro]
    parts.append("<nav><ul>" + "".join(f'<li><a href="#{s.key}">{html.escape(s.title)}</a></li>' for s in [*lead, *rest])
                 + "</ul></nav>")
    for section in rest:
        add(section)
    parts.append("</body></html>")
    return "\n".join(parts)


def _block_html(block: Block) -> str:
    if isinstance(block, Paragraph):
        return "<p>" + "<br>".join(_inline_html(line) for line in block.text.split("\n")) + "</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, Table):
        align = block.align or ["left"] * len(block.header)
        style = ['' if a != "right" else ' style="text-align:right"' for a in align]
        head = "".join(f"<th{s}>{_inline_html(h)}</th>" for h, s in zip(block.header, style, strict=False))
        body = "".join("<tr>" + "".join(f"<td{s}>{_inline_html(c)}</td>" for c, s in zip(row, style, strict=False)) + "</tr>"
                       for row in block.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    if isinstance(block, Heading):
        level = min(6, block.level + 1)
        return f"<h{level}>{_inline_html(block.text)}</h{level}>"
    if isinstance(block, Images):
        return "".join(f'<figure><img alt="{html.escape(i.alt)}" src="data:image/png;base64,{base64.b64encode(i.png).decode("ascii")}">'
                       f"<figcaption>{_inline_html(i.alt)}</figcaption></figure>" for i in block.images)
    if isinstance(block, Figure):
        data = base64.b64encode(block.png).decode("ascii")
        return (f'<figure id="fig-{block.name}"><img alt="{html.escape(block.caption)}" '
                f'src="data:image/png;base64,{data}"><figcaption>{_inline_html(block.caption)}</figcaption></figure>')
    raise TypeError(f"not a report block: {block!r}")
