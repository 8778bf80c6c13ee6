"""`compute-epsilon --checkpoint` states no guarantee the run's own ledger marks invalid, says why, and classifies the
framework's own ε (certified / not an upper bound / refuted) in the table, the JSON and the report (issue 24)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from privaudit.accounting import Gaussian, SubsampledGaussian
from privaudit.accounting.ledger import SERVER, PrivacyEvent
from privaudit.accounting.mechanisms import Neighbouring, Sampling
from privaudit.accounting.reported import FrameworkAccounting
from privaudit.interop import DatasetReference, FederationRecorder
from tests.cli.test_fuzz import run_cli

NOT_CLIPPED = "an update of norm 3.2 > C = 1 arrived: the clients did not clip (add fixedclipping_mod to the ClientApp's mods)"
FLOWER_RDP = 19.05359753163139  # Flower 1.42's RdpAccountant: σ = 1, 10 releases, no amplification, δ = 1e-5


def _record(out, *, valid: bool, rounds: int = 10):
    order = np.random.default_rng(0).permutation(1797)
    data = DatasetReference.packaged("digits", partition={k: order[k * 20:(k + 1) * 20] for k in range(10)},
                                     non_members=order[200:260])
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(64, 10))
    fixed = SubsampledGaussian(1.0, 0.5, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT)
    with FederationRecorder(out, model=net, dataset=data, framework="flwr") as recorder:
        for r in range(1, rounds + 1):
            event = PrivacyEvent(SERVER, r, fixed, 1, ("5 of 10 nodes sampled uniformly without replacement",),
                                 valid=valid, note="" if valid else NOT_CLIPPED)
            recorder.record_round(r, global_model=net, privacy_events=[event], sampled_clients=[0, 2, 4, 6, 8])
        model = FrameworkAccounting("rdp", ((Gaussian(1.0), rounds),), Neighbouring.ADD_REMOVE, "upper",
                                    model="Flower rdp accounting with sampling_method=no-amplification",
                                    caveat="an added client can displace a sampled one, so the noised sum moves by up to 2C")
        recorder.report_epsilon(FLOWER_RDP, 1e-5, source="Flower DifferentialPrivacyServerSideFixedClipping accountant "
                                                          f"(rdp, {rounds} releases)", client=SERVER, accounted_as=model)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("statements")
    return {"valid": _record(root / "valid", valid=True), "unclipped": _record(root / "unclipped", valid=False)}


def test_json_never_states_a_guarantee_its_ledger_marks_invalid(runs):
    code, out, err = run_cli("compute-epsilon", "--checkpoint", runs["unclipped"], "--delta", "1e-5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["guarantee"] == "invalid" and data["all_valid"] is False
    assert "-DP" not in data["statement"] and "no DP guarantee established" in data["statement"]
    assert "did not clip" in data["statement"]
    server = data["per_client"][SERVER]
    assert server["guarantee"] == "invalid" and server["failures"] == [{"reason": NOT_CLIPPED, "rounds": list(range(1, 11))}]
    assert data["reported_epsilon"][0]["assessment"]["status"] == "unverified"


def test_the_table_says_why_and_points_nowhere_else(runs):
    code, out, err = run_cli("compute-epsilon", "--checkpoint", runs["unclipped"], "--delta", "1e-5")
    assert code == 0, err
    text = " ".join(out.split())
    assert "no DP guarantee established" in text and "invalid for client server (rounds 1–10):" in text
    assert "did not clip" in text and "see their assumptions in --json" not in text and "max ε =" not in text


def test_flowers_figure_is_refuted_for_sampled_clients(runs, tmp_path):
    code, out, err = run_cli("compute-epsilon", "--checkpoint", runs["valid"], "--delta", "1e-5", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["guarantee"] == "dp" and data["max_epsilon"] == pytest.approx(31.40, abs=0.01)
    (flower,) = data["reported_epsilon"]
    assessment = flower["assessment"]
    assert assessment["status"] == "refuted" and assessment["lower_bound"]["epsilon"] > FLOWER_RDP
    assert assessment["privaudit_epsilon"] == pytest.approx(data["max_epsilon"])
    assert "displace" in assessment["reason"]

    code, out, err = run_cli("compute-epsilon", "--checkpoint", runs["valid"], "--delta", "1e-5",
                             "--out", tmp_path / "ledger.json")
    assert code == 0, err
    text = " ".join(out.split())
    assert "ε = 19.0536 at δ = 1e-05 — refuted:" in text and "privaudit's certified ε at that δ: 31.401 (ctd)" in text

    from privaudit.report.build import build_report

    files = build_report([tmp_path / "ledger.json"], tmp_path / "report", title="statements")
    md = " ".join(files.markdown.read_text().split())
    assert "ε reported by the training framework itself" in md and "— refuted:" in md and "displace" in md


def test_the_report_does_not_call_an_invalid_ledger_a_guarantee(runs, tmp_path):
    code, _, err = run_cli("compute-epsilon", "--checkpoint", runs["unclipped"], "--delta", "1e-5",
                           "--out", tmp_path / "ledger.json", "--json")
    assert code == 0, err
    from privaudit.report.build import build_report

    md = " ".join(build_report([tmp_path / "ledger.json"], tmp_path / "report").markdown.read_text().split())
    assert "**not a guarantee**" in md and "(the federation's guarantee)" not in md and "did not clip" in md


def test_the_work_limit_decides_the_accountant_and_the_time_limit_is_gone():
    """One command, one answer: the limit is counted in work units, so a small --work-limit gives rdp everywhere."""
    args = ["compute-epsilon", "--mechanism", "subsampled-gaussian", "--noise-multiplier", "1", "--sample-rate", "0.01",
            "--steps", "1000", "--delta", "1e-5", "--json"]
    code, out, err = run_cli(*args)
    assert code == 0 and json.loads(out)["accountant"] == "ctd", err
    code, out, err = run_cli(*args, "--work-limit", "1e-6")
    assert code == 0, err
    data = json.loads(out)
    assert data["accountant"] == "rdp" and any("ctd did not answer" in n and "work units" in n for n in data["notes"])
    code, _, err = run_cli(*args, "--time-limit", "30")
    assert code == 2 and "replaced by --work-limit" in err and "Traceback" not in err
