"""FederationRecorder: a plain PyTorch federation recorded as a checkpoint that every checkpoint command reads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from privaudit.accounting.mechanisms import Gaussian, Sampling, SubsampledGaussian
from privaudit.cli.app import main
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger, verify_checkpoint
from privaudit.interop import (
    DatasetReference,
    FederationRecorder,
    GaussianRelease,
    ModelFactory,
    NoDP,
    privacy_events,
)
from tests.cli.test_fuzz import assert_one_error_line, run_cli
from tests.interop.recorded import (
    CLIENTS,
    HELD_OUT,
    PER_CLIENT,
    ROUNDS,
    digits_reference,
    make_sequential,
    record_tiny_federation,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    return record_tiny_federation(tmp_path_factory.mktemp("rec") / "ck")


def test_checkpoint_is_verified_and_rebuilds_the_recorded_model(recorded):
    manifest = verify_checkpoint(recorded)
    assert manifest["schema"] == "privaudit.federation/1" and manifest["config"]["rounds"] == ROUNDS
    assert manifest["model"]["architecture"]["kind"] == "sequential" and manifest["model"]["name"] is None
    assert manifest["save_client_updates"] is True and manifest["dataset"]["num_clients"] == CLIENTS
    federation = TrainedFederation(recorded)
    model = federation.build_model()
    x = torch.from_numpy(digits_reference().x[:7])
    state = federation.global_state()
    reference = make_sequential()
    reference.load_state_dict(state)
    assert torch.allclose(model(x), reference(x))
    assert sorted(federation.client_releases(1)) == list(range(CLIENTS))


def test_ledger_holds_the_described_releases(recorded):
    ledger = read_ledger(recorded)
    assert len(ledger.events) == CLIENTS * ROUNDS
    event = ledger.events[0]
    assert event.mechanism == Gaussian(1.0)  # std σ·C = 2, Δ = 2C = 2: z = 1
    assert any("Δ = 2" in a for a in event.assumptions)
    assert sorted(ledger.clients()) == [str(c) for c in range(CLIENTS)]


def test_compute_epsilon_reads_the_recorded_ledger(recorded):
    code, out, err = run_cli("compute-epsilon", "--checkpoint", recorded, "--delta", "1e-5", "--json")
    assert code == 0, err
    data = json.loads(out)
    expected = read_ledger(recorded).summary(1e-5, accountant="auto").max_epsilon
    assert math.isclose(data["max_epsilon"], expected, rel_tol=1e-9) and 0 < expected < math.inf


def test_membership_attack_uses_the_recorded_partition(recorded, tmp_path):
    code, out, err = run_cli("attack", "membership", "--checkpoint", recorded, "--attack", "loss", "--json",
                             "--out", tmp_path / "mia")
    assert code == 0, err
    data = json.loads(out)
    assert (data["n_in"], data["n_out"]) == (CLIENTS * PER_CLIENT, HELD_OUT)
    assert 0.0 <= data["auc"] <= 1.0
    assert (tmp_path / "mia" / "membership-attack.json").is_file()


def test_lira_and_canary_audits_refuse_a_recorded_checkpoint(recorded):
    code, _, err = run_cli("attack", "membership", "--checkpoint", recorded, "--attack", "lira")
    assert_one_error_line(code, err, "no training recipe.*LiRA retrains")
    code, _, err = run_cli("audit", "--checkpoint", recorded, "--one-run", "--canaries", "20")
    assert_one_error_line(code, err, "no training recipe")


def test_inversion_attacks_a_recorded_client_release(recorded, tmp_path):
    code, out, err = run_cli("attack", "inversion", "--checkpoint", recorded, "--client", "1", "--round", "2",
                             "--attack", "analytic", "--quiet", "--json", "--out", tmp_path / "inv")
    assert code == 0, err
    data = json.loads(out)
    assert data["mode"] == "checkpoint" and len(data["psnr"]) == PER_CLIENT
    assert (tmp_path / "inv" / "inversion.json").is_file()


def test_report_renders_the_recorded_results(recorded, tmp_path):
    assert run_cli("compute-epsilon", "--checkpoint", recorded, "--delta", "1e-5", "--out", tmp_path / "r" / "ledger.json")[0] == 0
    assert run_cli("attack", "membership", "--checkpoint", recorded, "--attack", "loss", "--out", tmp_path / "r")[0] == 0
    (tmp_path / "r" / "training.json").write_bytes((recorded / "training.json").read_bytes())
    code, _, err = run_cli("report", tmp_path / "r", "--out", tmp_path / "report")
    assert code == 0, err
    merged = json.loads((tmp_path / "report" / "results.json").read_text())
    assert sorted(r["kind"] for r in merged["results"]) == ["ledger", "membership-attack", "training"]


def test_tampered_partition_is_refused(recorded, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(recorded, copy)
    partition = copy / "tensors" / "partition.safetensors"
    data = bytearray(partition.read_bytes())
    data[-1] ^= 1
    partition.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="sha256"):
        verify_checkpoint(copy)
    code, _, err = run_cli("attack", "membership", "--checkpoint", copy, "--attack", "loss")
    assert_one_error_line(code, err, "partition.safetensors")


def test_unstored_arrays_are_fingerprinted_but_cannot_be_attacked(tmp_path):
    rng = np.random.default_rng(0)
    x, y = rng.random((40, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 40)
    y[:10] = np.arange(10)
    reference = DatasetReference.from_arrays("mine", x, y, partition={0: range(10), 1: range(10, 20), 2: range(20, 30)},
                                             non_members=range(30, 40), store=False)
    path = record_tiny_federation(tmp_path / "ck", dataset=reference, releases=False)
    manifest = verify_checkpoint(path)
    assert manifest["dataset"]["reference"]["kind"] == "external"
    assert not (path / "tensors" / "data.safetensors").exists()
    code, _, err = run_cli("attack", "membership", "--checkpoint", path, "--attack", "loss")
    assert_one_error_line(code, err, "neither a packaged dataset nor stored")


def test_stored_arrays_are_reloaded_and_checked(tmp_path):
    rng = np.random.default_rng(1)
    x, y = rng.random((50, 1, 8, 8)).astype(np.float32), np.arange(50) % 10
    reference = DatasetReference.from_arrays("mine", x, y, partition={0: range(10), 1: range(10, 20), 2: range(20, 30)},
                                             non_members=range(30, 50))
    path = record_tiny_federation(tmp_path / "ck", dataset=reference, releases=False)
    code, out, err = run_cli("attack", "membership", "--checkpoint", path, "--attack", "loss", "--json")
    assert code == 0, err
    assert (json.loads(out)["n_in"], json.loads(out)["n_out"]) == (30, 20)


def test_a_factory_is_imported_only_when_trusted(tmp_path):
    path = record_tiny_federation(tmp_path / "ck", factory=True, releases=False)
    code, _, err = run_cli("attack", "membership", "--checkpoint", path, "--attack", "loss")
    assert_one_error_line(code, err, "--trust-factory tests.interop.recorded:make_custom_net")
    with pytest.raises(CheckpointError, match="trust_factory"):
        TrainedFederation(path).build_model()
    code, _, err = run_cli("attack", "membership", "--checkpoint", path, "--attack", "loss", "--trust-factory", "os:system")
    assert_one_error_line(code, err, "not built by that factory")
    code, _, err = run_cli("attack", "membership", "--checkpoint", path, "--attack", "loss", "--json",
                           "--trust-factory", "tests.interop.recorded:make_custom_net")
    assert code == 0, err


def test_a_release_without_an_event_has_no_guarantee(tmp_path):
    path = record_tiny_federation(tmp_path / "ck", noise_multiplier=None)
    summary = read_ledger(path).summary(1e-5)
    assert summary.guarantee == "none" and math.isinf(summary.max_epsilon)


def test_bad_calls_are_one_clear_error(tmp_path):
    model, data = make_sequential(), digits_reference()
    with pytest.raises(InvalidParameterError, match="clip"):
        GaussianRelease([0], noise_multiplier=1.0)
    with pytest.raises(InvalidParameterError, match="exactly one"):
        GaussianRelease([0], noise_multiplier=1.0, noise_std=1.0, clip=1.0, sensitivity=1.0)
    with pytest.raises(InvalidParameterError, match="sample_rate"):
        GaussianRelease([0], noise_multiplier=1.0, clip=1.0, sensitivity=1.0, sample_rate=1.5)
    with pytest.raises(InvalidParameterError, match="two clients"):
        DatasetReference.packaged("digits", partition={0: [1, 2], 1: [2, 3]})
    with pytest.raises(InvalidParameterError, match=r"0\.\.K−1"):
        DatasetReference.packaged("digits", partition={1: [1, 2]})
    with pytest.raises(InvalidParameterError, match="cannot record the architecture"):
        from tests.interop.recorded import CustomNet

        FederationRecorder(tmp_path / "a", model=CustomNet(), dataset=data)
    with pytest.raises(InvalidParameterError, match="logits shaped"):
        FederationRecorder(tmp_path / "b", model=torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 3)), dataset=data)
    recorder = FederationRecorder(tmp_path / "c", model=model, dataset=data)
    with pytest.raises(InvalidParameterError, match="expected round 1"):
        recorder.record_round(2, global_model=model)
    with pytest.raises(InvalidParameterError, match="not in the dataset's partition"):
        recorder.record_round(1, global_model=model, sampled_clients=[7])
    with pytest.raises(InvalidParameterError, match="lacks tensor"):
        recorder.record_round(1, global_model={"1.weight": torch.zeros(16, 64)})
    recorder.record_round(1, global_model=model)
    assert recorder.close() == tmp_path / "c"
    with pytest.raises(CheckpointError, match="already holds"):
        FederationRecorder(tmp_path / "c", model=model, dataset=data)
    with pytest.raises(InvalidParameterError, match=r"package\.module:function"):
        ModelFactory("not a factory")
    with pytest.raises(InvalidParameterError, match="takes no option rounds; its options are architecture"):
        FederationRecorder(tmp_path / "d", model=model, dataset=data, rounds=3)
    with pytest.raises(InvalidParameterError, match="local_training takes lr"):
        FederationRecorder(tmp_path / "e", model=model, dataset=data, local_training={"learning_rate": 0.1})


def test_an_exception_inside_the_block_writes_no_manifest(tmp_path):
    model, data = make_sequential(), digits_reference()
    with pytest.raises(RuntimeError), FederationRecorder(tmp_path / "ck", model=model, dataset=data) as recorder:
        recorder.record_round(1, global_model=model)
        raise RuntimeError("the user's loop failed")
    assert not (tmp_path / "ck" / "manifest.json").exists()


def test_privacy_events_in_user_terms():
    central = privacy_events(GaussianRelease("server", noise_multiplier=1.2, clip=0.5, sample_rate=0.1, sampling="poisson",
                                             level="client", steps=3), round=4)
    assert [(e.client_id, e.round, e.count) for e in central] == [("server", 4, 3)]
    assert central[0].mechanism == SubsampledGaussian(1.2, 0.1)
    with pytest.raises(InvalidParameterError, match=r"sampling='poisson'.*sampling='fixed-size'"):  # no optimistic default
        GaussianRelease("server", noise_multiplier=1.2, clip=0.5, sample_rate=0.1, level="client")
    fixed = GaussianRelease("server", noise_multiplier=1.2, clip=0.5, sample_rate=0.1, sampling="fixed-size", level="client")
    assert fixed.sampling is Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT  # parsed once, used by value
    assert privacy_events(fixed, round=1)[0].mechanism == SubsampledGaussian(1.2, 0.1, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT)
    with pytest.raises(InvalidParameterError, match="unknown sampling 'shuffled'"):
        GaussianRelease([0], noise_multiplier=1.0, clip=1.0, sensitivity=1.0, sampling="shuffled")
    local = privacy_events(GaussianRelease([0, 1], noise_std=2.0, clip=4.0, sensitivity=4.0), round=1)
    assert [e.mechanism for e in local] == [Gaussian(0.5), Gaussian(0.5)]
    whole_update = privacy_events(GaussianRelease([0], noise_std=2.0, clip=4.0, sensitivity=8.0), round=1)
    assert whole_update[0].mechanism == Gaussian(0.25)
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        GaussianRelease([0], noise_std=2.0, clip=4.0)  # record level: Δ must be stated
    none = privacy_events(NoDP([2], "plain FedAvg"), round=1)
    assert not none[0].has_guarantee
    with pytest.raises(InvalidParameterError, match="server"):
        privacy_events(GaussianRelease([0], noise_multiplier=1.0, clip=1.0, level="client"), round=1)


def test_main_entry_point_is_used(recorded):
    assert main(["compute-epsilon", "--checkpoint", str(recorded), "--delta", "1e-5", "--json"]) == 0


def test_a_privaudit_model_name_is_recorded_as_the_architecture(tmp_path):
    from privaudit.models import build_model

    model, data = build_model("fedreg-mlp", (1, 8, 8), 10), digits_reference()
    with FederationRecorder(tmp_path / "ck", model=model, dataset=data, architecture="fedreg-mlp") as recorder:
        recorder.record_round(1, global_model=model, privacy_events=[NoDP([0, 1, 2])], sampled_clients=[0, 1, 2])
    manifest = verify_checkpoint(tmp_path / "ck")
    assert manifest["model"]["name"] == "fedreg-mlp" and manifest["model"]["architecture"]["kind"] == "registry"
    rebuilt = TrainedFederation(tmp_path / "ck").build_model()
    x = torch.from_numpy(data.x[:5])
    assert torch.allclose(rebuilt(x), model(x))
    code, _, err = run_cli("attack", "membership", "--checkpoint", tmp_path / "ck", "--attack", "confidence", "--json")
    assert code == 0, err
    with pytest.raises(InvalidParameterError, match="unknown privaudit model"):
        FederationRecorder(tmp_path / "x", model=model, dataset=data, architecture="no-such-model")


def test_a_forged_layer_size_is_refused_without_allocating(recorded, tmp_path):
    import shutil

    from privaudit.fl.engine.checkpoint import manifest_digest

    copy = tmp_path / "forged"
    shutil.copytree(recorded, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["model"]["architecture"]["layers"][1]["args"]["out_features"] = 10**9  # 256 GB of weights if built
    manifest["manifest_sha256"] = manifest_digest(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CheckpointError, match="does not have"):
        TrainedFederation(copy).build_model()
    code, _, err = run_cli("attack", "membership", "--checkpoint", copy, "--attack", "loss")
    assert_one_error_line(code, err, "does not have")


def test_a_server_release_must_be_client_level():
    """Regression: 'server' is the client-level subject; a record-level release charged to it is refused."""
    with pytest.raises(InvalidParameterError, match="level='client'"):
        privacy_events(GaussianRelease("server", noise_multiplier=1.0, clip=1.0, sensitivity=1.0), round=1)


def _forge(copy: Path, change) -> None:
    from privaudit.fl.engine.checkpoint import manifest_digest

    manifest = json.loads((copy / "manifest.json").read_text())
    change(manifest)
    manifest["manifest_sha256"] = manifest_digest(manifest)
    (copy / "manifest.json").write_text(json.dumps(manifest))


def test_an_overlapping_partition_is_refused_on_reading(recorded, tmp_path):
    """Regression: a hand-made partition (rehashed) listing a member among the non-members is one clear error."""
    import hashlib
    import shutil

    from safetensors.torch import load, save

    copy = tmp_path / "overlap"
    shutil.copytree(recorded, copy)
    path = copy / "tensors" / "partition.safetensors"
    parts = load(path.read_bytes())
    parts["non_members"] = torch.cat([parts["non_members"], parts["client/0"][:1]])
    data = save(parts, metadata={"kind": "partition"})
    path.write_bytes(data)

    def rehash(manifest):
        manifest["tensors"]["tensors/partition.safetensors"].update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))

    _forge(copy, rehash)
    code, _, err = run_cli("attack", "membership", "--checkpoint", copy, "--attack", "loss")
    assert_one_error_line(code, err, "among the non-members")


def test_trust_factory_on_a_malformed_architecture_is_one_error(recorded, tmp_path):
    import shutil

    copy = tmp_path / "malformed"
    shutil.copytree(recorded, copy)
    _forge(copy, lambda manifest: manifest["model"].update(architecture="sequential"))
    code, _, err = run_cli("attack", "membership", "--checkpoint", copy, "--attack", "loss", "--trust-factory", "a.b:c")
    assert_one_error_line(code, err, "not built by that factory")


def test_clients_that_trained_without_an_event_have_no_guarantee(tmp_path):
    """Regression: a round whose sampled clients trained but which records no event and no release was ε = 0."""
    model, data = make_sequential(), digits_reference()
    with FederationRecorder(tmp_path / "ck", model=model, dataset=data) as recorder:
        recorder.record_round(1, global_model=model, sampled_clients=[0, 1])
        with pytest.raises(InvalidParameterError, match="list of releases"):
            recorder.record_round(2, global_model=model, privacy_events=NoDP([0]))
        with pytest.raises(InvalidParameterError, match="not in the dataset's partition"):
            recorder.record_round(2, global_model=model, sampled_clients=["0"])
    summary = read_ledger(tmp_path / "ck").summary(1e-5)
    assert summary.guarantee == "none" and math.isinf(summary.max_epsilon)
