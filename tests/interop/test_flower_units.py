"""The Flower adapter's parts that need no simulation: DP settings and events, tap_mod, CanaryMod, what is hosted."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
)

from privaudit.accounting.ledger import SERVER, PrivacyLedger
from privaudit.accounting.mechanisms import Gaussian, Sampling, SubsampledGaussian
from privaudit.errors import InvalidParameterError
from privaudit.fl.run import TrainSpec
from privaudit.interop.flower.canary import CanaryMod, flatten_floats
from privaudit.interop.flower.hosted import check_hosted, spec_from_json, spec_to_json
from privaudit.interop.flower.tap import TAP_RECORD, AuditTap, dp_round_event, flower_dp_settings, tap_mod


def _message(kind: str = "train", content: RecordDict | None = None, error: bool = False):
    return SimpleNamespace(metadata=SimpleNamespace(message_type=kind), content=content if content is not None else RecordDict(),
                           has_error=lambda: error)


def _context(partition: int):
    return SimpleNamespace(node_config={"partition-id": partition, "num-partitions": 4})


def _reply_with(state: dict[str, torch.Tensor]):
    def call_next(message, context):
        return _message(content=RecordDict({"arrays": ArrayRecord({k: v.clone() for k, v in state.items()}),
                                            "metrics": MetricRecord({"num-examples": 10})}))
    return call_next


# -- DP settings and events ----------------------------------------------------------------------------
def test_dp_settings_are_read_through_the_wrappers():
    assert flower_dp_settings(FedAvg()) is None
    server = flower_dp_settings(DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.1, 0.5, 3))
    assert (server.wrapper, server.noise_multiplier, server.clipping_norm, server.num_sampled_clients) == (
        "DifferentialPrivacyServerSideFixedClipping", 1.1, 0.5, 3)
    client = flower_dp_settings(DifferentialPrivacyClientSideFixedClipping(FedAvg(), 2.0, 1.0, 5))
    assert client.wrapper == "DifferentialPrivacyClientSideFixedClipping" and client.noise_multiplier == 2.0


def test_adaptive_clipping_is_read_not_refused():
    """Issue 26: the adaptive wrappers are recorded (tests/interop/test_flower_adaptive.py), no longer refused."""
    strategy = DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(), 0.5, 4, clipped_count_stddev=1.0)
    dp = flower_dp_settings(strategy)
    assert dp.wrapper == "DifferentialPrivacyServerSideAdaptiveClipping"
    assert dp.configured_noise_multiplier == pytest.approx(0.5) and dp.count_stddev == 1.0


def test_dp_round_event_is_fixed_size_subsampled_and_accounted():
    dp = flower_dp_settings(DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.0, 0.5, 2))
    event = dp_round_event(dp, 3, sampled=2, population=8, replied=2, weights=[10.0, 10.0])
    assert event.client_id == SERVER and event.round == 3 and event.valid
    assert event.mechanism == SubsampledGaussian(1.0, 0.25, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT)
    full = dp_round_event(dp, 1, sampled=8, population=8, replied=2, weights=[1.0, 1.0])
    assert full.mechanism == Gaussian(1.0)
    ledger = PrivacyLedger()
    ledger.record_all([event] * 5)
    eps = ledger.summary(1e-5).max_epsilon
    assert 0 < eps < math.inf


def test_dp_round_event_states_what_breaks_the_guarantee():
    dp = flower_dp_settings(DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.0, 0.5, 4))
    unequal = dp_round_event(dp, 1, sampled=4, population=4, replied=4, weights=[10.0, 10.0, 10.0, 30.0])
    assert not unequal.valid and "weights differ" in unequal.note
    partial = dp_round_event(dp, 1, sampled=4, population=4, replied=2, weights=[1.0, 1.0])
    assert partial.valid and partial.mechanism == Gaussian(0.5)  # σ·n/m: the noise on the mean of 2 is σC/4
    assert dp_round_event(dp, 1, sampled=4, population=4, replied=0, weights=[]) is None
    noiseless = flower_dp_settings(DifferentialPrivacyServerSideFixedClipping(FedAvg(), 0.0, 0.5, 4))
    assert not dp_round_event(noiseless, 1, sampled=4, population=4, replied=4, weights=[1.0] * 4).has_guarantee



def test_dp_round_event_is_invalid_unless_the_wrapped_strategy_takes_fedavgs_mean():
    """Regression: σC/m is calibrated to the mean of clipped updates; a median, trimmed mean or server optimiser step
    around it is not that mean (Flower's own accountant refuses such strategies too)."""
    from flwr.serverapp.strategy import FedAdam, FedMedian, FedProx, FedTrimmedAvg

    for other in (FedMedian(), FedTrimmedAvg(), FedAdam()):
        dp = flower_dp_settings(DifferentialPrivacyServerSideFixedClipping(other, 1.0, 0.5, 4))
        assert not dp.mean_aggregation
        event = dp_round_event(dp, 1, sampled=4, population=4, replied=4, weights=[1.0] * 4)
        assert not event.valid and f"{dp.aggregator}.aggregate_train" in event.note
    prox = flower_dp_settings(DifferentialPrivacyServerSideFixedClipping(FedProx(), 1.0, 0.5, 4))
    assert prox.mean_aggregation and dp_round_event(prox, 1, sampled=4, population=4, replied=4, weights=[1.0] * 4).valid

# -- the tap's client mod and its checks ---------------------------------------------------------------
def test_tap_mod_tags_train_replies_only():
    call_next = _reply_with({"w": torch.zeros(2)})
    reply = tap_mod(_message("train"), _context(3), call_next)
    assert reply.content[TAP_RECORD]["partition-id"] == 3
    other = tap_mod(_message("evaluate"), _context(3), call_next)
    assert TAP_RECORD not in other.content
    with pytest.raises(InvalidParameterError, match="partition-id"):
        tap_mod(_message("train"), SimpleNamespace(node_config={}), call_next)


def test_audit_tap_refuses_what_it_cannot_record(tmp_path):
    with pytest.raises(InvalidParameterError, match="Flower strategy"):
        AuditTap(object(), recorder=None)
    with pytest.raises(InvalidParameterError, match="FederationRecorder"):
        AuditTap(FedAvg(), recorder=object())


# -- the canary mod ------------------------------------------------------------------------------------
def test_canary_mod_adds_the_inserted_canaries_to_its_client_only():
    state = {"0.weight": torch.randn(3, 4), "0.bias": torch.randn(3), "steps": torch.tensor(7)}
    mod = CanaryMod(8, client=1, magnitude=2.0, seed=5)
    untouched = mod(_message("train"), _context(0), _reply_with(state))
    assert torch.equal(untouched.content["arrays"].to_torch_state_dict()["0.weight"], state["0.weight"])
    changed = mod(_message("train"), _context(1), _reply_with(state)).content["arrays"].to_torch_state_dict()
    assert torch.equal(changed["steps"], state["steps"])  # integer tensors are no canary coordinates
    shift = flatten_floats(changed) - flatten_floats(state)
    canaries = mod.canaries(15)
    expected = 2.0 * canaries.directions[canaries.inserted[0]].sum(axis=0)
    assert np.allclose(shift.numpy(), expected, atol=1e-5)
    scores = canaries.directions @ shift.numpy()  # a noiseless release separates inserted from absent canaries
    assert scores[canaries.inserted[0]].min() > scores[~canaries.inserted[0]].max()


def test_canary_mod_checks_its_settings():
    with pytest.raises(InvalidParameterError):
        CanaryMod(1, client=0, magnitude=1.0)
    with pytest.raises(InvalidParameterError, match="magnitude"):
        CanaryMod(4, client=0, magnitude=-1.0)
    with pytest.raises(InvalidParameterError, match="no magnitude"):
        CanaryMod(4, client=0).canaries(10)


# -- what Flower can host ------------------------------------------------------------------------------
@pytest.mark.parametrize(("algorithm", "privacy", "match"), [
    ("scaffold", "none", "keep state"),
    ("fedavg", "dp-sgd", "privatises on the clients"),
    ("upcycled-feddyn", "none", "keep state"),
])
def test_hosting_refuses_client_state_and_client_privatizers(algorithm, privacy, match):
    with pytest.raises(InvalidParameterError, match=match):
        check_hosted(TrainSpec(algorithm=algorithm, dataset="digits", rounds=1, privacy=privacy))


def test_hosted_specs_travel_as_json():
    spec = TrainSpec(algorithm="upcycled-fedprox", dataset="digits", rounds=2, algorithm_options={"mu": 0.1},
                     privacy="cdp", privacy_options={"clip": 1.0, "noise": 0.5}, seed=4)
    check_hosted(spec)
    assert spec_from_json(spec_to_json(spec)) == spec


# -- the tap without a DP wrapper: every sampled client released without a guarantee -------------------
def test_audit_tap_records_a_run_without_dp_as_no_guarantee(tmp_path):
    from flwr.app import ConfigRecord

    from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger
    from privaudit.interop import DatasetReference, FederationRecorder

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    data = DatasetReference.packaged("digits", partition={0: list(range(10)), 1: list(range(10, 30))},
                                     non_members=list(range(30, 60)))
    recorder = FederationRecorder(tmp_path / "ck", model=net, dataset=data, framework="flwr")
    tap = AuditTap(FedAvg(), recorder=recorder, record_client_updates=True)
    tap._global = ArrayRecord(net.state_dict())
    sent = {k: {n: v + (k + 1) for n, v in net.state_dict().items()} for k in (0, 1)}
    replies = [_message(content=RecordDict({"arrays": ArrayRecord(sent[k]), "metrics": MetricRecord({"num-examples": n}),
                                            TAP_RECORD: ConfigRecord({"partition-id": k})}))
               for k, n in ((0, 10), (1, 20))]
    aggregated, _ = tap.aggregate_train(1, replies)
    assert aggregated is not None
    tap.close()

    ledger = read_ledger(tmp_path / "ck")
    assert sorted(e.client_id for e in ledger.events) == ["0", "1"] and not any(e.has_guarantee for e in ledger.events)
    assert ledger.summary(1e-5).max_epsilon == math.inf
    federation = TrainedFederation(tmp_path / "ck")
    expected = {n: (10 * sent[0][n] + 20 * sent[1][n]) / 30 for n in sent[0]}  # FedAvg's example-weighted mean
    assert all(torch.allclose(federation.global_state(1)[n], expected[n], atol=1e-6) for n in expected)
    assert torch.equal(federation.client_releases(1)[1]["state"]["1.bias"], sent[1]["1.bias"])
    assert federation.manifest["metrics"][0]["clients"] == [0, 1]


def test_audit_tap_refuses_replies_without_tap_mod(tmp_path):
    from privaudit.interop import DatasetReference, FederationRecorder

    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    data = DatasetReference.packaged("digits", partition={0: list(range(10))})
    tap = AuditTap(FedAvg(), recorder=FederationRecorder(tmp_path / "ck", model=net, dataset=data))
    reply = _message(content=RecordDict({"arrays": ArrayRecord(net.state_dict()), "metrics": MetricRecord({"num-examples": 1})}))
    with pytest.raises(InvalidParameterError, match="tap_mod"):
        tap.aggregate_train(1, [reply])


def test_audit_tap_keeps_flowers_own_epsilon_beside_privaudits(tmp_path):
    import json

    from flwr.serverapp import (
        GaussianPrivacyEvent,
        NeighboringRelation,
        PrivacyConfig,
        RdpAccountant,
        SamplingMethod,
    )

    from privaudit.interop import DatasetReference, FederationRecorder

    accountant = RdpAccountant(PrivacyConfig(1e-5, 4, NeighboringRelation.ADD_OR_REMOVE_ONE, SamplingMethod.NO_AMPLIFICATION))
    wrapper = DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.0, 1.0, 4, accountant=accountant)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    data = DatasetReference.packaged("digits", partition={0: list(range(10))})
    tap = AuditTap(wrapper, recorder=FederationRecorder(tmp_path / "ck", model=net, dataset=data))
    accountant.compose(GaussianPrivacyEvent(noise_multiplier=1.0, sample_size=4, population_size=4), count=3)
    tap.close()
    reported = json.loads((tmp_path / "ck" / "manifest.json").read_text())["reported_epsilon"]
    assert len(reported) == 1 and "DifferentialPrivacyServerSideFixedClipping accountant" in reported[0]["source"]
    assert reported[0]["epsilon"] == pytest.approx(accountant.get_privacy_spent().epsilon)
    # what Flower's accountant composed, in privaudit's terms: Gaussian(σ) per release, no amplification (issue 24)
    from privaudit.accounting.reported import FrameworkAccounting

    model = FrameworkAccounting.from_dict(reported[0]["accounted_as"])
    assert (model.method, model.bound, model.mechanisms) == ("rdp", "upper", ((Gaussian(1.0), 3),))
    assert "displace" in model.caveat


