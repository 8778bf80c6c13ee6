"""The PFA evidence pipeline on a few short runs (the full one: ``python benchmarks/evidence_pfa.py``)."""

from __future__ import annotations

import pytest

from privaudit.papers.pfa.evidence import EvidenceRun, evidence_data, run_all, write_evidence
from privaudit.report.results import read_result

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")]


def test_evidence_pipeline(tmp_path):
    runs = [EvidenceRun("pfa-lr", "iid", 20, name, rounds=3) for name in ("pfa", "pfa-plus", "public-only", "weiavg", "fedavg-hdp")]
    runs += [EvidenceRun("pfa-lr", "iid", 20, name, rounds=3, calibration="reference") for name in ("pfa", "fedavg-hdp")]
    outcomes = run_all(runs, workers=1)
    by = {(o["run"]["algorithm"], o["run"]["calibration"]): o for o in outcomes}
    assert by[("pfa-plus", "rdp")]["communication"]["reduction_private"] > 0.4
    assert not by[("pfa", "rdp")]["privacy_summary"]["over_budget"]
    reference = {r["client_id"]: r for r in by[("pfa", "reference")]["privacy"]}
    public = set(by[("pfa", "reference")]["plan"]["population_split"]["public"])
    private_ratios = [r["ratio"] for c, r in reference.items() if c not in public and r["realised_steps"]]
    assert private_ratios and max(private_ratios) < 0.2  # the closed form over-noises small budgets (audit point F1)
    data = evidence_data(outcomes, 1.0, 1)
    page = write_evidence(data, tmp_path, "python benchmarks/evidence_pfa.py --quick")
    assert read_result(tmp_path / "evidence" / "pfa.json").kind == "pfa-evidence"
    assert all((tmp_path / name).stat().st_size > 0 for name in ("pfa-accuracy-lr.png", "pfa-uplink.png"))
    text = page.read_text()
    for needle in ("| PFA+ |", "| public-only FedAvg |", "real vs reference calibration", "PFA+ reduction, private", "98.97 %",
                   "T* = K·T/M is an expectation"):
        assert needle in text
