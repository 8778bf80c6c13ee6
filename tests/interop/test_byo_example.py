"""examples/byo_pytorch.py runs as a user would run it, and its checkpoint passes compute-epsilon and attack membership."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from tests.cli.test_fuzz import run_cli

REPO = Path(__file__).resolve().parents[2]


def test_example_checkpoint_is_audited(tmp_path):
    out = tmp_path / "byo"
    done = subprocess.run([sys.executable, str(REPO / "examples" / "byo_pytorch.py"), "--out", str(out), "--rounds", "4",
                           "--save-client-releases"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "round  4" in done.stdout and (out / "manifest.json").is_file()

    code, text, err = run_cli("compute-epsilon", "--checkpoint", out, "--delta", "1e-5", "--json")
    assert code == 0, err
    ledger = json.loads(text)
    assert list(ledger["per_client"]) == ["server"]  # DP-FedAvg: client-level guarantee at the server
    assert 0 < ledger["max_epsilon"] < math.inf and ledger["per_client"]["server"]["steps"] == 4

    code, text, err = run_cli("attack", "membership", "--checkpoint", out, "--attack", "loss", "--json")
    assert code == 0, err
    result = json.loads(text)
    assert result["n_in"] + result["n_out"] == 1797 and 0 <= result["auc"] <= 1