def test_canary_scores_sum_every_round_not_only_the_sampled_ones(tmp_path):
    """Regression: the score may not use which rounds the canary client was sampled in (not released; the claim's
    subsampling amplification rests on it), so a shift in a round without that client still counts."""
    from torch import nn

    from privaudit.interop import DatasetReference, FederationRecorder
    from privaudit.interop.flower.canary import canary_scores

    model = nn.Sequential(nn.Linear(4, 3))
    x = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    data = DatasetReference.from_arrays("toy", x, np.array([0, 1, 2, 0, 1, 2]), partition={0: [0, 1], 1: [2, 3]},
                                        non_members=[4, 5])
    mod = CanaryMod(4, client=0, magnitude=1.0, seed=3)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    canaries = mod.canaries(int(flatten_floats(state).numel()))
    with FederationRecorder(tmp_path / "run", model=model, dataset=data) as recorder:
        recorder.record_round(1, global_model=state, sampled_clients=[0])
        moved = flatten_floats(state) + torch.from_numpy(canaries.directions[0])
        keys = sorted(state)
        offsets = np.cumsum([0] + [state[k].numel() for k in keys])
        shifted = {k: moved[offsets[i]:offsets[i + 1]].reshape(state[k].shape).float() for i, k in enumerate(keys)}
        recorder.record_round(2, global_model=shifted, sampled_clients=[1])
    scores, _, rounds = canary_scores(tmp_path / "run", mod)
    assert rounds == [1]
    assert scores[0] == pytest.approx(1.0, abs=1e-5) and np.allclose(scores[1:], 0.0, atol=1e-5)


