"""Device handling (privaudit.device): cpu/cuda/cuda:N/auto, one-line errors, device recorded, CPU default bit for bit.

The CUDA tests at the end run only where torch sees a GPU (CI has none); a GPU session runs them.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from typer.testing import CliRunner

from privaudit.cli.app import app
from privaudit.device import describe_device, device_record, resolve_device
from privaudit.errors import DeviceUnavailableError, InvalidParameterError
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.run import TrainSpec, run_training

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")


def _spec(**kw) -> TrainSpec:
    kw.setdefault("local", LocalTrainingConfig(epochs=1, batch_size=32))
    kw.setdefault("dataset", "synthetic:iid")
    kw.setdefault("rounds", 2)
    return TrainSpec(algorithm="fedavg", num_clients=6, **kw)


def test_resolve_names_and_rejects_unknown_text():
    assert resolve_device(None) == torch.device("cpu")
    assert resolve_device("CPU") == torch.device("cpu")
    assert resolve_device(torch.device("cpu")) == torch.device("cpu")
    for bad in ("tpu", "cuda:x", "gpu", "", 3):
        with pytest.raises(InvalidParameterError):
            resolve_device(bad)


@no_cuda
def test_auto_picks_the_cpu_and_cuda_is_one_clear_error_without_a_gpu():
    assert resolve_device("auto") == torch.device("cpu")
    for text in ("cuda", "cuda:1"):
        with pytest.raises(DeviceUnavailableError, match="CUDA is not available"):
            resolve_device(text)


def test_description_names_cores_and_architecture():
    text = describe_device("cpu")
    assert text.startswith("cpu (") and "cores" in text
    assert device_record("cpu") == {"device": "cpu", "device_name": text}


def test_cpu_device_is_the_default_bit_for_bit_and_is_recorded(tmp_path):
    default = run_training(_spec(), progress=False)
    cpu = run_training(_spec(device="cpu"), tmp_path / "run", progress=False)
    assert default.state.keys() == cpu.state.keys()
    assert all(torch.equal(default.state[k], cpu.state[k]) for k in default.state)
    assert [m.test_accuracy for m in default.history] == [m.test_accuracy for m in cpu.history]
    assert cpu.info.hardware["device"] == "cpu" and cpu.info.hardware["workers"] == 1
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["hardware"]["device"] == "cpu" and manifest["hardware"]["device_name"].startswith("cpu (")
    assert "device" not in manifest["train_spec"]  # hardware, not recipe: the recipe re-runs anywhere


@no_cuda
def test_train_cli_cuda_without_a_gpu_exits_2_with_one_line(tmp_path):
    result = CliRunner().invoke(app, ["train", "--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1",
                                      "--device", "cuda", "--out", str(tmp_path / "never")])
    assert result.exit_code == 2
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "CUDA is not available" in lines[0]
    assert not (tmp_path / "never").exists()


def test_train_cli_rejects_unknown_device_and_bad_workers():
    for flags, text in ((["--device", "tpu"], "unknown device"), (["--workers", "0"], "--workers")):
        result = CliRunner().invoke(app, ["train", "--algorithm", "fedavg", "--dataset", "synthetic:iid", "--rounds", "1", *flags])
        assert result.exit_code == 2 and text in result.output


def test_api_refuses_an_absent_device_before_loading_data():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(DeviceUnavailableError):
        run_training(_spec(device="cuda:0", dataset="no-such-dataset"), progress=False)


# --------------------------------------------------------------------------- CUDA (skipped without a GPU)
@needs_cuda
def test_cuda_smoke_two_rounds_match_the_cpu_within_noise(tmp_path):
    cpu = run_training(_spec(), progress=False)
    gpu = run_training(_spec(device="cuda"), tmp_path / "gpu", progress=False)
    assert gpu.info.hardware["device"].startswith("cuda") and "cuda" in gpu.info.hardware["device_name"]
    assert all(v.device.type == "cpu" for v in gpu.state.values())  # the federation's state and checkpoint stay on the CPU
    assert abs(gpu.final_accuracy - cpu.final_accuracy) <= 0.02
    for k in cpu.state:
        torch.testing.assert_close(gpu.state[k], cpu.state[k], rtol=1e-3, atol=1e-4)


@needs_cuda
def test_cuda_batched_cnn_repeats_for_a_seed_and_matches_the_cpu_within_noise():
    spec = TrainSpec(algorithm="fedavg", dataset="mnist5k", model="pfa-cnn", rounds=2, num_clients=4,
                     local=LocalTrainingConfig(epochs=1, batch_size=32, lr=0.05), device="cuda")
    first, second = (run_training(spec, progress=False) for _ in range(2))
    assert first.info.execution_mode == "batched (layers)"  # grouped convolutions on the GPU
    assert first.final_accuracy == second.final_accuracy
    cpu = run_training(replace(spec, device="cpu"), progress=False)
    assert abs(first.final_accuracy - cpu.final_accuracy) <= 0.05


@needs_cuda
def test_cuda_dpsgd_runs_on_the_device_and_matches_the_cpu_within_noise():
    private = TrainSpec(algorithm="fedavg", dataset="synthetic:iid", rounds=2, num_clients=4, privacy="dp-sgd",
                        privacy_options={"clip": 1.0, "noise": 1.0}, local=LocalTrainingConfig(epochs=1, batch_size=16),
                        device="cuda")
    gpu = run_training(private, progress=False)
    cpu = run_training(replace(private, device="cpu"), progress=False)
    assert [e.to_dict() for e in gpu.ledger.events] == [e.to_dict() for e in cpu.ledger.events]  # same noise, same ledger
    assert abs(gpu.final_accuracy - cpu.final_accuracy) <= 0.05


@no_cuda
def test_every_command_with_device_refuses_an_absent_gpu_in_one_line(tmp_path):
    run_training(_spec(rounds=1), tmp_path / "ck", progress=False)
    commands = (
        ["audit", "--claim", "upcycled-thm6.2-fig3", "--device", "cuda", "--out", str(tmp_path / "a")],
        ["attack", "membership", "--checkpoint", str(tmp_path / "ck"), "--attack", "lira", "--device", "cuda"],
        ["attack", "inversion", "--dataset", "lfw", "--attack", "ig", "--images", "1", "--device", "cuda:1"],
    )
    for args in commands:
        result = CliRunner().invoke(app, args)
        lines = [line for line in result.output.strip().splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1 and "CUDA is not available" in lines[0], args


def test_training_device_sets_the_default_of_federations_that_name_none(monkeypatch):
    from privaudit.device import DEVICE_ENV, default_device, training_device

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert default_device() is None
    with training_device("auto") as name:
        assert default_device() == name == str(resolve_device("auto"))
        result = run_training(_spec(rounds=1), progress=False)
        assert result.info.hardware["device"] == name
    assert default_device() is None
    with pytest.raises(InvalidParameterError), training_device("tpu"):
        pass
