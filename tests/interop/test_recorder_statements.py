"""What the recorder and its adapters write is true (issue 24): no optimistic sampling default, a constant sampled count
declared Poisson is flagged, a framework's ε carries what its accountant composed, and an opacus run is never lost."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from privaudit.accounting.reported import NOT_AN_UPPER_BOUND, assess_reported
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.checkpoint import read_ledger
from privaudit.interop import DatasetReference, FederationRecorder, GaussianRelease
from privaudit.interop.opacus import OpacusRecorder, OpacusTap, record_opacus_run
from tests.interop.recorded import CustomNet, digits_reference, make_sequential

CLIENTS = 10


def _loop(out, *, sampling: str, draw) -> FederationRecorder:
    """10 rounds of client-level DP over 10 clients, sampled by ``draw(rng)``, declared as ``sampling`` at q = 0.5."""
    order = np.random.default_rng(0).permutation(1797)
    data = DatasetReference.packaged("digits", partition={k: order[k * 10:(k + 1) * 10] for k in range(CLIENTS)})
    net = make_sequential()
    rng = random.Random(0)
    with FederationRecorder(out, model=net, dataset=data) as recorder:
        for r in range(1, 11):
            sampled = sorted(draw(rng))
            dp = GaussianRelease("server", noise_multiplier=1.0, clip=1.0, sample_rate=0.5, sampling=sampling, level="client")
            recorder.record_round(r, global_model=net, sampled_clients=sampled, privacy_events=[dp])
    return recorder


def test_a_fixed_number_of_clients_declared_poisson_is_invalid_with_the_reason(tmp_path):
    _loop(tmp_path / "fixed", sampling="poisson", draw=lambda rng: rng.sample(range(CLIENTS), 5))
    ledger = read_ledger(tmp_path / "fixed")
    assert not any(e.valid for e in ledger.events)
    note = ledger.events[0].note
    assert "exactly 5 of the 10 clients" in note and "sampling='fixed-size'" in note
    summary = ledger.summary(1e-5)
    assert summary.guarantee == "invalid" and "fixed-size" in summary.statement


def test_poisson_sampling_and_an_honest_fixed_size_declaration_stay_valid(tmp_path):
    _loop(tmp_path / "poisson", sampling="poisson", draw=lambda rng: [k for k in range(CLIENTS) if rng.random() < 0.5])
    assert all(e.valid for e in read_ledger(tmp_path / "poisson").events)
    _loop(tmp_path / "declared", sampling="fixed-size", draw=lambda rng: rng.sample(range(CLIENTS), 5))
    ledger = read_ledger(tmp_path / "declared")
    assert all(e.valid for e in ledger.events)
    assert ledger.summary(1e-5, "ctd").max_epsilon == pytest.approx(31.40, abs=0.01)


def test_the_recorder_refuses_an_unrecordable_model_before_training(tmp_path):
    with pytest.raises(InvalidParameterError, match="architecture=ModelFactory"):
        FederationRecorder(tmp_path / "r", model=CustomNet(), dataset=digits_reference())
    assert not (tmp_path / "r").exists()  # nothing written, nothing trained yet


# -- opacus: checked before training; a failure after it keeps the run ------------------------------------------
class _Accountant:
    def __init__(self, name: str, history, epsilon: float):
        self.name, self.history, self.epsilon = name, history, epsilon

    def mechanism(self) -> str:
        return self.name

    def get_epsilon(self, delta: float) -> float:
        return self.epsilon


class _Engine:
    """Stands in for an opacus PrivacyEngine: an accountant with a history, its name and its ε."""

    def __init__(self, name: str = "prv", history=((1.0, 0.1, 30),), epsilon: float = 100.0):
        self.accountant = _Accountant(name, list(history), epsilon)

    def get_epsilon(self, delta: float) -> float:
        return self.accountant.get_epsilon(delta)


def _one_client():
    order = np.random.default_rng(0).permutation(1797)
    return DatasetReference.packaged("digits", partition={0: order[:300]}, non_members=order[300:400])


def test_opacus_recorder_refuses_a_custom_module_before_the_first_step(tmp_path):
    with pytest.raises(InvalidParameterError, match="architecture=ModelFactory"):
        OpacusRecorder(tmp_path / "op", model=CustomNet(), dataset=_one_client())
    recorder = OpacusRecorder(tmp_path / "ok", model=make_sequential(), dataset=_one_client())
    path = recorder.finish(model=make_sequential(), engine=_Engine(), delta=1e-5, clip=1.0)
    manifest = json.loads((path / "manifest.json").read_text())
    (entry,) = manifest["reported_epsilon"]
    assert entry["accounted_as"]["method"] == "prv" and entry["accounted_as"]["bound"] == "upper"


def test_record_opacus_run_keeps_the_weights_when_it_fails(tmp_path):
    model = CustomNet()
    with pytest.raises(InvalidParameterError, match=r"kept in .*op\.unrecorded") as failure:
        record_opacus_run(tmp_path / "op", model=model, dataset=_one_client(), engine=_Engine(), delta=1e-5, clip=1.0)
    assert "architecture=ModelFactory" in str(failure.value) and "\n" not in str(failure.value)
    from safetensors.torch import load_file

    kept = load_file(str(tmp_path / "op.unrecorded" / "weights.safetensors"))
    assert torch.equal(kept["head.weight"], model.head.weight.detach())
    history = json.loads((tmp_path / "op.unrecorded" / "opacus-history.json").read_text())["history"]
    assert history == [[1.0, 0.1, 30]]


def test_opacus_gdp_is_an_approximation_and_a_shuffled_loader_is_refused(tmp_path):
    recorder = OpacusRecorder(tmp_path / "gdp", model=make_sequential(), dataset=_one_client())
    path = recorder.finish(model=make_sequential(), engine=_Engine("gdp"), delta=1e-5, clip=1.0)
    entry = json.loads((path / "manifest.json").read_text())["reported_epsilon"][0]
    assert assess_reported(entry, read_ledger(path))["status"] == NOT_AN_UPPER_BOUND  # even above privaudit's bound
    low = OpacusRecorder(tmp_path / "low", model=make_sequential(), dataset=_one_client()).finish(
        model=make_sequential(), engine=_Engine("gdp", epsilon=0.01), delta=1e-5, clip=1.0)
    entry = json.loads((low / "manifest.json").read_text())["reported_epsilon"][0]
    assert assess_reported(entry, read_ledger(low))["status"] == "refuted"  # below a certified lower bound
    pytest.importorskip("opacus")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 1)), batch_size=2, shuffle=True)
    with pytest.raises(InvalidParameterError, match="not opacus's DPDataLoader"):
        OpacusTap(_Engine(), clip=1.0, data_loader=loader)


def test_a_factory_model_is_recorded_by_the_opacus_recorder(tmp_path):
    from privaudit.interop import ModelFactory

    recorder = OpacusRecorder(tmp_path / "f", model=CustomNet(), dataset=_one_client(),
                              architecture=ModelFactory("tests.interop.recorded:make_custom_net", {"width": 16}))
    path = recorder.finish(model=CustomNet(), engine=_Engine("rdp"), delta=1e-5, clip=1.0)
    assert math.isfinite(read_ledger(path).summary(1e-5).max_epsilon)