def test_client_side_clipping_is_checked_on_the_updates_that_arrive():
    """Regression: the server trusts fixedclipping_mod; an update longer than C makes the round's event invalid."""
    from privaudit.interop.flower.tap import largest_update_norm

    sent = ArrayRecord({"w": torch.ones(4), "b": torch.zeros(2)})

    def reply(shift):  # a Flower RecordDict as a train reply carries it (the model, its metrics, the tap's tag)
        return _message(content=RecordDict({"arrays": ArrayRecord({"w": torch.ones(4) + shift, "b": torch.zeros(2)}),
                                            "metrics": MetricRecord({"num-examples": 10}),
                                            TAP_RECORD: ConfigRecord({"partition-id": 0})}))

    clipped = torch.tensor([0.3, 0.4, 0.0, 0.0])  # norm 0.5 = C, exactly clipped
    assert largest_update_norm([reply(clipped)], sent) <= 0.5 * (1 + 1e-6)
    dp = flower_dp_settings(DifferentialPrivacyClientSideFixedClipping(FedAvg(), 1.0, 0.5, 2))
    ok = dp_round_event(dp, 1, sampled=2, population=2, replied=2, weights=[1.0, 1.0],
                        largest_norm=largest_update_norm([reply(clipped), reply(clipped / 2)], sent))
    assert ok.valid
    unclipped = largest_update_norm([reply(clipped), reply(clipped * 3)], sent)
    assert unclipped == pytest.approx(1.5, rel=1e-5)
    bad = dp_round_event(dp, 1, sampled=2, population=2, replied=2, weights=[1.0, 1.0], largest_norm=unclipped)
    assert not bad.valid and "fixedclipping_mod" in bad.note
