"""Trained federations on disk: round trip, integrity checks, and torch-free manifest/ledger reading."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from privaudit.errors import CheckpointError
from privaudit.fl.algorithms.fedprox import FedProx
from privaudit.fl.algorithms.scaffold import Scaffold
from privaudit.fl.engine.checkpoint import (
    CheckpointWriter,
    TrainedFederation,
    clients_file,
    global_file,
    read_ledger,
    read_manifest,
    verify_checkpoint,
)
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import RoundObserver, run_federation
from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig
from privaudit.papers.upcycled.algorithm import Upcycled
from tests.fl.conftest import make_dataset, tiny_model


class Releases(RoundObserver):
    def __init__(self):
        self.rounds = {}

    def on_round_end(self, round, state, results, metrics):
        self.rounds[round] = {"global": {k: v.clone() for k, v in state.items()}, "results": list(results)}


def _train(path: Path, *, save_client_updates=True, algorithm=None):
    releases = Releases()
    algorithm = algorithm or Upcycled(OutputPerturbation(FedProx(0.2), OutputPerturbationConfig(clip=3.0, sigma=0.1)), u=0.5)
    config = FederationConfig(rounds=4, local=LocalTrainingConfig(epochs=1, batch_size=8), clients_per_round=0.5, seed=2)
    writer = CheckpointWriter(path, save_client_updates=save_client_updates, extra={"train_spec": {"note": "test"}})
    result = run_federation(make_dataset(), tiny_model(), algorithm, config, observers=[writer, releases], progress=False)
    return result, releases


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    path = tmp_path_factory.mktemp("federation") / "run"
    result, releases = _train(path)
    return path, result, releases


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_round_trip(trained):
    path, result, releases = trained
    federation = TrainedFederation(path)
    manifest = federation.manifest
    assert manifest["algorithm"]["name"] == "upcycled-fedprox+output-perturbation"
    assert manifest["config"] == result.info.config.to_dict()
    assert manifest["dataset"]["fingerprint"] == make_dataset().fingerprint()
    assert manifest["seeds"]["seed"] == 2 and manifest["train_spec"] == {"note": "test"}
    assert [m.to_dict() for m in federation.metrics] == [m.to_dict() for m in result.history]
    assert federation.ledger.to_dict() == result.ledger.to_dict()
    assert all(torch.equal(federation.global_state(0)[k], result.info.initial_state[k]) for k in result.state)
    for r in range(1, 5):
        stored = federation.global_state(r)
        assert all(torch.equal(stored[k], releases.rounds[r]["global"][k]) for k in stored)
    first = federation.client_releases(1)
    assert sorted(first) == sorted(res.client_id for res in releases.rounds[1]["results"])
    for res in releases.rounds[1]["results"]:
        assert all(torch.equal(first[res.client_id]["state"][k], res.state[k]) for k in res.state)
    assert federation.client_releases(2) == {}  # an even round releases nothing
    assert verify_checkpoint(path)["schema"] == "privaudit.federation/1"


def test_scaffold_extras_are_stored(tmp_path):
    _, releases = _train(tmp_path / "s", algorithm=Scaffold())
    stored = TrainedFederation(tmp_path / "s").client_releases(1)
    for res in releases.rounds[1]["results"]:
        torch.testing.assert_close(stored[res.client_id]["extras"]["control_delta"], res.extras["control_delta"], rtol=0, atol=0)


def test_without_client_updates(tmp_path):
    _train(tmp_path / "g", save_client_updates=False)
    federation = TrainedFederation(tmp_path / "g")
    assert not any(k.startswith("tensors/clients") for k in federation.manifest["tensors"])
    with pytest.raises(CheckpointError, match="without --save-client-updates"):
        federation.client_releases(1)


def test_tampered_tensor_is_detected(trained, tmp_path):
    path = _copy(trained[0], tmp_path / "t")
    target = path / global_file(2)
    data = bytearray(target.read_bytes())
    data[-3] ^= 0x01  # flip one bit of a weight
    target.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="does not match its sha256"):
        TrainedFederation(path).global_state(2)
    with pytest.raises(CheckpointError):
        verify_checkpoint(path)
    assert TrainedFederation(path).global_state(1)  # other files stay readable


def test_truncated_tensor_is_detected(trained, tmp_path):
    path = _copy(trained[0], tmp_path / "t")
    target = path / clients_file(1)
    target.write_bytes(target.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="truncated or replaced"):
        TrainedFederation(path).client_releases(1)


def test_missing_tensor_is_detected(trained, tmp_path):
    path = _copy(trained[0], tmp_path / "t")
    (path / global_file(4)).unlink()
    with pytest.raises(CheckpointError, match="missing or unreadable"):
        TrainedFederation(path).global_state()


def test_edited_manifest_is_detected(trained, tmp_path):
    path = _copy(trained[0], tmp_path / "t")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["ledger"]["events"][0]["mechanism"]["noise_multiplier"] = 100.0  # claim more noise than was added
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="modified after it was written"):
        read_ledger(path)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda m: m["config"].update(rounds="abc"), "config.rounds must be a non-negative integer"),
    (lambda m: m.update(tensors={k: "x" for k in m["tensors"]}), "must record its sha256"),
    (lambda m: m.update(tensors={"../../outside.safetensors": {"sha256": "0" * 64, "bytes": 1}}), "inside the checkpoint"),
    (lambda m: m["model"].update(input_shape="28x28"), "model.input_shape"),
    (lambda m: m.update(metrics={"round": 1}), "'metrics' must be a list"),
    (lambda m: m.update(ledger=[]), "'ledger' must be an object"),
])
def test_structurally_broken_manifest_with_a_recomputed_hash(trained, tmp_path, capsys, edit, message):
    """The manifest hash has no key: a hand-edited manifest with a matching hash still meets one clear error."""
    from privaudit.cli.app import main
    from privaudit.fl.engine.checkpoint import manifest_digest

    path = _copy(trained[0], tmp_path / "t")
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest)
    manifest["manifest_sha256"] = manifest_digest(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match=message):
        read_manifest(path)
    assert main(["compute-epsilon", "--checkpoint", str(path), "--delta", "1e-3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and "malformed" in err[0]


def test_truncated_or_foreign_manifest(trained, tmp_path):
    path = _copy(trained[0], tmp_path / "t")
    text = (path / "manifest.json").read_text()
    (path / "manifest.json").write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match="not valid JSON"):
        read_manifest(path)
    (path / "manifest.json").write_text(json.dumps({"schema": "something/else"}))
    with pytest.raises(CheckpointError, match="not a privaudit federation manifest"):
        read_manifest(path)
    with pytest.raises(CheckpointError, match=r"manifest\.json is missing"):
        read_manifest(tmp_path / "nowhere")


def test_existing_checkpoint_is_not_overwritten(trained):
    with pytest.raises(CheckpointError, match="already holds a trained federation"):
        CheckpointWriter(trained[0])


def test_tensor_files_are_safetensors_not_pickles(trained):
    for file in (trained[0] / "tensors").iterdir():
        header_length = int.from_bytes(file.read_bytes()[:8], "little")
        header = json.loads(file.read_bytes()[8 : 8 + header_length])
        assert "__metadata__" in header and header["__metadata__"]["kind"] in ("global", "clients")


def test_reading_the_ledger_does_not_import_torch(trained):
    code = (
        "import sys\n"
        "from privaudit.fl.engine.checkpoint import read_ledger, read_manifest, verify_checkpoint\n"
        f"ledger = read_ledger({str(trained[0])!r})\n"
        f"verify_checkpoint({str(trained[0])!r})\n"
        "assert 'torch' not in sys.modules and 'safetensors' not in sys.modules, sorted(m for m in sys.modules if 'torch' in m)\n"
        "print(len(ledger.events))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == len(trained[1].ledger.events) == 2 * 3
