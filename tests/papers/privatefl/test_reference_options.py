"""PrivateFL options that reproduce the reference code (BHui97/PrivateFL): opacus' LDP rate 1/len(DataLoader), the
``*_IN`` models' personal layers, the CDP divisor sr·N as a float, and the reference driver's CDP learning rate."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import RoundObserver, run_federation
from privaudit.fl.engine.seeding import seeded_torch_global
from privaudit.fl.privacy.central_dp import CentralDPConfig
from privaudit.fl.privacy.local_dp import CalibrationTarget, calibrate_client_noise, client_sample_rate
from privaudit.papers.privatefl.algorithm import PrivateFL
from privaudit.papers.privatefl.central_dp import PrivateFLCentralDP
from privaudit.papers.privatefl.experiment import PrivateFLConfig, privacy_wrapper
from privaudit.papers.privatefl.personal_layers import is_personal
from privaudit.papers.privatefl.specs import train_defaults
from privaudit.papers.privatefl.transform import PersonalAffine, PersonalisedModel
from tests.fl.conftest import make_dataset


def test_loader_rate_is_one_over_the_number_of_batches():
    # N = 150, B = 64: opacus samples at 1/⌈150/64⌉ = 1/3, not 64/150 = 0.427 (issue 27)
    assert client_sample_rate(150, 64, "loader") == pytest.approx(1 / 3)
    assert client_sample_rate(150, 64, "batch") == pytest.approx(64 / 150)
    assert client_sample_rate(128, 64, "loader") == pytest.approx(0.5) == client_sample_rate(128, 64)
    loader = calibrate_client_noise([150], CalibrationTarget(epsilon=8, delta=1e-3, rounds=10, epochs=1, batch_size=64,
                                                           rate_rule="loader"))[0]
    batch = calibrate_client_noise([150], CalibrationTarget(epsilon=8, delta=1e-3, rounds=10, epochs=1, batch_size=64))[0]
    assert loader.sample_rate == pytest.approx(1 / 3) and loader.planned_steps == batch.planned_steps == 30
    assert loader.noise_multiplier < batch.noise_multiplier  # a smaller q needs less noise for the same ε


def test_ldp_training_uses_the_loader_rate_when_asked():
    config = PrivateFLConfig(privacy="ldp", epsilon=8.0, rounds=4, batch_size=64, ldp_rate="loader")
    wrapper, _ = privacy_wrapper(config, PrivateFL(), [150, 200], nn.Linear(2, 2))
    assert wrapper.config.rate(0, 150, 64) == pytest.approx(1 / 3)
    assert wrapper.config.rate(1, 200, 64) == pytest.approx(1 / 4)
    default, _ = privacy_wrapper(PrivateFLConfig(privacy="ldp", epsilon=8.0, rounds=4, batch_size=64), PrivateFL(), [150, 200],
                                 nn.Linear(2, 2))
    assert default.config.rate(0, 150, 64) == pytest.approx(64 / 150)
    with pytest.raises(InvalidParameterError, match="ldp-rate"):
        PrivateFLConfig(privacy="ldp", epsilon=8.0, ldp_rate="loader", sample_rate=0.1)
    with pytest.raises(InvalidParameterError, match="sampling-rate rule"):
        PrivateFLConfig(privacy="ldp", epsilon=8.0, ldp_rate="poisson")


def test_reference_personal_layers_keep_norm_and_bn_parameters_local():
    assert is_personal("transform.alpha") and is_personal("transform.alpha", "reference")
    assert not is_personal("body.bn1.weight") and is_personal("body.bn1.weight", "reference")
    assert is_personal("layer1.0.downsample.1.bias", "reference") and not is_personal("layer1.0.downsample.0.weight", "reference")
    assert is_personal("norm.weight", "reference") and not is_personal("fc.weight", "reference")


def _bn_model() -> nn.Module:
    def build() -> nn.Module:
        body = nn.Sequential()
        body.add_module("fc1", nn.Linear(5, 6))
        body.add_module("bn", nn.BatchNorm1d(6))
        body.add_module("fc2", nn.Linear(6, 3))
        return PersonalisedModel(body, PersonalAffine((5,)))

    return seeded_torch_global(0, build)


@pytest.mark.parametrize("layers", ["transform", "reference"])
def test_personal_layers_are_never_averaged(layers):
    algorithm = PrivateFL(personal_layers=layers)
    config = FederationConfig(rounds=2, local=LocalTrainingConfig(epochs=1, batch_size=8, lr=0.1, momentum=0.0), execution="sequential")
    model = _bn_model()
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    result = run_federation(make_dataset(sizes=(24, 40, 16, 32)), model, algorithm, config, progress=False)
    bn = ("body.bn.weight", "body.bn.bias")
    assert set(bn) <= set(algorithm.personal_names) if layers == "reference" else not set(bn) & set(algorithm.personal_names)
    for name in bn:
        moved = not torch.equal(result.state[name], initial[name])
        assert moved is (layers == "transform")  # kept on the clients: the global model's stay at their start
        if layers == "reference":
            assert any(not torch.equal(state[name], initial[name]) for state in result.personal_states.values())
    assert not torch.equal(result.state["body.fc1.weight"], initial["body.fc1.weight"])


class Released(RoundObserver):
    """The sampled clients' updates of the shared weight in round 1."""

    def __init__(self) -> None:
        self.start = None
        self.updates: list[torch.Tensor] = []

    def on_start(self, info) -> None:
        self.start = info.initial_state["body.0.weight"]

    def on_round_end(self, round, state, results, metrics) -> None:
        self.updates = [r.state["body.0.weight"] - self.start for r in results]


