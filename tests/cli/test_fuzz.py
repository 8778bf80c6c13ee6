"""Bad input to every command is one line and exit code 2, never a traceback; the CLI never loses finished work.

Through :func:`privaudit.cli.app.main`, as a user would type them:

* a table of bad inputs for ``compute-epsilon``, ``train``, ``audit``, ``report``, ``attack membership`` and
  ``attack inversion`` (plus a hypothesis search over out-of-domain numbers), each answered by exactly one
  ``error:`` line on stderr and exit code 2;
* unusable ``--out`` paths refused before any work: the expensive entry points are replaced by functions that
  fail the test if they are called;
* a write that fails after the work anyway (disk full) keeps the result in a temporary folder and says where;
* forged checkpoints (sha256s recomputed after changing tensor shapes) and non-UTF-8 schedule files;
* SIGTERM and Ctrl-C during a process-pool run: the pool stops at once, leaving no worker and no semaphore, and the
  command exits 143 (SIGTERM) or 130 (Ctrl-C).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privaudit.cli.app import main
from privaudit.fl.engine.checkpoint import manifest_digest

REPO = Path(__file__).resolve().parents[2]
TINY = ["--dataset", "synthetic:iid", "--dataset-option", "dim=5", "--dataset-option", "num_classes=2", "--num-clients", "3",
        "--local-epochs", "1", "--quiet", "--json"]


def run_cli(*args: object) -> tuple[int, str, str]:
    """``main(args)`` with stdout and stderr captured (works inside hypothesis, where capsys cannot)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def assert_one_error_line(code: int, err: str, match: str | None = None) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert code == 2, (code, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    if match is not None:
        assert re.search(match, lines[0]), lines[0]
    return lines[0]


# -- fixtures: a tiny trained federation, forged copies of it, awkward files ----------------------------------
@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    ck = root / "ck"
    assert main(["train", "--algorithm", "fedavg", *TINY, "--rounds", "2", "--out", str(ck), "--save-client-updates"]) == 0
    paths = {"ck": ck, "dir": root / "empty-dir", "file": root / "a-file", "binary": root / "binary.json",
             "trunc": root / "truncated.json", "scores": root / "scores.json", "tmp": root}
    paths["dir"].mkdir()
    paths["file"].write_text("not a folder\n")
    paths["binary"].write_bytes(b"\xff\xfe\x00\x80 not UTF-8")
    paths["trunc"].write_text('{"in": [1, 2], "out": [')
    paths["scores"].write_text(json.dumps({"in": [0.9, 0.8, 0.7, 0.95], "out": [0.1, 0.3, 0.2, 0.4]}))
    paths["forged"] = forge(ck, root / "forged", manifest_too=False)
    paths["forged-manifest"] = forge(ck, root / "forged-manifest", manifest_too=True)
    return paths


def forge(source: Path, target: Path, *, manifest_too: bool) -> Path:
    """A copy of ``source`` whose weight matrices are (3, 7) instead of (2, 5), sha256s and manifest hash recomputed.

    With ``manifest_too`` the manifest's recorded parameter shapes are changed to match the forged tensors, so only
    the architecture itself can tell.
    """
    import torch
    from safetensors.torch import load, save

    shutil.copytree(source, target)
    manifest = json.loads((target / "manifest.json").read_text())
    for relative, entry in manifest["tensors"].items():
        tensors = load((target / relative).read_bytes())
        tensors = {k: torch.zeros(3, 7) if k.endswith("linear.weight") else v for k, v in tensors.items()}
        data = save(tensors, metadata={"kind": entry["kind"], "round": entry["round"]})
        (target / relative).write_bytes(data)
        entry.update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    if manifest_too:
        manifest["model"]["parameters"]["linear.weight"] = [3, 7]
    manifest["manifest_sha256"] = manifest_digest(manifest)
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def expand(args: tuple[str, ...], files: dict[str, Path]) -> list[str]:
    return [a.format(**{k: str(v) for k, v in files.items()}) for a in args]


# -- the table: one line and exit code 2 -------------------------------------------------------------------
BAD_INPUTS: list[tuple[str, tuple[str, ...], str]] = [
    # compute-epsilon
    ("ce-no-source", ("compute-epsilon", "--delta", "1e-5"), "mechanism|schedule|checkpoint"),
    ("ce-unknown-mechanism", ("compute-epsilon", "--mechanism", "nope", "--delta", "1e-5"), "nope"),
    ("ce-nan-sigma", ("compute-epsilon", "--mechanism", "gaussian", "--noise-multiplier", "nan", "--steps", "1",
                                   "--delta", "1e-5"), "noise"),
    ("ce-delta-2", ("compute-epsilon", "--mechanism", "gaussian", "--noise-multiplier", "1", "--delta", "2"), "delta|δ"),
    ("ce-rate-1.5", ("compute-epsilon", "--mechanism", "subsampled-gaussian", "--noise-multiplier", "1", "--sample-rate", "1.5",
                     "--steps", "10", "--delta", "1e-5"), "sample"),
    ("ce-steps-negative", ("compute-epsilon", "--mechanism", "subsampled-gaussian", "--noise-multiplier", "1", "--sample-rate",
                           "0.1", "--steps", "-3", "--delta", "1e-5"), "steps"),
    ("ce-steps-not-int", ("compute-epsilon", "--mechanism", "gaussian", "--noise-multiplier", "1", "--steps", "ten",
                          "--delta", "1e-5"), "'--steps'.*valid integer"),
    ("ce-schedule-binary", ("compute-epsilon", "--schedule", "{binary}", "--delta", "1e-5"), "not UTF-8"),
    ("ce-schedule-truncated", ("compute-epsilon", "--schedule", "{trunc}", "--delta", "1e-5"), "not valid JSON"),
    ("ce-schedule-folder", ("compute-epsilon", "--schedule", "{dir}", "--delta", "1e-5"), "cannot read"),
    ("ce-schedule-missing", ("compute-epsilon", "--schedule", "{tmp}/nope.json", "--delta", "1e-5"), "nope.json"),
    ("ce-checkpoint-empty", ("compute-epsilon", "--checkpoint", "{dir}", "--delta", "1e-5"), "not a trained federation"),
    ("ce-checkpoint-binary", ("compute-epsilon", "--checkpoint", "{binary}", "--delta", "1e-5"), ""),
    ("ce-out-folder", ("compute-epsilon", "--checkpoint", "{ck}", "--delta", "1e-5", "--out", "{dir}"), "is a directory"),
    ("ce-out-under-file", ("compute-epsilon", "--checkpoint", "{ck}", "--delta", "1e-5", "--out", "{file}/x.json"), "is a file"),
    ("ce-unknown-accountant", ("compute-epsilon", "--checkpoint", "{ck}", "--delta", "1e-5", "--accountant", "nope"), "nope"),
    # train
    ("train-unknown-algorithm", ("train", "--algorithm", "nope", *TINY, "--rounds", "1"), "nope"),
    ("train-unknown-dataset", ("train", "--algorithm", "fedavg", "--dataset", "nope", "--rounds", "1", "--quiet"), "nope"),
    ("train-rounds-0", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "0"), "rounds"),
    ("train-rounds-text", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "two"), "'--rounds'.*valid integer"),
    ("train-lr-nan", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--lr", "nan"), "lr|learning"),
    ("train-batch-0", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--batch-size", "0"), "batch"),
    ("train-clients-0", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--clients-per-round", "0"), ""),
    ("train-model-mismatch", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--model", "convnet"), "convnet"),
    ("train-dataset-option", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--dataset-option", "noequals"), "KEY=VALUE"),
    ("train-unknown-privacy", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--privacy", "nope"), "nope"),
    ("train-mnist-missing", ("train", "--algorithm", "fedavg", "--dataset", "mnist:{tmp}/nope", "--rounds", "1", "--quiet"), ""),
    ("train-threads-0", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--threads", "0"), "threads"),
    ("train-out-existing", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--out", "{ck}"), "already holds"),
    ("train-unknown-flag", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--bogus"), "bogus"),
    ("train-workers-0", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--workers", "0"), "--workers must be at least 1"),
    ("train-workers-1000", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--workers", "1000"),
     "--workers 1000 is more than this machine's .* CPU cores"),
    # audit
    ("audit-no-mode", ("audit",), "exactly one of"),
    ("audit-two-modes", ("audit", "--list", "--suite", "default"), "exactly one of"),
    ("audit-unknown-claim", ("audit", "--claim", "nope", "--out", "{tmp}/audit-nope"), "unknown claim"),
    ("audit-unknown-suite", ("audit", "--suite", "nope", "--out", "{tmp}/audit-nope"), "nope"),
    ("audit-trials-0", ("audit", "--claim", "upcycled-thm6.2-fig3", "--trials", "0"), "trials"),
    ("audit-unknown-executor", ("audit", "--claim", "upcycled-thm6.2-fig3", "--executor", "nope"), "nope"),
    ("audit-scores-truncated", ("audit", "--scores", "{trunc}"), ""),
    ("audit-scores-binary", ("audit", "--scores", "{binary}"), ""),
    ("audit-scores-folder", ("audit", "--scores", "{dir}"), ""),
    ("audit-scores-missing", ("audit", "--scores", "{tmp}/nope.json"), "nope.json"),
    ("audit-checkpoint-empty", ("audit", "--checkpoint", "{dir}", "--one-run", "--canaries", "10"), "not a trained federation"),
    ("audit-one-run-no-canaries", ("audit", "--checkpoint", "{ck}", "--one-run", "--claimed-epsilon", "1"), "canaries"),
    ("audit-canaries-0", ("audit", "--checkpoint", "{ck}", "--one-run", "--canaries", "0", "--claimed-epsilon", "1"), "canar"),
    ("audit-gradient-canaries-1", ("audit", "--checkpoint", "{ck}", "--gradient-canaries", "1"), "at least 2"),
    ("audit-claimed-nan", ("audit", "--checkpoint", "{ck}", "--one-run", "--canaries", "10", "--claimed-epsilon", "nan"), ""),
    ("audit-delta-5", ("audit", "--checkpoint", "{ck}", "--one-run", "--canaries", "10", "--claimed-epsilon", "1",
                       "--delta", "5"), "delta|δ"),
    # report
    ("report-no-input", ("report",), "INPUTS|input|Missing"),
    ("report-missing-input", ("report", "{tmp}/nope", "--out", "{tmp}/report-a"), "no such file"),
    ("report-binary-input", ("report", "{binary}", "--out", "{tmp}/report-b"), "not a JSON file"),
    ("report-page-of-a-non-evidence", ("report", "{ck}/training.json", "--out", "{tmp}/page.md"), "no evidence page"),
    # attack membership
    ("mia-unknown-attack", ("attack", "membership", "--checkpoint", "{ck}", "--attack", "nope"), "unknown membership attack"),
    ("mia-lira-one-shadow", ("attack", "membership", "--checkpoint", "{ck}", "--attack", "lira", "--shadows", "1"), "2 shadow"),
    ("mia-max-examples-0", ("attack", "membership", "--checkpoint", "{ck}", "--max-examples", "0"), "max-examples"),
    ("mia-workers-0", ("attack", "membership", "--checkpoint", "{ck}", "--workers", "0"), "--workers must be at least 1"),
    ("mia-workers-negative", ("attack", "membership", "--checkpoint", "{ck}", "--attack", "lira", "--executor", "process",
                              "--workers", "-1"), "--workers must be at least 1, got -1"),
    ("mia-lira-workers-1000", ("attack", "membership", "--checkpoint", "{ck}", "--attack", "lira", "--executor", "process",
                               "--workers", "1000"), "CPU cores"),
    ("mia-unknown-threat-model", ("attack", "membership", "--checkpoint", "{ck}", "--threat-model", "nope"), "threat model"),
    ("mia-unknown-executor", ("attack", "membership", "--checkpoint", "{ck}", "--attack", "lira", "--executor", "nope"), "executor"),
    ("mia-lira-mode", ("attack", "membership", "--checkpoint", "{ck}", "--attack", "lira", "--shadows", "2", "--mode", "nope"), "mode"),
    ("mia-checkpoint-empty", ("attack", "membership", "--checkpoint", "{dir}"), "not a trained federation"),
    ("mia-checkpoint-is-file", ("attack", "membership", "--checkpoint", "{file}"), "cannot read"),
    ("mia-round-99", ("attack", "membership", "--checkpoint", "{ck}", "--round", "99", "--quiet"), "global_r0099"),
    ("mia-forged-tensors", ("attack", "membership", "--checkpoint", "{forged}", "--quiet"),
     r"does not fit the model it claims to hold: 'linear.weight' has shape \(3, 7\), the architecture's is \(2, 5\)"),
    ("mia-forged-manifest", ("attack", "membership", "--checkpoint", "{forged-manifest}", "--quiet"),
     r"records tensors that model 'logreg' does not have"),
    ("mia-forged-releases", ("attack", "membership", "--checkpoint", "{forged}", "--threat-model", "client-releases", "--quiet"),
     "does not fit the model"),
    # attack inversion
    ("inv-no-mode", ("attack", "inversion",), "exactly one of --dataset"),
    ("inv-both-modes", ("attack", "inversion", "--dataset", "images", "--checkpoint", "{ck}"), "exactly one of"),
    ("inv-unknown-attack", ("attack", "inversion", "--dataset", "images", "--attack", "nope"), "unknown attack"),
    ("inv-images-0", ("attack", "inversion", "--dataset", "images", "--images", "0"), "images"),
    ("inv-label-iterations", ("attack", "inversion", "--dataset", "images", "--attack", "label", "--iterations", "3"), "iterat"),
    ("inv-defence-sigma-text", ("attack", "inversion", "--dataset", "images", "--defense", "dpsgd:abc"), "noise multiplier"),
    ("inv-unknown-device", ("attack", "inversion", "--dataset", "images", "--device", "tpu"), "device"),
    ("inv-unknown-dataset", ("attack", "inversion", "--dataset", "nope", "--attack", "label", "--images", "1", "--quiet"), "nope"),
    ("inv-no-round", ("attack", "inversion", "--checkpoint", "{ck}", "--client", "0"), "--round"),
    ("inv-client-99", ("attack", "inversion", "--checkpoint", "{ck}", "--client", "99", "--round", "1"), "client 99"),
    ("inv-round-99", ("attack", "inversion", "--checkpoint", "{ck}", "--client", "0", "--round", "99"), "round 99"),
    ("inv-forged", ("attack", "inversion", "--checkpoint", "{forged}", "--client", "0", "--round", "1", "--attack", "label",
                    "--quiet"), "does not fit the model"),
    ("inv-forged-manifest", ("attack", "inversion", "--checkpoint", "{forged-manifest}", "--client", "0", "--round", "1",
                             "--attack", "label", "--quiet"), "does not have"),
]


@pytest.mark.parametrize(("args", "match"), [pytest.param(a, m, id=i) for i, a, m in BAD_INPUTS])
def test_bad_input_is_one_error_line_and_exit_2(files, args, match):
    code, _, err = run_cli(*expand(args, files))
    assert_one_error_line(code, err, match or None)


def test_every_command_is_in_the_table():
    commands = {" ".join(a[:2]) if a[0] == "attack" else a[0] for _, a, _ in BAD_INPUTS}
    assert commands == {"compute-epsilon", "train", "audit", "report", "attack membership", "attack inversion"}


OUT_OF_DOMAIN = st.one_of(st.sampled_from(["nan", "inf", "-inf", "0", "-1", "1e999", "", "abc", "1,5", "--"]),
                          st.floats(max_value=0.0).map(repr), st.text(alphabet="xyz!@#%é", min_size=1, max_size=5))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(["--noise-multiplier", "--delta", "--sample-rate", "--steps"]), value=OUT_OF_DOMAIN)
def test_out_of_domain_numbers_are_one_line(flag, value):
    """compute-epsilon with one of its numbers replaced by a non-positive, infinite, NaN or non-numeric one."""
    given_ = {"--noise-multiplier": "1", "--sample-rate": "0.01", "--steps": "100", "--delta": "1e-5", flag: value}
    args = ["compute-epsilon", "--mechanism", "subsampled-gaussian"] + [x for k, v in given_.items() for x in (k, v)]
    code, _, err = run_cli(*args)
    assert_one_error_line(code, err)


# -- --out problems before any work -------------------------------------------------------------------------
#: The expensive entry points of each command: an unusable --out must be refused before any of them runs.
EXPENSIVE = (
    ("privaudit.fl.engine.trainer", "ClientTrainer.train"),  # train: no round runs (its data are loaded before the check)
    ("attacks.membership.target", "TargetModel.from_checkpoint"),
    ("attacks.membership.run", "run_membership_attack"),
    ("attacks.inversion.run_request", "run_inversion"),
    ("attacks.inversion.run_request", "attack_and_score"),
    ("attacks.inversion.run_request", "checkpoint_payload"),
    ("privaudit.audit.runner", "run_claim"),
    ("privaudit.audit.runner", "run_suite"),
    ("privaudit.audit.workflows.checkpoint_one_run", "run_one_run_audit"),
    ("privaudit.audit.workflows.gradient_canaries", "run_gradient_canary_audit"),
    ("privaudit.audit.scores_audit", "audit_score_file"),
    ("privaudit.report.build", "build_report"),
    ("privaudit.report.build", "build_page"),
    ("privaudit.cli.epsilon_output", "read_ledger"),  # compute-epsilon --checkpoint: nothing read, nothing accounted
)


@pytest.fixture
def no_work(monkeypatch):
    import importlib

    for module_name, attribute in EXPENSIVE:
        owner = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)

        def refuse(*args, _what=f"{module_name}.{attribute}", **kwargs):
            pytest.fail(f"{_what} ran although --out is unusable: the check must come before the work")

        monkeypatch.setattr(owner, name, staticmethod(refuse) if isinstance(owner, type) else refuse)


BAD_OUT: list[tuple[str, tuple[str, ...], str]] = [
    ("ce-ledger-out-under-file", ("compute-epsilon", "--checkpoint", "{ck}", "--delta", "1e-5", "--out", "{file}/ledger.json"),
     "a-file is a file, not a folder"),
    ("ce-curve-out-under-file", ("compute-epsilon", "--checkpoint", "{ck}", "--delta", "1e-5", "--curve",
                                 "--out", "{file}/sub/curve.json"), "cannot be created: .* is a file"),
    ("mia-out-file", ("attack", "membership", "--checkpoint", "{ck}", "--out", "{file}", "--quiet"), "is a file, not a folder"),
    ("mia-lira-out-under-file", ("attack", "membership", "--checkpoint", "{ck}", "--attack", "lira", "--shadows", "2",
                                 "--out", "{file}/sub", "--quiet"), "cannot be created: .* is a file"),
    ("mia-result-is-a-folder", ("attack", "membership", "--checkpoint", "{ck}", "--out", "{tmp}/holds-folders", "--quiet"),
     "membership-attack.json is a folder"),
    ("inv-dataset-out-file", ("attack", "inversion", "--dataset", "images", "--attack", "label", "--images", "1",
                              "--out", "{file}", "--quiet"), "is a file, not a folder"),
    ("inv-checkpoint-out-under-file", ("attack", "inversion", "--checkpoint", "{ck}", "--client", "0", "--round", "1",
                                       "--attack", "label", "--out", "{file}/sub", "--quiet"), "is a file"),
    ("audit-claim-out-file", ("audit", "--claim", "upcycled-thm6.2-fig3", "--trials", "2", "--out", "{file}"), "is a file"),
    ("audit-suite-out-under-file", ("audit", "--suite", "default", "--out", "{file}/sub"), "not writable"),
    ("audit-one-run-out-file", ("audit", "--checkpoint", "{ck}", "--one-run", "--canaries", "10", "--claimed-epsilon", "1",
                                "--out", "{file}"), "is a file"),
    ("audit-gradient-out-file", ("audit", "--checkpoint", "{ck}", "--gradient-canaries", "4", "--claimed-epsilon", "1",
                                 "--out", "{file}"), "is a file"),
    ("audit-scores-out-file", ("audit", "--scores", "{scores}", "--out", "{file}"), "is a file"),
    ("report-out-file", ("report", "{ck}/training.json", "--out", "{file}"), "is a file, not a folder"),
    ("report-page-under-file", ("report", "{ck}/training.json", "--out", "{file}/page.md"), "is a file"),
    ("train-out-file", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--out", "{file}"), "is a file, not a folder"),
    ("train-out-under-file", ("train", "--algorithm", "fedavg", *TINY, "--rounds", "1", "--out", "{file}/sub"), "cannot be created"),
]


@pytest.mark.parametrize(("args", "match"), [pytest.param(a, m, id=i) for i, a, m in BAD_OUT])
def test_unusable_out_is_refused_before_any_work(files, no_work, args, match):
    (files["tmp"] / "holds-folders" / "membership-attack.json").mkdir(parents=True, exist_ok=True)
    code, _, err = run_cli(*expand(args, files))
    assert_one_error_line(code, err, match)


def test_the_out_of_an_earlier_lira_run_is_accepted_and_resumed(files, tmp_path, monkeypatch):
    """The --out check refuses files where folders go, not the folders an earlier run left (LiRA resumes from them)."""
    import attacks.membership.lira_attack as lira

    args = ("attack", "membership", "--checkpoint", files["ck"], "--attack", "lira", "--shadows", "2", "--out", tmp_path,
            "--quiet", "--json")
    code, first, err = run_cli(*args)
    assert code == 0, err
    assert (tmp_path / "shadows").is_dir() and (tmp_path / "membership-attack.json").is_file()

    def no_training(spec, seed):
        pytest.fail("the re-run retrained a shadow that the first run finished")

    monkeypatch.setattr(lira, "shadow_trial", no_training)
    code, again, err = run_cli(*args)
    assert code == 0, err
    assert json.loads(again)["auc"] == json.loads(first)["auc"]


# -- finished work is never lost ---------------------------------------------------------------------------
def _failing_under(real, out: Path, *, always: bool = False):
    """``real`` that raises 'No space left on device' for paths under ``out`` (or everywhere with ``always``)."""

    def write(path, *args, **kwargs):
        if always or Path(path).resolve().is_relative_to(out.resolve()):
            raise OSError(28, "No space left on device", str(path))
        return real(path, *args, **kwargs)

    return write


def test_membership_result_is_kept_when_out_fails_after_the_attack(files, tmp_path, monkeypatch):
    import tempfile

    import attacks.membership.run as membership_run

    out = tmp_path / "out"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "rescue"))
    (tmp_path / "rescue").mkdir()
    monkeypatch.setattr(membership_run, "write_membership_attack", _failing_under(membership_run.write_membership_attack, out))
    code, stdout, err = run_cli("attack", "membership", "--checkpoint", files["ck"], "--out", out, "--quiet", "--json")
    line = assert_one_error_line(code, err, r"could not write --out .*No space left on device.*saved to .* instead")
    rescued = Path(re.search(r"saved to (\S+) instead", line).group(1))
    assert rescued.parent == tmp_path / "rescue"
    data = json.loads(stdout)  # the summary is printed too, pointing at the rescued result
    assert data["result"] == str(rescued / "membership-attack.json") and 0 <= data["auc"] <= 1
    saved = json.loads((rescued / "membership-attack.json").read_text())
    assert saved["kind"] == "membership-attack" and saved["data"]["auc"] == data["auc"]
    assert (rescued / "membership-scores.npz").stat().st_size > 0


def test_membership_result_is_printed_when_nothing_can_be_written(files, tmp_path, monkeypatch):
    import tempfile

    import attacks.membership.run as membership_run

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(membership_run, "write_membership_attack",
                        _failing_under(membership_run.write_membership_attack, tmp_path, always=True))
    code, stdout, err = run_cli("attack", "membership", "--checkpoint", files["ck"], "--out", tmp_path / "out", "--quiet")
    assert_one_error_line(code, err, "nor a temporary folder.*printed instead")
    data = json.loads(stdout)
    assert data["result"] is None and data["n_in"] > 0 and 0 <= data["auc"] <= 1


def test_inversion_result_is_kept_when_out_fails_after_the_attack(tmp_path, monkeypatch):
    import tempfile

    import privaudit.report.results as results

    out = tmp_path / "out"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(results, "write_result", _failing_under(results.write_result, out))
    code, stdout, err = run_cli("attack", "inversion", "--dataset", "images", "--attack", "ig", "--iterations", "2",
                                "--images", "1", "--out", out, "--quiet", "--json")
    line = assert_one_error_line(code, err, "could not write --out .*saved to .* instead")
    rescued = Path(re.search(r"saved to (\S+) instead", line).group(1))
    data = json.loads(stdout)
    assert data["result"] == str(rescued / "inversion.json") and data["grid"] == "inversion-grid.png"
    assert json.loads((rescued / "inversion.json").read_text())["data"]["psnr"] == data["psnr"]
    assert (rescued / "inversion-grid.png").read_bytes()[:4] == b"\x89PNG"


# -- checkpoints: shapes verified before any state dict is loaded --------------------------------------------
def test_forged_shapes_are_a_checkpoint_error_before_loading(files):
    import torch

    from privaudit.errors import CheckpointError
    from privaudit.fl.engine.checkpoint import TrainedFederation, verify_checkpoint

    assert verify_checkpoint(files["forged"])  # the hashes were recomputed: only the shapes give it away
    with pytest.raises(CheckpointError, match=r"'linear.weight' has shape \(3, 7\), the architecture's is \(2, 5\)"):
        TrainedFederation(files["forged"]).global_state(1)
    with pytest.raises(CheckpointError, match=r"client 0's release in .*clients_r0001"):
        TrainedFederation(files["forged"]).client_releases(1)
    with pytest.raises(CheckpointError, match="records tensors that model 'logreg' does not have"):
        TrainedFederation(files["forged-manifest"]).build_model()
    # a genuine checkpoint loads, and checking its shapes (which builds the architecture) leaves torch's random
    # stream where it was
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    state = TrainedFederation(files["ck"]).global_state(1)
    assert torch.equal(torch.rand(3), expected)
    assert state["linear.weight"].shape == (2, 5)
    assert TrainedFederation(files["ck"]).build_model().linear.weight.shape == (2, 5)


def test_non_utf8_schedule_is_an_invalid_parameter(files):
    from privaudit.accounting.schedule import load_schedule
    from privaudit.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="not UTF-8 text"):
        load_schedule(files["binary"])


# -- SIGTERM and Ctrl-C during a process pool ----------------------------------------------------------------
PIDS_ENV = "PRIVAUDIT_TEST_TRIAL_PIDS"


def slow_shadow_trial(spec, seed):
    """Stands in for a LiRA shadow federation in a pool worker: the first call returns at once, the others hang."""
    folder = Path(os.environ[PIDS_ENV])
    (folder / str(os.getpid())).touch()
    try:
        os.close(os.open(folder / "first", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        time.sleep(3600)  # far longer than the hang guard below: a pool that waits for its trials fails the test
    return {"phi": [], "accuracy": None}


DRIVER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # even where the test runner ignores Ctrl-C
import attacks.membership.lira_attack as lira
from tests.cli import test_fuzz
lira.shadow_trial = test_fuzz.slow_shadow_trial
from privaudit.cli.app import main
sys.exit(main(sys.argv[1:]))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)], ids=["SIGTERM", "SIGINT"])
def test_interrupted_process_pool_stops_at_once_and_cleanly(files, tmp_path, signum):
    pids, out = tmp_path / "pids", tmp_path / "out"
    pids.mkdir()
    env = {**os.environ, PIDS_ENV: str(pids), "PYTHONWARNINGS": "always"}
    with (tmp_path / "stderr").open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", DRIVER, "attack", "membership", "--checkpoint", str(files["ck"]), "--attack", "lira",
             "--shadows", "4", "--executor", "process", "--workers", "2", "--out", str(out), "--quiet"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            deadline = time.monotonic() + 600  # a hang guard (generous: a loaded machine starts slowly)
            # the first trial is recorded and both workers are busy: one hangs in a trial
            while not ((out / "shadows" / "trials.jsonl").exists() and len([p for p in pids.iterdir() if p.name != "first"]) >= 2):
                assert process.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr").read_text()
                time.sleep(0.05)
            workers = [int(p.name) for p in pids.iterdir() if p.name != "first"]
            process.send_signal(signum)
            # a hang guard, not a speed test: the hung trial sleeps an hour, so a pool that waited for it never ends
            code = process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
            for leftover in [int(p.name) for p in pids.iterdir() if p.name != "first"]:
                with contextlib.suppress(ProcessLookupError):
                    if _alive(leftover) and process.returncode not in (130, 143):  # a failed run: end its workers too
                        os.kill(leftover, signal.SIGKILL)
    time.sleep(1.0)  # the resource tracker reports leaked semaphores when the parent's pipe closes
    err = (tmp_path / "stderr").read_text()
    # the shell's conventions: 128 + the signal's number (SIGTERM 15 → 143, Ctrl-C's SIGINT 2 → 130)
    expected = {signal.SIGTERM: (143, "error: terminated (SIGTERM)"), signal.SIGINT: (130, "error: aborted")}[signum]
    assert (code, [line for line in err.splitlines() if line.strip()]) == (expected[0], [expected[1]]), err
    assert "leaked semaphore" not in err and "Traceback" not in err
    assert not [pid for pid in workers if _alive(pid)], "pool workers outlived the command"
    assert len((out / "shadows" / "trials.jsonl").read_text().splitlines()) == 1  # the finished trial is kept for the re-run


@pytest.mark.parametrize("sigma", ["1e-300", "1e-160"])
def test_vanishing_noise_is_an_answer_not_a_crash(sigma):
    """σ so small that σ² underflows: the accountants decline or answer ε = ∞, with no traceback and no numpy noise."""
    code, out, err = run_cli("compute-epsilon", "--mechanism", "subsampled-gaussian", "--noise-multiplier", sigma,
                             "--sample-rate", "0.01", "--steps", "10", "--delta", "1e-5", "--json")
    assert code == 0 and "Traceback" not in err and "RuntimeWarning" not in err, err
    assert json.loads(out)["epsilon"] == {"rdp": "inf"}  # an infinite upper bound, sound (ctd, prv, pld decline)


def test_corrupted_shadow_design_record_is_one_line(tmp_path):
    from attacks.membership.shadows import DESIGN_FILE, guard_out_dir
    from privaudit.errors import InvalidParameterError

    (tmp_path / DESIGN_FILE).write_bytes(b"\xff{not json")
    with pytest.raises(InvalidParameterError, match="not a shadow-design record"):
        guard_out_dir(tmp_path, "digest")
