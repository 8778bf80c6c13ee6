"""The committed claims report never contradicts itself (issue 24).

It is rendered from its committed merged results (``reports/claims-audit/results.json``) by the command
``make claims-report`` runs (``privaudit report reports/claims-audit --out … --title … --note …``), and checked:

* no reading shows a certified lower bound above a certified upper bound of the mechanism it examines — in the data,
  in the rendered Markdown, and in the committed ``reports/claims-audit.md``;
* no refuting value is faded (figure) or starred / said to rest on failing assumptions (text);
* ε is readable on the first screen: every panel of the opening figure carries ε tick labels.
"""

import math
import re
from pathlib import Path

import pytest

from privaudit.report import figures
from privaudit.report.claim_overview import claim_panels, row_glyphs
from privaudit.report.claim_sections import ACCOUNTING_VERDICTS, accounting_contradictions
from privaudit.report.collect import collect

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "reports" / "claims-audit"
NUMBER = r"([0-9.]+(?:e[+-]?[0-9]+)?|∞)"


def _value(text: str) -> float:
    return math.inf if text == "∞" else float(text)


def _reading_rows(markdown: str) -> dict[str, list[str]]:
    """``claim · reading`` → the cells of its row in the Claims table (readings follow their claim's row)."""
    rows, claim = {}, None
    for line in markdown.splitlines():
        if not line.startswith("| "):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells[0].startswith("**") and cells[0].endswith("**"):
            claim = cells[0].strip("*")
        elif cells[0].startswith("↳ ") and claim is not None and len(cells) == 9:
            rows[f"{claim} · {cells[0][2:].rsplit(' (', 1)[0]}"] = cells
    return rows


def check_accounting_text(markdown: str) -> list[str]:
    """Every reading decided on accounting whose implementation cell reads a lower bound above an upper bound, or a
    refuting value starred or said to rest on failing assumptions."""
    problems = []
    for name, cells in _reading_rows(markdown).items():
        impl, verdict = cells[4], cells[8].split(" — ")[0]
        if verdict not in ACCOUNTING_VERDICTS or impl == "—":
            continue
        lowers = [_value(v) for v in re.findall(rf"ε ≥ {NUMBER} \(certified lower bound", impl)]
        uppers = [_value(v) for v in re.findall(rf"ε ≤ {NUMBER} \(certified upper bound", impl)]
        for low, high in re.findall(rf"{NUMBER} ≤ ε ≤ {NUMBER} \(certified lower and upper bound", impl):
            lowers.append(_value(low))
            uppers.append(_value(high))
        exact = [_value(v) for v in re.findall(rf"ε = {NUMBER} \(exact\)", impl)]
        lowers, uppers = lowers + exact, uppers + exact
        if lowers and uppers and max(lowers) > min(uppers) * (1 + 1e-9):
            problems.append(f"{name}: ε ≥ {max(lowers)} beside ε ≤ {min(uppers)}")
        if re.search(rf"ε ≥ {NUMBER}\*|\[{NUMBER}, {NUMBER}\]\*", impl) or "∞ (prv" in impl:
            problems.append(f"{name}: a lower end starred or printed as ∞: {impl[:200]}")
        if verdict == "refuted" and not lowers and cells[5] == "—":  # refuted by neither accounting nor an attack
            problems.append(f"{name}: refuted, but no holding lower bound is shown")
    return problems


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """The committed claims report rendered as `make claims-report` renders it; the opening figure kept."""
    from privaudit.cli.app import main

    captured = []
    real = figures.overview_figure

    def spy(panels, width=11.0):
        captured.append(fig := real(panels, width))
        return fig

    out = tmp_path_factory.mktemp("claims-report")
    mp = pytest.MonkeyPatch()
    mp.setattr(figures, "overview_figure", spy)
    try:
        code = main(["report", str(COMMITTED), "--out", str(out), "--title", "privaudit — the papers' privacy claims",
                     "--note", "Regenerate: `make claims-report`"])
    finally:
        mp.undo()
    assert code == 0 and len(captured) == 1
    return out, captured[0]


def test_no_lower_bound_above_an_upper_bound_for_one_mechanism(rendered):
    out, _ = rendered
    results = collect([COMMITTED / "results.json"]).results
    assert accounting_contradictions(results) == []
    markdown = (out / "report.md").read_text()
    assert "Contradictory accounting" not in markdown
    rows = _reading_rows(markdown)
    assert len(rows) >= 20  # every reading of the six claims was parsed
    assert check_accounting_text(markdown) == []
    # the two cases of issue 24: PFA's code-defaults reading brackets the code's ε, and PrivateFL's exact ε is a
    # lower bound that holds beside an upper bound that does not
    pfa = rows["pfa-heterogeneous-calibration · calibration-code-defaults"][4]
    assert re.search(r"ε ≥ 271\.1 \(certified lower bound", pfa) and re.search(r"ε ≤ 271\.6 \(certified upper bound", pfa)
    cdp = rows["privatefl-cdp-eps8 · reference-mnist-dnn"][4]
    assert cdp.startswith("ε ≥ 15.13 (certified lower bound: holds for a constructed worst case); the upper bound 15.13 "
                          "rests on assumptions that fail")


def test_the_committed_markdown_is_the_fixed_rendering():
    committed = (ROOT / "reports" / "claims-audit.md").read_text()
    assert check_accounting_text(committed) == []
    assert "∞ (prv (lower end)" not in committed and "faded where its assumptions fail" not in committed


def test_no_refuting_value_is_faded_and_every_panel_reads_epsilon(rendered):
    _, fig = rendered
    drawn = [line for ax in fig.axes for line in ax.get_lines() if line.get_gid()]
    refuting = [line for line in drawn if ":refutes:" in line.get_gid()]
    assert refuting  # PrivateFL's 15.13 and 67.62, PFA's 271.1, the attacks' bounds above their claims
    for line in refuting:
        assert line.get_gid().endswith(":solid") and line.get_alpha() in (None, 1.0) and line.get_linestyle() != "--"
    assert any(line.get_gid() == "lower:implementation:refutes:solid" for line in refuting)
    # every faded glyph is an end that rests on failing assumptions, never a refuting one
    assert all(":plain:" in line.get_gid() for line in drawn if line.get_gid().endswith(":faded"))
    # the data behind it: every refuting glyph of every row is solid
    panels = claim_panels(collect([COMMITTED / "results.json"]).results)
    assert all(not g.faded for p in panels for r in p.rows for g in row_glyphs(r) if g.refutes)
    # ε on the first screen: every panel labels its ε axis, not only the last one
    fig.canvas.draw()
    panels_axes = [ax for ax in fig.axes if ax.get_title(loc="left")]
    assert len(panels_axes) == len(panels) == 6
    for ax in panels_axes:
        labels = [t.get_text() for t in ax.get_xticklabels() if t.get_visible()]
        assert {"0", "1", "10", "∞"} <= set(labels), (ax.get_title(loc="left"), labels)
