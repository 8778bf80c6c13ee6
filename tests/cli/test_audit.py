"""`privaudit audit` through the CLI entry point: happy paths and every bad input → one line, exit 2."""

import json
import math

import pytest
import torch

from tests.audit.helpers import one_line_audit_error as one_line_error
from tests.audit.helpers import run_audit as run

torch.set_num_threads(1)


def test_list_shows_every_claim(capsys):
    code, out, _ = run(capsys, "--list", "--json")
    assert code == 0
    rows = {r["claim_id"]: r for r in json.loads(out)}
    assert len(rows) == 6 and all(r["statement"] for r in rows.values())
    # what the paper states and what privaudit chose, with the paper's words
    up = rows["upcycled-thm6.2-fig3"]
    assert up["claimed_provenance"] == {"epsilon": "stated", "delta": "chosen"} and up["quotes"][0]["seed_file"].startswith("003")
    assert {n["name"] for n in up["stated"]} >= {"epsilon", "sigma"} and up["chosen"][0]["reason"]
    code, out, _ = run(capsys, "--list")
    assert code == 0 and "upcycled-thm6.2-fig3" in out
    for text in ("the paper's words", "stated by the paper", "chosen by privaudit", "ε stated, δ chosen", "Fig. 3 caption"):
        assert text in out


def test_suite_json_and_the_claim_table(capsys, tmp_path, monkeypatch):
    """One real ``audit --suite --json`` over two claims at one trial checks the JSON; the ``--claim`` table is then
    printed from the audit that run produced (each claim is audited once: the recipes train, which is the cost)."""
    import privaudit.audit.runner as runner
    from privaudit.audit.suites import register

    register("cli-test", "privatefl-cdp-eps8", 1)
    register("cli-test", "pfa-heterogeneous-calibration", 1)
    audits, real_run_claim = {}, runner.run_claim

    def recording_run_claim(claim_id, settings):
        audits[claim_id] = audit = real_run_claim(claim_id, settings)
        return audit

    monkeypatch.setattr(runner, "run_claim", recording_run_claim)
    code, out, err = run(capsys, "--suite", "cli-test", "--out", str(tmp_path), "--json", "--quiet")
    assert code == 0, err
    data = json.loads(out)
    assert [a["claim_id"] for a in data["audits"]] == ["privatefl-cdp-eps8", "pfa-heterogeneous-calibration"]
    assert all(a["verdict"] == "refuted" for a in data["audits"])
    cdp = data["audits"][0]
    assert cdp["verdict_basis"].startswith("refuted (as implemented)") and cdp["verdicts_by_role"]["implementation"]["verdict"] == "refuted"
    assert cdp["quotes"] and cdp["claimed_provenance"] == {"epsilon": "stated", "delta": "stated"}
    # each claim's result file holds what the JSON printed
    assert json.loads((tmp_path / "privatefl-cdp-eps8.json").read_text())["data"]["verdict_basis"] == cdp["verdict_basis"]

    # `--claim ID --out DIR` reaches run_claim with the settings given, writes the result and prints the table
    calls = []

    def replay(claim_id, settings):
        calls.append((claim_id, settings.trials, settings.out, settings.progress))
        return audits[claim_id]

    monkeypatch.setattr(runner, "run_claim", replay)
    code, out, err = run(capsys, "--claim", "pfa-heterogeneous-calibration", "--trials", "1", "--out", str(tmp_path), "--quiet")
    assert code == 0, err
    assert calls == [("pfa-heterogeneous-calibration", 1, tmp_path, False)]
    assert (tmp_path / "pfa-heterogeneous-calibration.json").exists()  # written by run_claim
    assert "refuted" in out and "calibration-code-defaults" in out
    # the claim's verdict names its basis, then one line per basis with its reason
    result = json.loads((tmp_path / "pfa-heterogeneous-calibration.json").read_text())["data"]
    assert result["verdict_basis"] and f"pfa-heterogeneous-calibration: {result['verdict']} — {result['verdict_basis']}" in out
    for v in result["verdicts_by_role"].values():
        assert f"  {v['basis']}: {v['verdict']} — " in out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.run import TrainSpec, run_training

    path = tmp_path_factory.mktemp("runs") / "priv"
    spec = TrainSpec(algorithm="fedavg", dataset="synthetic:iid", rounds=2, num_clients=10, privacy="output-perturbation",
                     privacy_options={"clip": 10.0, "noise": 0.5}, local=LocalTrainingConfig(epochs=1, batch_size=32, lr=0.1),
                     dataset_options={"dim": 20, "num_classes": 2})
    run_training(spec, path, progress=False)
    return path


