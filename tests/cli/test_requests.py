"""Each command's typed request and library function, used without the CLI: the same answers, the same refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from privaudit.accounting.epsilon_request import AccountingLimits, CheckpointOutput, EpsilonRequest, answer
from privaudit.accounting.mechanisms import Neighbouring, Sampling
from privaudit.audit.requests import DEFAULT_OUT, AuditRequest
from privaudit.cli.app import main
from privaudit.errors import InvalidParameterError
from privaudit.fl.train_request import TrainRequest


def _cli_json(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_an_epsilon_request_answers_as_the_command_does(capsys):
    request = EpsilonRequest(mechanism="subsampled-gaussian", delta=1e-5, accountant="rdp", neighbouring="replace-one",
                             parameters={"noise_multiplier": 1.0, "sample_rate": 0.01, "steps": 100, "sampling": "fixed-size"})
    assert request.neighbouring is Neighbouring.REPLACE_ONE and request.parameters["sampling"] is Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT
    with request.limits.applied():
        data = answer(request).data
    assert data == _cli_json(capsys, "compute-epsilon", "--mechanism", "subsampled-gaussian", "--noise-multiplier", "1",
                             "--sample-rate", "0.01", "--steps", "100", "--delta", "1e-5", "--accountant", "rdp",
                             "--neighbouring", "replace-one", "--sampling", "fixed-size")


def test_a_registered_closed_form_is_a_mechanism_by_name(capsys):
    parameters = {"rounds": 40, "noise": 0.8, "clip": 10.0, "dataset_size": 224.2, "noise_std": "sigma-squared"}
    with AccountingLimits().applied():
        data = answer(EpsilonRequest(mechanism="upcycled-output", delta=1e-3, parameters=parameters)).data
    assert data["epsilon"]["closed_form"] == pytest.approx(1.7529, abs=1e-4)  # the draft's form is the command's default


@pytest.mark.parametrize(("fields", "match"), [
    ({}, "give exactly one of --mechanism, --schedule or --checkpoint"),
    ({"mechanism": "gaussian", "delta": 1e-5, "parameters": {"steps": 3}}, "needs --noise-multiplier"),
    ({"mechanism": "laplace", "delta": 1e-5, "parameters": {"scale": 1.0, "steps": 3, "tensors": 2}},
     "--tensors does not apply to --mechanism laplace"),
    ({"mechanism": "gaussian", "delta": 1e-5, "calibrate": True, "accountant": "gdp",
      "parameters": {"steps": 3}, "epsilon": 1.0}, "never used for calibration"),
    ({"checkpoint": Path("x"), "output": CheckpointOutput(curve_points=1), "delta": 1e-5}, "--curve-points must be at least 2"),
    ({"mechanism": "gaussian", "output": CheckpointOutput(curve=True)}, "--curve writes a ledger or ε-curve result"),
])
def test_an_epsilon_request_refuses_a_bad_field_when_made(fields, match):
    with pytest.raises(InvalidParameterError, match=match):
        EpsilonRequest(**fields)


def test_limits_are_checked_when_made():
    with pytest.raises(InvalidParameterError, match="--vdi must be a positive number"):
        AccountingLimits(vdi=-1.0)


def test_a_train_request_completes_its_spec_before_any_data_loads():
    request = TrainRequest(algorithm="fedavg", dataset="synthetic:iid", rounds=1, classes_per_client=None)
    spec = request.spec
    assert (spec.local.epochs, spec.local.batch_size, spec.local.lr, spec.local.momentum) == (10, 32, 0.01, 0.5)
    assert spec.sampling == Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT.value and spec.execution == "auto"
    assert TrainRequest(algorithm="fedavg", dataset="x", rounds=1, sampling="poisson").spec.sampling == "poisson"
    with pytest.raises(InvalidParameterError, match="train needs --dataset, --rounds"):
        TrainRequest(algorithm="fedavg")
    with pytest.raises(InvalidParameterError, match="either --classes-per-client N or --partition"):
        TrainRequest(algorithm="fedavg", dataset="x", rounds=1, classes_per_client=2, partition="iid")


def test_an_audit_request_names_its_mode_and_refuses_options_of_another(tmp_path):
    assert AuditRequest(list_claims=True).mode == "list" and AuditRequest(list_claims=True).out == DEFAULT_OUT
    assert AuditRequest(scores=tmp_path / "s.json").out is None  # a scores audit writes only when told where
    with pytest.raises(InvalidParameterError, match="apply to --checkpoint audits only"):
        AuditRequest(list_claims=True, canaries=3)
    with pytest.raises(InvalidParameterError, match="apply to --scores audits only"):
        AuditRequest(list_claims=True, mechanism="gaussian")
    with pytest.raises(InvalidParameterError, match="needs at least 2 canaries"):
        AuditRequest(checkpoint=tmp_path, gradient_canaries=1, out=tmp_path)


def test_the_checkpoint_to_inversion_path_is_library_code():
    """A Python user reaches a checkpoint's release without the CLI, and the requests load no torch until run."""
    code = ("import sys\n"
            "from privaudit.accounting.epsilon_request import EpsilonRequest\n"
            "from privaudit.audit.requests import AuditRequest\n"
            "AuditRequest(list_claims=True)\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n"
            "from attacks.inversion.checkpoint_payload import CheckpointRelease, check_release, checkpoint_payload\n"
            "assert 'privaudit.cli' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
