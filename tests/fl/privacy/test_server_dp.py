"""Server-side privatizers (``--privacy cdp|ddp``) on any algorithm whose server step is post-processing of the mean update.

CLI runs on a tiny generated dataset: the ledger's ε equals :mod:`privaudit.accounting` on the mechanism the run
should have recorded (noise multiplier, client sampling rate, add/remove neighbours), ``compute-epsilon
--checkpoint`` reads it, and a combination that makes no sense is refused in one line before any data is loaded.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.ledger import SERVER
from privaudit.accounting.mechanisms import Composition, Gaussian, Neighbouring, Skellam, SubsampledGaussian
from privaudit.cli.app import main
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.fedavg import FedAvg
from privaudit.fl.algorithms.feddyn import FedDyn
from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine.algorithm import AGGREGATE_OF_CLIENTS, Algorithm
from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import run_federation
from privaudit.fl.privacy.central_dp import CentralDP, CentralDPConfig, dp_fedavg_release
from privaudit.fl.privacy.distributed_dp import DistributedDPConfig, ddp_scale
from privaudit.fl.privacy.local_dp import LocalDP
from privaudit.fl.privacy.registry import privatize
from privaudit.fl.privacy.server_release import AGGREGATE_ID, private_aggregate
from tests.fl.conftest import make_dataset, tiny_model

TINY = ["--num-clients", "4", "--dataset-option", "dim=5", "--dataset-option", "num_classes=2", "--local-epochs", "1",
        "--quiet", "--json"]
DELTA = 1e-5


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _rdp(mechanism, count: int) -> float:
    return get_accountant("rdp").epsilon(Composition.of(mechanism, count, Neighbouring.ADD_REMOVE), DELTA).epsilon


def _compute_epsilon(capsys, out) -> float:
    code, stdout, stderr = _cli(capsys, "compute-epsilon", "--checkpoint", str(out), "--delta", str(DELTA), "--accountant", "rdp",
                                "--json")
    assert code == 0, stderr
    return json.loads(stdout)["max_epsilon"]


# -- the commands ---------------------------------------------------------------------------
def test_fedavg_under_cdp_records_the_sampled_gaussian_of_the_client_rate(capsys, tmp_path):
    out = tmp_path / "cdp"
    code, stdout, stderr = _cli(capsys, "train", "--algorithm", "fedavg", "--privacy", "cdp", "--clip", "0.5", "--noise", "1.1",
                                "--clients-per-round", "0.5", "--sampling", "poisson", "--dataset", "synthetic:iid", "--rounds", "4",
                                "--out", str(out), *TINY)
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["algorithm"] == "fedavg+cdp-dp-fedavg" and summary["invalid_privacy_events"] == 0
    ledger = read_ledger(out)
    assert ledger.neighbouring is Neighbouring.ADD_REMOVE  # one client's whole data added or removed
    assert [(e.client_id, e.round, e.count) for e in ledger.events] == [(SERVER, r, 1) for r in (1, 2, 3, 4)]  # empty rounds too
    assert all(e.mechanism == SubsampledGaussian(1.1, 0.5) and e.valid for e in ledger.events)
    expected = _rdp(SubsampledGaussian(1.1, 0.5), 4)
    assert ledger.summary(DELTA, "rdp").max_epsilon == pytest.approx(expected, rel=1e-9)
    assert _compute_epsilon(capsys, out) == pytest.approx(expected, rel=1e-9)
    privacy = TrainedFederation(out).manifest["algorithm"]["privacy"]
    assert (privacy["client_rate"], privacy["client_sampling"], privacy["num_clients"], privacy["clip_norm"]) == (0.5, "poisson", 4, 0.5)


def test_upcycled_fedprox_under_cdp_pays_for_the_odd_rounds_only(capsys, tmp_path):
    out = tmp_path / "upcycled"
    code, stdout, stderr = _cli(capsys, "train", "--algorithm", "upcycled-fedprox", "--mu", "0.5", "--privacy", "cdp", "--clip", "1",
                                "--noise", "0.9", "--dataset", "synthetic:iid", "--rounds", "6", "--out", str(out), *TINY)
    assert code == 0, stderr
    assert json.loads(stdout)["algorithm"] == "upcycled-fedprox+cdp-dp-fedavg"
    ledger = read_ledger(out)
    assert [e.round for e in ledger.events] == [1, 3, 5]  # even rounds are server-only extrapolation (post-processing)
    assert all(e.mechanism == Gaussian(0.9) for e in ledger.events)  # every client takes part: q = 1
    expected = _rdp(Gaussian(0.9), 3)
    assert ledger.summary(DELTA, "rdp").max_epsilon == pytest.approx(expected, rel=1e-9)
    assert _compute_epsilon(capsys, out) == pytest.approx(expected, rel=1e-9)


def test_fedavg_under_ddp_records_the_skellam_mechanism_of_its_encoding(capsys, tmp_path):
    out = tmp_path / "ddp"
    code, _, stderr = _cli(capsys, "train", "--algorithm", "fedavg", "--privacy", "ddp", "--clip", "1", "--noise", "1.1",
                                "--modulus-bits", "20", "--dataset", "synthetic:iid", "--rounds", "3", "--out", str(out), *TINY)
    assert code == 0, stderr
    ledger = read_ledger(out)
    dimension = 5 * 2 + 2  # logistic regression on 5 features, 2 classes
    scale = ddp_scale(DistributedDPConfig(noise_multiplier=1.1, clip_norm=1.0, bits=20, expected_clients=4), dimension)
    assert [e.round for e in ledger.events] == [1, 2, 3] and all(e.client_id == SERVER and e.valid for e in ledger.events)
    for event in ledger.events:  # four clients, each adding a Skellam share of variance μ/4
        assert isinstance(event.mechanism, Skellam)
        assert event.mechanism.variance == pytest.approx(scale.central_variance, rel=1e-12)
        assert (event.mechanism.l2_sensitivity, event.mechanism.l1_sensitivity) == (scale.l2_sensitivity, scale.l1_sensitivity)
    expected = _rdp(Skellam(scale.central_variance, scale.l2_sensitivity, scale.l1_sensitivity), 3)
    assert ledger.summary(DELTA, "rdp").max_epsilon == pytest.approx(expected, rel=1e-9)
    assert _compute_epsilon(capsys, out) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algorithm", "scaffold", "--privacy", "cdp", "--clip", "1", "--noise", "1"], "control-variate changes Δc_i"),
        (["--algorithm", "upcycled-scaffold", "--privacy", "ddp", "--clip", "1", "--noise", "1"], "control-variate changes Δc_i"),
        (["--algorithm", "fedcurv", "--privacy", "cdp", "--clip", "1", "--noise", "1"], "Fisher diagonals"),
        (["--algorithm", "fedavg", "--privacy", "cdp", "--noise", "1"], "needs --clip C"),
        (["--algorithm", "fedavg", "--privacy", "cdp", "--clip", "1"], "needs --noise"),
        (["--algorithm", "fedavg", "--privacy", "cdp", "--central-variant", "paper", "--clip", "1", "--noise", "1"], "medians"),
        (["--algorithm", "fedavg", "--privacy", "ddp", "--clip", "1", "--noise", "1", "--modulus-bits", "80"], "bit width"),
        (["--algorithm", "fedavg", "--privacy", "cdp", "--clip", "1", "--noise", "1", "--alpha", "2"], "--alpha does not apply"),
        (["--algorithm", "pfedme", "--privacy", "ldp", "--clip", "1", "--noise", "1"], "no DP-SGD form"),
    ],
)
def test_a_combination_that_makes_no_sense_is_refused_before_any_data_is_loaded(capsys, args, message):
    # the dataset does not exist: a refusal that names the combination came before loading it
    code, _, stderr = _cli(capsys, "train", *args, "--dataset", "nosuchdata", "--rounds", "2", "--quiet")
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in stderr
    assert message in lines[0] and "nosuchdata" not in lines[0]


# -- every algorithm it makes sense for ---------------------------------------------------------------
SOUND = ("fedavg", "fedprox", "fedavgm", "fedyogi", "feddyn", "pfedme", "sgd", "upcycled-fedavgm")


@pytest.mark.parametrize("name", SOUND)
@pytest.mark.parametrize("privacy", ["cdp", "ddp"])
def test_server_side_dp_runs_on_every_algorithm_whose_server_step_is_post_processing(name, privacy):
    options = {"clip": 1.0, "noise": 1.0, **({"modulus_bits": 24} if privacy == "ddp" else {})}
    algorithm = make_algorithm(name, privatizer=lambda a: privatize(a, privacy, options))
    config = FederationConfig(rounds=2, local=LocalTrainingConfig(epochs=1, batch_size=16), clients_per_round=0.5, seed=1)
    result = run_federation(make_dataset(), tiny_model(), algorithm, config, progress=False)
    events = result.ledger.events
    assert events and all(e.client_id == SERVER for e in events)
    assert all(torch.isfinite(v).all() for v in result.state.values())
    if privacy == "cdp":  # fixed-size client sampling at q < 1 is not the Poisson sampling the event assumes: flagged
        assert all(e.mechanism == SubsampledGaussian(1.0, 0.5) and not e.valid and "fixed-size" in e.note for e in events)


def test_an_algorithm_that_declares_nothing_is_refused():
    class Opaque(Algorithm):
        name = "opaque"

    with pytest.raises(InvalidParameterError, match="opaque does not declare its server step post-processing"):
        privatize(Opaque(), "cdp", clip=1.0, noise=1.0)
    assert isinstance(privatize(FedAvg(), "cdp", clip=1.0, noise=1.0), CentralDP)


def test_ldp_is_dp_sgd():
    ldp, dp_sgd = privatize(FedAvg(), "ldp", clip=2.0, noise=0.8), privatize(FedAvg(), "dp-sgd", clip=2.0, noise=0.8)
    assert isinstance(ldp, LocalDP) and ldp.config == dp_sgd.config


# -- the server step sees only the private release ------------------------------------------------------
class _Spy(FedAvg):
    """FedAvg that keeps what its server step was given."""

    def setup(self, context) -> None:
        super().setup(context)
        self.seen = []

    def aggregate(self, round, global_state, results):
        self.seen.append(list(results))
        return super().aggregate(round, global_state, results)


def test_the_inner_server_step_sees_only_the_private_aggregate():
    spy = _Spy()
    cdp = privatize(spy, "cdp", clip=0.3, noise=2.0)
    config = FederationConfig(rounds=3, local=LocalTrainingConfig(epochs=1, batch_size=16), clients_per_round=0.5,
                              sampling="poisson", seed=3)
    result = run_federation(make_dataset(), tiny_model(), cdp, config, progress=False)
    assert len(spy.seen) == 3
    for results in spy.seen:
        assert len(results) == 1 and results[0].client_id == AGGREGATE_ID and not results[0].extras
        assert results[0].info[AGGREGATE_OF_CLIENTS] == pytest.approx(0.5 * 6)  # the fixed denominator q·N
    torch.testing.assert_close(result.state, spy.seen[-1][0].state, rtol=0, atol=0)  # FedAvg of one result is that result


def test_dp_fedavg_noise_on_the_mean_has_std_sigma_c_over_the_denominator():
    like = {"w": torch.zeros(400, 250, dtype=torch.float64)}
    updates = [{"w": torch.full((400, 250), 5.0, dtype=torch.float64)} for _ in range(3)]  # each clipped to C = 0.2
    mean, norms = dp_fedavg_release(updates, like, sigma=1.5, clip=0.2, divisor=4.0, generator=torch.Generator().manual_seed(0))
    assert norms == pytest.approx([5.0 * math.sqrt(1e5)] * 3)
    signal = 3 * 0.2 / math.sqrt(1e5) / 4.0  # three clipped updates, spread evenly, over the denominator
    noise = mean["w"] - signal
    # 10⁵ draws: the sample std of N(0, s²) lies within 1 % of s except with probability < 1e-9
    assert float(noise.std()) == pytest.approx(1.5 * 0.2 / 4.0, rel=0.01)
    assert abs(float(noise.mean())) < 6 * 1.5 * 0.2 / 4.0 / math.sqrt(1e5)


def test_feddyn_reads_the_private_aggregate_as_the_sum_of_the_clients_it_stands_for():
    """FedDyn's h needs Σ_{i∈S}(θ_i − θ): one private aggregate of K clients gives what K equal client models would."""
    initial = tiny_model().state_dict()
    state = {k: v.clone() for k, v in initial.items()}
    moved = {k: v + 0.1 for k, v in state.items()}

    def h_after(results):
        dyn = FedDyn(alpha=0.5)
        dyn.setup(type("Context", (), {"trainable": tuple(state), "initial_state": state, "num_clients": 6})())
        dyn.aggregate(1, state, results)
        return dyn.h

    clients = [private_aggregate(moved, 1.0) for _ in range(3)]
    torch.testing.assert_close(h_after([private_aggregate(moved, 3.0)]), h_after(clients))


def test_an_explicit_client_sampling_that_contradicts_the_federation_is_refused():
    cdp = CentralDP(FedAvg(), CentralDPConfig("dp-fedavg", noise_multiplier=1.0, client_rate=0.25, client_sampling="poisson"))
    config = FederationConfig(rounds=1, local=LocalTrainingConfig(epochs=1), clients_per_round=0.5, sampling="poisson")
    with pytest.raises(InvalidParameterError, match=r"client rate 0\.25, but the federation runs 0\.5"):
        run_federation(make_dataset(), tiny_model(), cdp, config, progress=False)
