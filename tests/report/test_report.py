"""`privaudit report`: every section and figure present, self-contained HTML, clear errors."""

import html
import json
import re
import shutil
import subprocess

import pytest

from privaudit.cli.app import main
from privaudit.report.build import build_report

from .fixtures import write_fixture_results

SECTION_IDS = ["overview", "claims", "ledger", "epsilon-curve", "membership", "inversion", "training", "tables", "configuration"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    written = write_fixture_results(root)
    (root / "manifest.json").write_text('{"schema": "privaudit.checkpoint/1"}')  # a foreign JSON inside a directory
    return build_report([root], tmp_path_factory.mktemp("report"), title="fixture report"), root, written


def test_every_section_and_figure(report):
    files, *_ = report
    assert list(files.sections[: len(SECTION_IDS)]) == SECTION_IDS
    md = files.markdown.read_text()
    for title in ("## The claims at a glance", "## Claims", "## Per-client ε vs budget", "## ε vs rounds", "## Membership inference",
                  "## Gradient inversion", "## Accuracy vs rounds", "## Tables", "## Configuration and versions"):
        assert title in md
    for fig in files.figures:
        assert fig.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"({fig.parent.name}/{fig.name})" in md
    assert {f.name for f in files.figures} >= {"claims-overview.png", "ledger-0.png", "ledger-histogram-0.png", "epsilon-curve-0.png",
                                               "roc.png", "inversion-0.png", "accuracy.png"}
    # the report opens with the claims at a glance: its figure is the first thing under the title
    assert md.split("\n## ")[1].startswith("The claims at a glance") and md.index("![") < md.index("Contents:")
    assert md.index("(figures/claims-overview.png)") == min(md.index(f"(figures/{f.name})") for f in files.figures)
    assert "upcycled-thm6.2-fig3" in md
    # the claim's verdict names its basis, with each basis' reason; a result file without bases shows its reason
    assert "**refuted** — refuted (as implemented)<br>as implemented: **refuted** — reference-clock-rng: ε = ∞" in md
    assert "**consistent** — certified ε ≤ 7.2 ≤ claimed 7.39" in md
    # the claim's own words beside it, and which numbers the paper states and which privaudit chose
    assert "<br>“The noise parameter σ is 1.0 for all baselines" in md and "(003 §7, Fig. 3 caption)" in md
    assert "(1.402, 0.001)<br>ε stated, δ chosen" in md
    assert "| stated by the paper | chosen by privaudit (why) |" in md
    assert "delta = 0.001 (003 states no δ" in md and "from 000 §6, Fig. 2 caption" in md
    assert "| upcycled-thm6.3-fig4 | — (no quote recorded) | — | — |" in md
    # each reading of a claim gets its own row with its own evidence and verdict
    assert "| ↳ reference-clock-rng (implementation) | reference code: clock-seeded noise |" in md
    assert "refuted — ε = ∞: the noise takes at most 1000 values" in md
    assert "1 JSON file(s) that are not privaudit results were skipped" in md


def test_html_is_self_contained(report):
    files, *_ = report
    html = files.html.read_text()
    assert html.count('src="data:image/png;base64,') == len(files.figures)
    assert not re.search(r'src="(?!data:)', html) and "<script" not in html
    for section in SECTION_IDS:
        assert f'<section id="{section}">' in html
    assert '<strong class="refuted">refuted</strong>' in html


def test_merged_json(report):
    files, _, written = report
    merged = json.loads(files.merged.read_text())
    assert len(merged["results"]) == len(written) and merged["results"][0]["schema"] == "privaudit.result/1"


def test_partial_set_lists_what_is_missing(tmp_path):
    paths = write_fixture_results(tmp_path / "r")
    files = build_report([paths[0]], tmp_path / "out")
    assert "Gradient inversion" in files.missing and "## What this report does not contain" in files.markdown.read_text()
    assert "Tables" not in files.missing  # hand-made tables: no privaudit command writes them, so none is missing


def test_cli(report, tmp_path, capsys):
    _, root, _ = report
    assert main(["report", str(root), "--out", str(tmp_path / "cli")]) == 0
    assert (tmp_path / "cli" / "report.html").exists()


@pytest.mark.parametrize("case", ["missing", "foreign", "truncated", "empty-dir"])
def test_bad_inputs_exit_2(tmp_path, capsys, case):
    target = tmp_path / "x.json"
    if case == "foreign":
        target.write_text('{"hello": 1}')
    elif case == "truncated":
        target.write_text('{"schema": "privaudit.result/1", "kind": "ledger", "da')
    elif case == "empty-dir":
        target = tmp_path / "empty"
        target.mkdir()
    capsys.readouterr()
    assert main(["report", str(target), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")


def _chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="Debian chromium is not installed (make test installs it when it can)")
def test_html_loads_cleanly_in_headless_chromium(report, tmp_path):
    files, *_ = report
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]
    url = files.html.resolve().as_uri()
    dom = subprocess.run([_chromium(), *flags, "--dump-dom", url], capture_output=True, text=True, timeout=600)
    assert dom.returncode == 0, dom.stderr[-500:]
    for section in SECTION_IDS:
        assert f'id="{section}"' in dom.stdout
    shot = tmp_path / "screenshot.png"
    run = subprocess.run([_chromium(), *flags, f"--screenshot={shot}", "--window-size=1280,2400", url],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and shot.exists() and shot.stat().st_size > 20_000


#: Added to a copy of the report (the report itself carries no scripts): once the page has loaded, records which
#: element follows the title, which figure comes first, and whether its image decoded and where it sits.
_PROBE = """<script>window.addEventListener('load', function () {
  var fig = document.querySelector('figure'), img = fig && fig.querySelector('img');
  var first = document.querySelector('h1').nextElementSibling;
  document.body.setAttribute('data-probe', JSON.stringify({figure: fig && fig.id, first: first && first.id,
    complete: !!(img && img.complete), width: img ? img.naturalWidth : 0,
    top: img ? Math.round(img.getBoundingClientRect().top) : -1}));
});</script>"""


@pytest.mark.skipif(_chromium() is None, reason="Debian chromium is not installed (make test installs it when it can)")
def test_the_report_opens_with_the_claims_figure_in_headless_chromium(report, tmp_path):
    files, *_ = report
    probe = tmp_path / "probe.html"
    probe.write_text(files.html.read_text().replace("</body>", _PROBE + "</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,1400"]
    dom = subprocess.run([_chromium(), *flags, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=600)
    assert dom.returncode == 0, dom.stderr[-500:]
    found = re.search(r'data-probe="([^"]*)"', dom.stdout)
    assert found, "the page's load event never ran"
    state = json.loads(html.unescape(found.group(1)))
    # the overview section follows the title, its figure is the page's first, decoded, and starts in the first screen
    assert state["first"] == "overview" and state["figure"] == "fig-claims-overview", state
    assert state["complete"] and state["width"] > 600 and 0 < state["top"] < 400, state


def test_report_inside_its_audit_directory_does_not_count_twice(tmp_path):
    root = tmp_path / "audit"
    written = write_fixture_results(root)
    first = build_report([root], root / "report")
    second = build_report([root], root / "report")
    assert len(json.loads(first.merged.read_text())["results"]) == len(written)
    assert len(json.loads(second.merged.read_text())["results"]) == len(written)