def test_one_run_checkpoint_audit(capsys, tmp_path, checkpoint):
    code, out, err = run(capsys, "--checkpoint", str(checkpoint), "--canaries", "30", "--one-run", "--out", str(tmp_path),
                         "--power-trials", "20", "--quiet")
    assert code == 0, err
    data = json.loads((tmp_path / "one-run.json").read_text())["data"]
    assert [b["estimator"] for b in data["lower_bounds"]] == ["one-run", "one-run-fdp"]
    assert data["claimed"]["epsilon"] > 0 and data["verdict"] in ("refuted", "consistent", "inconclusive")
    # the engine records Thm 6.2's sensitivity as unverified for SGD models: the ledger certifies nothing
    assert data["accountant"][0]["assumptions_hold"] is False
    assert "verdict:" in out
    # the claim is the ledger's own ε, so the ledger never certifies it: the attack alone decides
    assert data["details"]["claim_source"].startswith("the checkpoint's ledger") and "certified ε ≤" not in data["reason"]


def test_checkpoint_without_a_training_recipe(capsys, tmp_path, checkpoint):
    from tests.audit.helpers import checkpoint_without_recipe

    one_line_error(capsys, "--checkpoint", str(checkpoint_without_recipe(checkpoint, tmp_path)), "--canaries", "10", "--one-run",
                   match="records no training recipe")


def test_checkpoint_with_too_many_canaries(capsys, checkpoint):
    one_line_error(capsys, "--checkpoint", str(checkpoint), "--canaries", "100000", "--one-run", match="pooled test records")


