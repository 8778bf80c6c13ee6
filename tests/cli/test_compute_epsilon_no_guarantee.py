"""`compute-epsilon --checkpoint` on a `--privacy none` run: no DP guarantee (ε = ∞), never ε = 0 (issue 13 item 8)."""

import json

import pytest

from privaudit.cli.app import main

STATEMENT = "no DP guarantee (ε = ∞)"


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "plain"
    code = main(["train", "--algorithm", "fedavg", "--privacy", "none", "--dataset", "synthetic:iid", "--dataset-option", "dim=10",
                 "--num-clients", "3", "--rounds", "2", "--local-epochs", "1", "--out", str(out), "--quiet"])
    assert code == 0
    return out


def test_non_private_run_records_one_non_private_event_per_release(plain_run):
    from privaudit.fl.engine.checkpoint import read_ledger

    ledger = read_ledger(plain_run)
    assert len(ledger.events) == 3 * 2 and not any(e.has_guarantee for e in ledger.events)
    assert "Infinity" not in (plain_run / "manifest.json").read_text()  # the ledger stays strict JSON


def test_json_says_infinity_and_no_guarantee(plain_run, capsys):
    capsys.readouterr()
    assert main(["compute-epsilon", "--checkpoint", str(plain_run), "--delta", "1e-5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_epsilon"] == "inf" and data["mean_epsilon"] == "inf"
    assert data["guarantee"] == "none" and STATEMENT in data["statement"]
    assert all(c["epsilon"] == "inf" and c["guarantee"] == "none" for c in data["per_client"].values())


def test_table_says_no_guarantee(plain_run, capsys):
    capsys.readouterr()
    assert main(["compute-epsilon", "--checkpoint", str(plain_run), "--delta", "1e-5"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert STATEMENT in out and "max ε = 0" not in out


def test_checkpoint_with_an_empty_ledger_claims_nothing(plain_run, tmp_path, capsys):
    """Checkpoints written before non-private events existed have an empty ledger: still ε = ∞, not 0."""
    import shutil

    from privaudit.fl.engine.checkpoint import manifest_digest

    legacy = tmp_path / "legacy"
    shutil.copytree(plain_run, legacy)
    manifest = json.loads((legacy / "manifest.json").read_text())
    manifest["ledger"]["events"] = []
    manifest["manifest_sha256"] = manifest_digest(manifest)
    (legacy / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["compute-epsilon", "--checkpoint", str(legacy), "--delta", "1e-5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["max_epsilon"] == "inf" and data["guarantee"] == "none" and STATEMENT in data["statement"]


def test_mechanism_with_infinite_epsilon(capsys):
    capsys.readouterr()
    assert main(["compute-epsilon", "-m", "pure-dp", "--epsilon", "inf", "--steps", "2", "--delta", "1e-5", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["guarantee"] == "none" and all(v == "inf" for v in data["epsilon"].values())
