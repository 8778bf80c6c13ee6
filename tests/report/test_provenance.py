"""Result provenance names the program that ran and never holds a secret from its command line (issue 24)."""

from __future__ import annotations

import json
import sys

import pytest

from privaudit.cli.app import main
from privaudit.report.command_line import REDACTED, current_command, redact, redact_text, secret_name
from privaudit.report.results import make_result, provenance, write_result

TOKEN = "2d7c4f1e9a0b3c5d7e9f1a2b3c4d5e6f"
FLWR = ["/venv/bin/python3.11", "/venv/bin/flwr-serverapp", "--runtime-api-address", "127.0.0.1:39091",
        "--token", TOKEN, "--insecure", "--run-once"]
SECRETS = [TOKEN, "hunter2", "s3cr3t-Value", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
           "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz"]


def test_secret_flags_values_and_url_userinfo_are_redacted():
    argv = ["tool", "--token", "hunter2", "--api-key=s3cr3t-Value", "--password", "--", "DB_PASSWORD=hunter2",
            "https://alice:hunter2@example.org/data?token=hunter2&page=2", "--out", "runs/mine",
            "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "--note=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJlMTIz",
            "--lr", "0.1", "--checkpoint", f"/runs/{TOKEN}"]
    out = redact(argv)
    text = " ".join(out)
    assert not any(secret in text for secret in SECRETS)
    assert out[:5] == ["tool", "--token", REDACTED, f"--api-key={REDACTED}", "--password"]
    assert f"DB_PASSWORD={REDACTED}" in out and f"https://{REDACTED}@example.org/data?token={REDACTED}&page=2" in out
    assert out[out.index("--out") + 1] == "runs/mine" and out[out.index("--lr") + 1] == "0.1"  # ordinary values stay
    assert secret_name("--auth-token") and secret_name("SSH_KEY") and not secret_name("--rounds")
    assert TOKEN not in redact_text(f"privaudit train --out 'a b' --token {TOKEN}")


@pytest.mark.parametrize(("orig", "expected"), [
    (FLWR, f"flwr-serverapp --runtime-api-address 127.0.0.1:39091 --token {REDACTED} --insecure --run-once"),
    (["python3", "examples/byo_pytorch.py", "--out", "runs/byo"], "python examples/byo_pytorch.py --out runs/byo"),
    (["python", "-m", "privaudit", "train", "--out", "r"], "privaudit train --out r"),
    (["/v/bin/python", "/v/bin/privaudit", "report", "x"], "privaudit report x"),
    (["python", "-u", "-m", "mypkg.train", "--seed", "0"], "python -u -m mypkg.train --seed 0"),
    (["python", "-c", f"run(token='{TOKEN}')"], "python -c <code>"),
])
def test_the_program_that_ran_is_named(monkeypatch, orig, expected):
    monkeypatch.setattr(sys, "orig_argv", orig)
    assert current_command() == expected
    assert provenance()["command"] == expected


def test_a_recorded_run_inside_flwr_run_writes_no_token(monkeypatch, tmp_path):
    """The recorder writes training.json from a process started by `flwr run` with a SuperLink token in its argv."""
    from tests.interop.recorded import record_tiny_federation

    monkeypatch.setattr(sys, "orig_argv", FLWR)
    monkeypatch.setattr(sys, "argv", FLWR[1:])
    path = record_tiny_federation(tmp_path / "ck")
    for name in ("training.json", "manifest.json"):
        assert TOKEN not in (path / name).read_text()
    command = json.loads((path / "training.json").read_text())["provenance"]["command"]
    assert command.startswith("flwr-serverapp ") and f"--token {REDACTED}" in command and "privaudit" not in command


def test_privaudit_train_records_its_own_command_not_the_process(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "orig_argv", FLWR)
    monkeypatch.setattr(sys, "argv", FLWR[1:])
    out = tmp_path / "run"
    args = ["train", "--algorithm", "fedavg", "--dataset", "synthetic:iid", "--dataset-option", "dim=5",
            "--dataset-option", "num_classes=2", "--num-clients", "3", "--local-epochs", "1", "--rounds", "1",
            "--quiet", "--out", str(out)]
    assert main(args) == 0
    written = (out / "training.json").read_text()
    assert TOKEN not in written
    assert json.loads(written)["provenance"]["command"] == "privaudit " + " ".join(args)


def test_the_report_redacts_results_written_before_redaction(tmp_path):
    result = make_result("table", "old", {"columns": ["a"], "rows": [[1]]})
    result.provenance["command"] = f"privaudit --runtime-api-address 127.0.0.1:39091 --token {TOKEN} --insecure"
    write_result(tmp_path / "old.json", result)
    from privaudit.report.build import build_report

    build_report([tmp_path / "old.json"], tmp_path / "report")
    written = [p for p in (tmp_path / "report").rglob("*") if p.is_file() and p.suffix in (".md", ".html", ".json")]
    assert len(written) >= 3 and not any(TOKEN in p.read_text() for p in written)  # report.md, report.html, results.json
