"""`make demo` runs the compute-epsilon tour end to end."""

import pytest
from rich.console import Console

from privaudit.cli.demo import TOUR, run_default_audit, run_tour


def test_tour_runs_every_step(capsys):
    assert run_tour(Console(width=120)) == 0
    out = capsys.readouterr().out
    assert out.count("$ privaudit compute-epsilon") == len(TOUR)
    assert "1.58654" in out and "1.7529" in out  # 003's ε̄ by the draft's (000 Thm 5.2) form, and the σ² convention's


@pytest.mark.slow
def test_default_audit_writes_every_section(tmp_path, monkeypatch):
    # the whole `make demo` audit (a few minutes): claims, ledger, ROC, reconstructions, one report
    monkeypatch.chdir(tmp_path)
    assert run_default_audit(Console(width=120)) == 0
    md = (tmp_path / "reports/default/report/report.md").read_text()
    for title in ("## Claims", "## Per-client ε vs budget", "## ε vs rounds", "## Membership inference",
                  "## Gradient inversion", "## Accuracy vs rounds"):
        assert title in md
