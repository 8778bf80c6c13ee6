"""Finished work is never lost on a full disk: ``train``, ``audit --claim``, LiRA and ``report`` keep it and say where.

Issue 24: these commands stopped with ``error: No space left on device``, naming no file and keeping nothing. The disk
is filled here by an injected failure: every write under the command's ``--out`` from the N-th on raises
``OSError(ENOSPC)`` with no file name, as writing to an open file on a full disk does
(``privaudit.output_folder``'s two low-level writers are replaced). The temporary folder (``tempfile.tempdir``, here a
folder of the test's own) still has room. Each command must then exit with one line that names the file it could
not write and the temporary folder that holds the finished work, and that folder must hold all of it.
"""

from __future__ import annotations

import errno
import json
import re
import warnings
from pathlib import Path

import pytest

import privaudit.output_folder as output_folder
from privaudit.cli.app import main
from privaudit.errors import OutputError
from privaudit.output_folder import OutputFolder, OutputMovedWarning, folder_for, opened, write_file
from tests.cli.test_fuzz import TINY, run_cli


class DiskFull:
    """Make every write under ``out`` fail with ENOSPC from the ``after``-th on (all of them with ``everywhere``)."""

    def __init__(self, monkeypatch, out: Path, after: int, *, everywhere: bool = False) -> None:
        self.out, self.after, self.everywhere, self.writes = out.resolve(), after, everywhere, []
        for name in ("_replace", "_append"):
            monkeypatch.setattr(output_folder, name, self._failing(getattr(output_folder, name)))

    def _failing(self, real):
        def write(path: Path, payload: bytes) -> None:
            if self.everywhere or path.resolve().is_relative_to(self.out):
                self.writes.append(path)
                if len(self.writes) >= self.after:
                    raise OSError(errno.ENOSPC, "No space left on device")  # no file name: write() on an open file
            real(path, payload)

        return write


@pytest.fixture
def rescue(tmp_path, monkeypatch) -> Path:
    import tempfile

    folder = tmp_path / "rescue"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _rescued(err: str, code: int, failed: str, what: str) -> Path:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    match = re.fullmatch(rf"error: could not write --out \S+ \((\S+): No space left on device\); the finished {what} was "
                         r"saved to (\S+) instead", lines[0])
    assert match, lines[0]
    assert Path(match.group(1)).name == failed, lines[0]  # the line names the file
    return Path(match.group(2))


def test_train_keeps_its_checkpoint_when_the_disk_fills_after_five_rounds(tmp_path, rescue, monkeypatch):
    from privaudit.fl.engine.checkpoint import TRAINING_RESULT, TrainedFederation, verify_checkpoint

    out = tmp_path / "ck"
    full = DiskFull(monkeypatch, out, after=6)  # rounds 0–4's global models fit, round 5's does not
    code, stdout, err = run_cli("train", "--algorithm", "fedavg", *TINY, "--rounds", "8", "--out", out)
    moved = _rescued(err, code, "global_r0005.safetensors", "checkpoint")
    assert moved.parent == rescue and len(full.writes) >= 6
    summary = json.loads(stdout)  # the summary is printed too, pointing at the checkpoint where it is
    assert summary["checkpoint"] == str(moved) and summary["rounds"] == 8
    verify_checkpoint(moved)  # every round, the manifest and its hashes: a complete checkpoint
    federation = TrainedFederation(moved)
    assert federation.rounds == 8 and len(federation.metrics) == 8
    assert json.loads((moved / TRAINING_RESULT).read_text())["kind"] == "training"
    assert sorted(p.name for p in (out / "tensors").iterdir()) == [f"global_r000{r}.safetensors" for r in range(5)]


def test_train_names_both_files_when_even_the_temporary_folder_is_full(tmp_path, rescue, monkeypatch):
    out = tmp_path / "ck"
    DiskFull(monkeypatch, out, after=3, everywhere=True)
    code, _, err = run_cli("train", "--algorithm", "fedavg", *TINY, "--rounds", "4", "--out", out)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert re.search(r"could not write \S+global_r0002\.safetensors \(No space left on device\), nor a temporary folder "
                     r"\(\S+global_r0000\.safetensors: No space left on device\)", lines[0]), lines[0]


