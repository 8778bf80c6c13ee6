"""Evidence pages: every kind renders from its result file, declared inputs are required, committed pages match."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from privaudit.cli.app import main
from privaudit.errors import InvalidParameterError
from privaudit.report.build import build_page, build_report
from privaudit.report.evidence import render_page, write_page
from privaudit.report.render import page_markdown
from privaudit.report.results import evidence_pages, make_result, read_result

from .evidence_fixtures import COMMANDS, WRITERS, write_evidence_fixture

REPO = Path(__file__).resolve().parents[2]
#: strings each page must show, computed from its fixture's numbers
EXPECTED = {
    "upcycled-table1": ["| FedProx | 81.00 ± 1.41 | 2.5 |", "| Upcycled-FedProx | 85.00 ± 1.41 | 2.5 |",
                        "- Syn(0.5,0.5): Upcycled-X has the higher mean accuracy for 1 of 2 base algorithms.",
                        "| Upcycled-pFedMe | Syn(0.5,0.5) | 87.00 ± 1.41 |", "Wall time of this report: 0.2 min"],
    "upcycled-private": ["| Upcycled-FedProx, σ = 0.8 (σ² convention) | 0.64 | 0.9200 | 0.2000 | 3.000 | 1.500 | 0.800 |",
                         "| FedProx, σ = 1, std 1 (σ convention) | 0.500 | 0.250 | — |", "![loss curves](upcycled-private.png)"],
    "privatefl": ["| 8 | +0.100 | +0.000 | +0.000 |", "| PrivateFL, CDP reference ε=8 | 0.400 | 0.200 | 0.190 | 8.000 | 16.60 | **no** | 3 |",
                  "* `reference`: the clip norms are unprivatised medians", "| 0 | 0 | 2 |", "![accuracy per round](privatefl.png)"],
    "fedreg": ["| fedavg+dp-sgd | 1.000 | 9 | 0.250 | dp |", "**PSNR on digits / convnet**",
               "Matched PSNR: FedReg+MG 9.000 dB, accuracy 0.550, ε = ∞ — vs FedAvg+DP-SGD σ = 1.000: 4.250 dB",
               "Verdict: **not supported** — not supported (as stated).", "* fact — no noise", "![accuracy per round](fedreg-convergence.png)"],
    "inversion": ["Without a defence the analytic attack reaches ∞ dB and IG 15.5 dB",
                  "FedAvg → plain FedReg (the regulariser): -8.5 dB, plain FedReg → FedReg+MG (MG): -0.5 dB.",
                  "reaches 9.5 dB on plain FedReg and 9.0 dB on FedReg+MG: MG's measured effect under this attack is -0.5 dB.",
                  "| digits | FedAvg | — | no DP guarantee | analytic | upcycled-mlp | 2 | ∞ | ∞ / 40.0 |",
                  "![inversion-digits.png](inversion-digits.png)"],
    "pfa": ["| PFA | 0.520 (stop 2) |", "difference -0.030", "| logistic regression, IID, M = 20 | PFA | reference | 9.3 | 1.4 | 0.930 | nan |",
            "| logistic regression, IID, M = 20 | PFA | 0.520 | 0.400 |", "| 5.62 | 0.410 | 92.71 % | 79.8 % | +0.002 |",
            "| 20 | 3 | exclude | 2 | 2 | 3 | 0 | 0.99 |", "![cumulative uplink](pfa-uplink.png)"],
}
IMAGES = {"upcycled-table1": [], "upcycled-private": ["upcycled-private.png"], "privatefl": ["privatefl.png"],
          "fedreg": ["fedreg-convergence.png", "fedreg-accuracy.png"], "inversion": ["inversion-digits.png"],
          "pfa": ["pfa-accuracy-lr.png", "pfa-uplink.png"]}


def test_every_evidence_kind_has_a_fixture():
    assert {page.name for page in evidence_pages().values()} == set(WRITERS)


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_each_kind_renders_its_page_from_a_result_file(tmp_path, name):
    result = write_evidence_fixture(tmp_path / "reports", name)
    out = tmp_path / "pages" / f"{name}.md"
    files = write_page(result, out)
    text = out.read_text()
    for needle in EXPECTED[name]:
        assert needle in text, needle
    assert sorted(p.name for p in files.images) == sorted(IMAGES[name])
    assert all((out.parent / image).stat().st_size > 0 for image in IMAGES[name])
    regenerate = next(line for line in text.splitlines() if line.startswith("Regenerate:"))
    assert f"`privaudit report reports/evidence/{name}.json --out reports/{name}.md`" in regenerate
    assert f"`{COMMANDS[name]}` re-runs the experiment" in regenerate
    assert text.endswith(".\n") and "\n\n\n" not in text


def test_pages_also_render_as_sections_of_a_report(tmp_path):
    for name in WRITERS:
        write_evidence_fixture(tmp_path / "reports", name)
    files = build_report([tmp_path / "reports" / "evidence"], tmp_path / "report")
    assert {f"evidence-{name}" for name in WRITERS} <= set(files.sections)
    html = files.html.read_text()
    assert "<h3>Findings</h3>" in html and "data:image/png;base64," in html
    assert "does not render" not in files.markdown.read_text()


def test_a_missing_declared_input_is_one_error_naming_the_file(tmp_path, capsys):
    result = write_evidence_fixture(tmp_path / "reports", "fedreg")
    missing = tmp_path / "reports" / "evidence" / "inversion.json"
    missing.unlink()
    with pytest.raises(InvalidParameterError, match=r"declared input\(s\) missing: inversion = .*inversion\.json"):
        render_page(read_result(result))
    capsys.readouterr()
    assert main(["report", str(result), "--out", str(tmp_path / "fedreg.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "inversion.json" in err[0] and not (tmp_path / "fedreg.md").exists()


def test_a_missing_declared_figure_is_an_error_not_a_dropped_figure(tmp_path):
    result = write_evidence_fixture(tmp_path / "reports", "inversion")
    (tmp_path / "reports" / "inversion-digits.png").unlink()
    with pytest.raises(InvalidParameterError, match=r"inversion-digits\.png"):
        write_page(result, tmp_path / "inversion.md")


def test_a_kind_that_joins_other_results_must_declare_them(tmp_path):
    data = read_result(write_evidence_fixture(tmp_path, "fedreg")).data
    with pytest.raises(InvalidParameterError, match="must declare its input"):
        make_result("fedreg-evidence", "t", data, inputs={"inversion": "inversion.json"})


def test_a_foreign_inversion_input_is_refused(tmp_path):
    result = write_evidence_fixture(tmp_path / "reports", "fedreg")
    shutil.copy(write_evidence_fixture(tmp_path / "other", "pfa"), tmp_path / "reports" / "evidence" / "inversion.json")
    with pytest.raises(InvalidParameterError, match="must be an inversion-evidence result"):
        render_page(read_result(result))


def test_cli_renders_one_page_and_refuses_several(tmp_path, capsys):
    table1 = write_evidence_fixture(tmp_path / "reports", "upcycled-table1")
    private = write_evidence_fixture(tmp_path / "reports", "upcycled-private")
    assert main(["report", str(table1), "--out", str(tmp_path / "t1.md")]) == 0
    assert (tmp_path / "t1.md").read_text().startswith("# Upcycled-FL Table 1 (shape)")
    capsys.readouterr()
    assert main(["report", str(table1), str(private), "--out", str(tmp_path / "two.md")]) == 2
    assert "exactly one evidence result" in capsys.readouterr().err
    with pytest.raises(InvalidParameterError, match="no evidence page"):
        build_page([make_result_file(tmp_path)], tmp_path / "table.md")


def make_result_file(tmp_path: Path) -> Path:
    from privaudit.report.results import write_result

    return write_result(tmp_path / "table.json", make_result("table", "t", {"columns": ["a"], "rows": [[1]]}))


@pytest.mark.parametrize("result", sorted((REPO / "reports" / "evidence").glob("*.json")), ids=lambda p: p.stem)
def test_committed_pages_are_rendered_from_their_result_files(result):
    """``make evidence`` changes no committed page: each is exactly what its committed result file renders."""
    markdown, images = page_markdown(render_page(read_result(result)))
    assert markdown == (REPO / "reports" / f"{result.stem}.md").read_text()
    assert all((REPO / "reports" / name).is_file() for name in images)
