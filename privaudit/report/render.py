"""Render report sections to Markdown (figures as PNG files) and to one self-contained HTML file.

The HTML embeds every figure as a ``data:`` URI and carries its own small stylesheet: one file that opens
anywhere, with no scripts and no network access.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Sequence

from privaudit.report.sections import Bullets, Figure, Paragraph, Section, Table

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


def to_markdown(title: str, intro: Sequence[str], sections: Sequence[Section], figure_dir: str = "figures") -> tuple[str, dict[str, bytes]]:
    """(markdown text, {relative figure path: PNG bytes})."""
    lines = [f"# {title}", ""]
    lines += [*intro, ""]
    lines += ["Contents: " + " · ".join(f"[{s.title}](#{s.key})" for s in sections), ""]
    files: dict[str, bytes] = {}
    for section in sections:
        lines += [f'<a id="{section.key}"></a>', f"## {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Paragraph):
                lines += [block.text, ""]
            elif isinstance(block, Bullets):
                lines += [f"- {item}" for item in block.items] + [""]
            elif isinstance(block, Table):
                lines.append("| " + " | ".join(_md_cell(h) for h in block.header) + " |")
                lines.append("|" + "---|" * len(block.header))
                lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
                lines.append("")
            elif isinstance(block, Figure):
                rel = f"{figure_dir}/{block.name}.png"
                files[rel] = block.png
                lines += [f"![{block.caption}]({rel})", "", f"*{block.caption}*", ""]
    return "\n".join(lines), files


def to_html(title: str, intro: Sequence[str], sections: Sequence[Section]) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    parts += [f'<p class="meta">{_inline_html(line)}</p>' for line in intro]
    parts.append("<nav><ul>" + "".join(f'<li><a href="#{s.key}">{html.escape(s.title)}</a></li>' for s in sections) + "</ul></nav>")
    for section in sections:
        parts.append(f'<section id="{section.key}"><h2>{html.escape(section.title)}</h2>')
        for block in section.blocks:
            if isinstance(block, Paragraph):
                parts.append(f"<p>{_inline_html(block.text)}</p>")
            elif isinstance(block, Bullets):
                parts.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in block.items) + "</ul>")
            elif isinstance(block, Table):
                head = "".join(f"<th>{_inline_html(h)}</th>" for h in block.header)
                body = "".join("<tr>" + "".join(f"<td>{_inline_html(c)}</td>" for c in row) + "</tr>" for row in block.rows)
                parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
            elif isinstance(block, Figure):
                data = base64.b64encode(block.png).decode("ascii")
                parts.append(f'<figure id="fig-{block.name}"><img alt="{html.escape(block.caption)}" '
                             f'src="data:image/png;base64,{data}"><figcaption>{_inline_html(block.caption)}</figcaption></figure>')
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)