def test_reference_cdp_divides_by_sr_times_n_as_a_float():
    exact = CentralDPConfig("reference", noise_multiplier=1.0, client_rate=0.3, num_clients=20, client_sampling="fixed-size")
    assert exact.reference_divisor == pytest.approx(6.0) == exact.expected_clients
    fractional = CentralDPConfig("reference", noise_multiplier=1.0, client_rate=0.25, num_clients=10, client_sampling="fixed-size")
    assert fractional.expected_clients == 2.0 and fractional.reference_divisor == pytest.approx(2.5)
    cdp = PrivateFLCentralDP(PrivateFL(), CentralDPConfig("reference", noise_multiplier=1e-12, client_rate=0.5, num_clients=5))
    model = seeded_torch_global(0, lambda: PersonalisedModel(nn.Sequential(nn.Linear(5, 3, bias=False)), PersonalAffine((5,))))
    config = FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=1, batch_size=8, lr=0.1, momentum=0.0), execution="sequential",
                              clients_per_round=0.5)
    data = make_dataset(sizes=(23, 41, 17, 60, 35))
    start = model.state_dict()["body.0.weight"].clone()
    seen = Released()
    result = run_federation(data, model, cdp, config, progress=False, observers=[seen])
    assert len(seen.updates) == 2  # ⌊0.5·5⌋ clients train ...
    norms = [float(u.norm()) for u in seen.updates]
    clip = min(sorted(norms)[len(norms) // 2 - 1: len(norms) // 2 + 1][0] / 2 + sorted(norms)[1] / 2, 10.0)  # median of two
    clipped = sum(u * min(1.0, clip / n) for u, n in zip(seen.updates, norms, strict=True))
    step = result.state["body.0.weight"] - start
    assert torch.allclose(step, clipped / 2.5, atol=1e-6)  # ... and their clipped sum is divided by sr·N = 2.5
    assert not torch.allclose(step, clipped / 2.0, atol=1e-6)


def test_reference_cdp_variant_defaults_to_the_drivers_learning_rate():
    assert train_defaults("cdp", {"cdp_variant": "reference"})["lr"] == 0.1
    assert train_defaults("cdp", {})["lr"] == 5e-3  # --privacy cdp alone: the paper's Alg. 1 and Table 3's lr
    assert train_defaults("ldp", {})["lr"] == 0.1
    assert PrivateFLConfig(privacy="cdp", epsilon=8.0, cdp_variant="reference").learning_rate == 0.1
    assert PrivateFLConfig(privacy="cdp", epsilon=8.0).learning_rate == 5e-3
