"""Scaled-down evidence runs (the full ones: ``python -m privaudit.papers.upcycled.experiments table1|private``)."""

from __future__ import annotations

import pytest

from privaudit.papers.upcycled.experiments import (
    private_requests,
    render_private,
    render_table1,
    run_all,
    table1_requests,
)

pytestmark = pytest.mark.slow


def test_table1_pipeline(tmp_path):
    requests = table1_requests(seeds=(0, 1), rounds=6, algorithms=("fedprox", "pfedme"), datasets=("0.5,0.5",))
    outcomes = run_all(requests, workers=1, label="table 1 (small)")
    for outcome in outcomes:
        trained = [h for h in outcome.history if h["trained"]]
        assert len(trained) == 6  # X: 6 of 6 iterations train; Upcycled-X: 6 of 12
        assert len(outcome.history) == (12 if outcome.request.algorithm.startswith("upcycled-") else 6)
        assert 0.4 < outcome.accuracy <= 1.0
    text = render_table1(outcomes, (0, 1), 6)
    for row in ("| FedProx |", "| Upcycled-FedProx |", "| pFedMe |", "| Upcycled-pFedMe |"):
        assert row in text
    assert "personalised accuracy" in text


def test_private_pipeline(tmp_path):
    outcomes = run_all(private_requests(rounds=6), workers=1, label="private (small)")
    counts = {(o.request.algorithm, o.request.privacy["noise_std"]): len(o.ledger["events"]) for o in outcomes}
    assert counts[("fedprox", "sigma")] == 6 * 30 and counts[("upcycled-fedprox", "sigma")] == 3 * 30
    text = render_private(outcomes, 1e-3, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
    rows = {line.split("|")[1].strip(): line.split("|") for line in text.splitlines() if line.startswith("| Upcycled-FedProx") and "convention) |" in line}
    eps_max_sigma = float(rows["Upcycled-FedProx, σ = 0.8 (σ convention)"][5])
    eps_max_sigma_squared = float(rows["Upcycled-FedProx, σ = 0.8 (σ² convention)"][5])
    assert eps_max_sigma_squared > eps_max_sigma  # smaller noise std (0.64) → larger ε (spec U1)