def test_audit_keeps_its_trials_and_result(tmp_path, rescue, monkeypatch):
    out = tmp_path / "audit"
    DiskFull(monkeypatch, out, after=4)  # the first reading's plan and 2 of its trials are written, the third is not
    code, _, err = run_cli("audit", "--claim", "upcycled-thm6.2-fig3", "--trials", "2", "--power-trials", "5", "--out", out,
                           "--quiet", "--json")
    moved = _rescued(err, code, "trials.jsonl", "audit")
    result = json.loads((moved / "upcycled-thm6.2-fig3.json").read_text())
    assert result["kind"] == "claim-audit" and result["data"]["verdict"]
    journals = sorted(moved.glob("trials/upcycled-thm6.2-fig3/*/trials.jsonl"))
    assert len(journals) == len(result["data"]["readings"]) >= 2  # every reading's trials
    (first,) = [j for j in journals if (out / j.relative_to(moved)).exists()]
    kept = (out / first.relative_to(moved)).read_text()
    assert len(kept.splitlines()) == 2 and first.read_text().startswith(kept)  # copied over, then continued
    # the disk has room again: a re-run on the temporary folder resumes it, no trial is trained again
    monkeypatch.undo()
    import privaudit.audit.runner as runner

    monkeypatch.setattr(runner, "run_trials", _no_new_trials(runner.run_trials))
    code, _, err = run_cli("audit", "--claim", "upcycled-thm6.2-fig3", "--trials", "2", "--power-trials", "5", "--out", moved,
                           "--quiet", "--json")
    assert code == 0, err


def _no_new_trials(real):
    def run(fn, trials, out_dir=None, executor=None, **kwargs):
        def never(spec, seed):
            pytest.fail("a trial that the first run finished was trained again")

        return real(never, trials, out_dir, executor, **kwargs)

    return run


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    ck = tmp_path_factory.mktemp("disk-full") / "ck"
    assert main(["train", "--algorithm", "fedavg", *TINY, "--rounds", "2", "--out", str(ck)]) == 0
    return ck


def test_lira_keeps_its_shadow_trials_and_result(checkpoint, tmp_path, rescue, monkeypatch, capsys):
    out = tmp_path / "lira"
    DiskFull(monkeypatch, out, after=3)  # the shadow-design record and the first shadow's line fit
    capsys.readouterr()
    code, stdout, err = run_cli("attack", "membership", "--checkpoint", checkpoint, "--attack", "lira", "--shadows", "2",
                                "--out", out, "--quiet", "--json")
    moved = _rescued(err, code, "trials.jsonl", "result")
    assert len((moved / "shadows" / "trials.jsonl").read_text().splitlines()) == 2  # both shadows, none lost
    assert len((out / "shadows" / "trials.jsonl").read_text().splitlines()) == 1  # the target kept what it could
    data = json.loads(stdout)
    assert data["result"] == str(moved / "membership-attack.json")
    assert json.loads((moved / "membership-attack.json").read_text())["data"]["auc"] == data["auc"]
    assert (moved / "membership-scores.npz").stat().st_size > 0


def test_report_is_written_into_a_temporary_folder(checkpoint, tmp_path, rescue, monkeypatch, capsys):
    out = tmp_path / "report"
    DiskFull(monkeypatch, out, after=2)
    code, stdout, err = run_cli("report", checkpoint / "training.json", "--out", out)
    moved = _rescued(err, code, "report.md", "report")  # written after the figures (the training result draws one)
    assert {"report.md", "report.html", "results.json"} <= {p.name for p in moved.iterdir()}
    printed = "".join(stdout.split())  # rich wraps long paths
    assert str(moved / "report.html") in printed
    assert json.loads((moved / "results.json").read_text())["results"][0]["kind"] == "training"


