"""``examples/flower_audit.py`` runs in Flower's simulation, its checkpoint passes privaudit's commands, and the one-run
canary audit of the app (re-run with the canary mod) reports its bounds, ceiling and power."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flwr")

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_flower_example_is_recorded_audited_and_attacked(tmp_path):
    out = tmp_path / "flower"
    run = _run("examples/flower_audit.py", "--out", str(out), "--rounds", "2", "--canary-audit", "16", "--seed", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "recorded the Flower run" in run.stdout and "one-run-fdp" in run.stdout and "ceiling" in run.stdout

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["recorded"]["framework"] == "flwr" and manifest["config"]["rounds"] == 2
    assert [m["clients"] for m in manifest["metrics"]] == [list(range(8))] * 2
    assert all(m["test_accuracy"] is not None for m in manifest["metrics"])

    epsilon = _run("-m", "privaudit", "compute-epsilon", "--checkpoint", str(out), "--delta", "1e-5", "--json", timeout=300)
    assert epsilon.returncode == 0, epsilon.stderr
    text = epsilon.stdout
    assert "server" in text and "Flower DifferentialPrivacyServerSideFixedClipping" in text
    result = json.loads(text)
    flower_epsilon = [r for r in result["reported_epsilon"] if "accountant" in r["source"]]
    assert len(flower_epsilon) == 1 and flower_epsilon[0]["epsilon"] > 0  # Flower's own RDP figure, kept beside ours
    # every node trains: a round is the Gaussian(σ) Flower composed, so its RDP figure is a certified upper bound
    assert flower_epsilon[0]["assessment"]["status"] == "certified"
    assert flower_epsilon[0]["epsilon"] >= result["max_epsilon"]

    attack = _run("-m", "privaudit", "attack", "membership", "--checkpoint", str(out), "--attack", "loss", "--json", timeout=300)
    assert attack.returncode == 0, attack.stderr
    assert '"auc"' in attack.stdout.lower()

    audit = json.loads((out / "canary-run" / "one-run.json").read_text())
    data = audit.get("data", audit)
    bounds = {b["estimator"]: b for b in data["lower_bounds"]}
    assert set(bounds) == {"one-run", "one-run-fdp"}  # the recorded ledger is Gaussian without subsampling
    for bound in bounds.values():
        assert 0 <= bound["epsilon_lb"] <= bound["ceiling"] and bound["power"] is not None
    assert math.isfinite(data["claimed"]["epsilon"]) and data["attack"]["canaries"] == 16
    assert data["details"]["rounds_with_canaries"] == [1, 2]


def test_flower_example_refuses_a_bad_partition_in_one_line(tmp_path):
    run = _run("examples/flower_audit.py", "--out", str(tmp_path / "x"), "--clients", "12", "--per-client", "150", timeout=600)
    assert run.returncode != 0 and "no held-out digits" in run.stderr and "Traceback" not in run.stderr
