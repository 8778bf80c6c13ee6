"""Scaled-down evidence runs (the full ones: ``python benchmarks/evidence_upcycled.py table1|private``)."""

from __future__ import annotations

import pytest

from privaudit.papers.upcycled.experiments import (
    private_data,
    private_requests,
    run_all,
    table1_data,
    table1_requests,
    write_evidence,
)
from privaudit.report.results import read_result

pytestmark = pytest.mark.slow


def test_table1_pipeline(tmp_path):
    requests = table1_requests(seeds=(0, 1), rounds=6, algorithms=("fedprox", "pfedme"), datasets=("0.5,0.5",))
    outcomes = run_all(requests, workers=1, label="table 1 (small)")
    for outcome in outcomes:
        trained = [h for h in outcome.history if h["trained"]]
        assert len(trained) == 6  # X: 6 of 6 iterations train; Upcycled-X: 6 of 12
        assert len(outcome.history) == (12 if outcome.request.algorithm.startswith("upcycled-") else 6)
        assert 0.4 < outcome.accuracy <= 1.0
    data = {**table1_data(outcomes, (0, 1), 6), "wall_minutes": 0.5, "workers": 1, "cpus": 2}
    page = write_evidence("upcycled-table1", data, ["table1", "--rounds", "6"], tmp_path)
    assert read_result(tmp_path / "evidence" / "upcycled-table1.json").kind == "upcycled-table1"
    text = page.read_text()
    for row in ("| FedProx |", "| Upcycled-FedProx |", "| pFedMe |", "| Upcycled-pFedMe |"):
        assert row in text
    assert "personalised accuracy" in text
    assert "`python benchmarks/evidence_upcycled.py table1 --rounds 6` re-runs the experiment" in text


def test_private_pipeline(tmp_path):
    outcomes = run_all(private_requests(rounds=6), workers=1, label="private (small)")
    counts = {(o.request.algorithm, o.request.privacy["noise_std"]): len(o.ledger["events"]) for o in outcomes}
    assert counts[("fedprox", "sigma")] == 6 * 30 and counts[("upcycled-fedprox", "sigma")] == 3 * 30
    data = private_data(outcomes, 1e-3)
    eps = {run["convention"]: run["epsilon_max"] for run in data["runs"] if run["algorithm"] == "upcycled-fedprox"}
    assert eps["sigma-squared"] > eps["sigma"]  # smaller noise std (0.64) → larger ε (audit point U1)
    page = write_evidence("upcycled-private", {**data, "wall_minutes": 0.1, "workers": 1, "cpus": 2}, ["private"], tmp_path)
    assert (tmp_path / "upcycled-private.png").stat().st_size > 0 and "![loss curves](upcycled-private.png)" in page.read_text()