@pytest.mark.parametrize(("args", "match"), [
    (("--claim", "nope"), "unknown claim 'nope'"),
    (("--claim", "pfa-heterogeneous-calibration", "--trials", "0"), "--trials must be a positive integer"),
    (("--claim", "pfa-heterogeneous-calibration", "--executor", "threads"), "unknown executor 'threads'"),
    (("--suite", "no-such-suite"), "unknown suite 'no-such-suite'"),
    ((), "exactly one of --list, --claim ID, --suite NAME, --checkpoint DIR or --scores FILE"),
    (("--list", "--claim", "pfa-heterogeneous-calibration"), "exactly one of"),
    (("--checkpoint", "/no/such/run", "--canaries", "10", "--one-run"), "manifest.json is missing"),
    (("--checkpoint", "/no/such/run", "--canaries", "10"), "add --one-run"),
    (("--checkpoint", "/no/such/run", "--one-run"), "needs --canaries"),
    (("--claim", "pfa-heterogeneous-calibration", "--one-run"), "apply to --checkpoint audits only"),
    (("--claim", "pfa-heterogeneous-calibration", "--alpha", "2"), "significance must lie in (0, 1)"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, args, match):
    one_line_error(capsys, *args, match=match)


def test_ray_executor_when_not_installed(capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as without Ray (the flower extra installs it here)
    one_line_error(capsys, "--claim", "pfa-heterogeneous-calibration", "--executor", "ray", match="needs Ray")


@pytest.mark.parametrize("mode", [("--one-run", "--canaries", "10"), ("--gradient-canaries", "4")])
def test_unwritable_out_is_refused_before_training(capsys, tmp_path, checkpoint, mode, monkeypatch):
    import privaudit.fl.canaries.compose as compose

    def no_training(*args, **kwargs):
        raise AssertionError("the --out check must come before the re-training")

    monkeypatch.setattr(compose, "run_spec_on_dataset", no_training)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    one_line_error(capsys, "--checkpoint", str(checkpoint), *mode, "--out", str(blocker), match="is a file, not a folder")


# -- the claim table on any terminal width, and progress when the output is not a terminal (issue 24) ---------------
VERDICT_WORDS = ("refuted", "consistent", "inconclusive")


@pytest.fixture(scope="module")
def cdp_audit():
    from privaudit.audit.runner import AuditSettings, run_claim

    return run_claim("privatefl-cdp-eps8", AuditSettings(trials=1, progress=False, power_trials=20, bootstrap_resamples=20))


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_claim_table_never_cuts_a_verdict_word_or_a_number(cdp_audit, width):
    import re

    from rich.cells import cell_len
    from rich.console import Console

    from privaudit.audit.summary import audit_table

    console = Console(width=width, record=True, color_system=None)
    console.print(audit_table([cdp_audit], width=width))
    text = console.export_text()
    assert all(cell_len(line) <= width for line in text.splitlines()), text
    tokens = re.findall(r"[\w.+\-∞]+", text)
    cut = [t for t in tokens for word in VERDICT_WORDS if len(t) >= 3 and word.startswith(t) and t != word]
    assert not cut, text  # never "ref" for "refuted"
    lines = text.splitlines()
    for outcome in cdp_audit.readings:
        reading_line = next(line for line in lines if re.search(rf"\b{re.escape(outcome.reading.reading_id)}\b", line))
        assert re.search(rf"\b{outcome.verdict.verdict.value}\b", reading_line), (reading_line, text)
        shown = [e for e in outcome.analysis.evidence if e.implementation or "accountant ε (paper)" in text]
        for e in shown:  # every end of every accountant's ε shown, whole (never "[15"); the paper column may go first
            for value in (e.lower, e.upper):
                if value is not None and math.isfinite(value):
                    assert f"{value:.4g}" in tokens, (value, text)
        if outcome.bounds:  # the best attack's bound
            assert f"{max(b.epsilon_lb for b in outcome.bounds):.3g}" in tokens, text
    # the refuting exact ε of the per-tensor reading: a lower bound that holds, its upper end starred alone
    assert re.search(r"≥15\.13, ≤15\.13\*", text) and not re.search(r"≥15\.13\*|\[15\.13, 15\.13\]\*", text)


def test_a_narrow_terminal_gets_one_block_per_reading(cdp_audit):
    from rich.console import Console

    from privaudit.audit.summary import audit_table

    console = Console(width=60, record=True, color_system=None)
    console.print(audit_table([cdp_audit], width=60))
    text = console.export_text()
    assert "reference-mnist-dnn (impl.): refuted" in text and "accountant ε (impl.): ≥15.13, ≤15.13*; ≤16.6*" in text
    wide = Console(width=200, record=True, color_system=None)
    wide.print(audit_table([cdp_audit], width=200))
    text = wide.export_text()
    assert "┃ ceiling" in text and "┃ power" in text  # every column where they fit


def test_a_suite_step_prints_its_progress_when_the_output_is_not_a_terminal(capsys, tmp_path):
    """`make demo > log` used to print nothing for the whole audit: rich draws bars only on a terminal."""
    import re

    from privaudit.audit.suites import register

    register("progress-test", "upcycled-thm6.3-fig4", 3)
    code, _, err = run(capsys, "--suite", "progress-test", "--out", str(tmp_path))  # progress on, stderr captured
    assert code == 0, err
    for reading in ("theorem-setting", "reference-fedprox", "reference-readme"):
        assert re.search(rf"^upcycled-thm6\.3-fig4 · {reading}: \S", err, re.M), err  # a line per reading
    bars = re.findall(r"^upcycled-thm6\.3-fig4 · .*: (\d+)/3$", err, re.M)  # each reading's trials, as lines
    assert bars.count("0") == 3 and bars.count("3") == 3, err