# -- the mechanism ---------------------------------------------------------------------------------------------------
def test_write_file_leaves_no_partial_file_and_names_the_file(tmp_path, monkeypatch):
    target = tmp_path / "a" / "result.json"
    write_file(target, "old")
    DiskFull(monkeypatch, tmp_path, after=1)
    with pytest.raises(OSError) as failed:
        write_file(target, "new content")
    assert failed.value.filename == str(target) and failed.value.errno == errno.ENOSPC
    assert target.read_text() == "old" and [p.name for p in target.parent.iterdir()] == ["result.json"]  # no temporary left
    monkeypatch.undo()
    journal = tmp_path / "journal.jsonl"
    write_file(journal, "line 1\n", append=True)
    real = output_folder._append

    def half_then_full(path, payload):
        with path.open("ab") as file:
            file.write(payload[:3])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(output_folder, "_append", lambda path, payload: _cut_back(real, half_then_full, path, payload))
    with pytest.raises(OSError):
        write_file(journal, "line 2\n", append=True)
    assert journal.read_text() == "line 1\n"  # the half line is cut back


def _cut_back(real, failing, path, payload):
    """``real``'s cut-back on failure, around a write that fails half-way (what a full disk does mid-line)."""
    start = path.stat().st_size
    try:
        failing(path, payload)
    except OSError:
        with path.open("ab") as file:
            file.truncate(start)
        raise


def test_views_move_together_and_a_folder_outside_a_command_warns(tmp_path, rescue, monkeypatch):
    out = tmp_path / "out"
    with opened(out, "demo") as folder:
        folder.save("a.txt", "A")
        shadows = folder_for(out / "shadows")
        shadows.append("trials.jsonl", "1\n")
        DiskFull(monkeypatch, out, after=1)
        shadows.append("trials.jsonl", "2\n")  # fails under out: everything moves, this line is written there
        assert folder.relocation is not None and shadows.path == folder.path / "shadows"
        assert (folder.path / "a.txt").read_text() == "A"
        assert (folder.path / "shadows" / "trials.jsonl").read_text() == "1\n2\n"
        assert folder.save("b.txt", "B") == folder.path / "b.txt"  # later writes go there directly
    alone = OutputFolder(tmp_path / "alone", "api")
    DiskFull(monkeypatch, tmp_path / "alone", after=1)
    with pytest.warns(OutputMovedWarning, match="could not write output folder"):
        path = alone.save("x.txt", "X")
    assert path.parent == alone.path and path.read_text() == "X" and alone.path.parent == rescue
    DiskFull(monkeypatch, tmp_path, after=1, everywhere=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "saved to … instead" for work that was not saved
        with pytest.raises(OutputError, match=r"could not write \S+y\.txt \(No space left on device\), nor a temporary folder"):
            OutputFolder(tmp_path / "nowhere", "api").save("y.txt", "Y")


# -- a real full disk ------------------------------------------------------------------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path):
    """A 320 KiB tmpfs (root and a mountable tmpfs only; skipped elsewhere), unmounted afterwards."""
    import subprocess

    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320k", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.slow
def test_train_on_a_small_tmpfs_keeps_every_round(small_tmpfs, rescue):
    """digits' default model: 59,168-byte global models, so five fit on 320 KiB and the sixth fills the disk."""
    from privaudit.fl.engine.checkpoint import TrainedFederation, verify_checkpoint

    out = small_tmpfs / "ck"
    code, stdout, err = run_cli("train", "--algorithm", "fedavg", "--dataset", "digits", "--num-clients", "4", "--local-epochs",
                                "1", "--rounds", "20", "--out", out, "--quiet", "--json")
    moved = _rescued(err, code, "global_r0005.safetensors", "checkpoint")
    verify_checkpoint(moved)
    assert TrainedFederation(moved).rounds == 20 and json.loads(stdout)["checkpoint"] == str(moved)
