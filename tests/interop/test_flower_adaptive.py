"""Flower's adaptive-clipping wrappers through the audit tap: both releases recorded per round, C_t read from the
wrapper, and the ε of the recorded events cross-checked against dp-accounting for the same mechanism.

The runs drive the real flwr 1.42 wrappers (their ``configure_train`` and ``aggregate_train``, with a stand-in grid and
synthetic client updates); Flower draws its noise from NumPy's global generator, seeded here.
"""

from __future__ import annotations

import math
import random
from types import SimpleNamespace

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict
from flwr.clientapp.mod import adaptiveclipping_mod
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    FedMedian,
)

from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Gaussian, Neighbouring, Sampling, SubsampledGaussian
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger
from privaudit.interop import DatasetReference, FederationRecorder
from privaudit.interop.flower.adaptive import (
    AdaptiveRound,
    adaptive_round_events,
    configured_noise_multiplier,
)
from privaudit.interop.flower.tap import CLIP_METRIC, TAP_RECORD, AuditTap, flower_dp_settings

DELTA = 1e-5


def _net() -> torch.nn.Module:
    torch.manual_seed(0)  # 64·256 + 256 + 256·10 + 10 = 19 210 coordinates: Flower's noise std measured to ~0.5 %
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 256), torch.nn.Linear(256, 10))


def _settings(z: float = 0.8, m: int = 4, sigma_b: float = 1.0, inner=None, client_side: bool = False):
    wrapper = DifferentialPrivacyClientSideAdaptiveClipping if client_side else DifferentialPrivacyServerSideAdaptiveClipping
    return flower_dp_settings(wrapper(inner if inner is not None else FedAvg(), z, m, initial_clipping_norm=1.0,
                                      clipped_count_stddev=sigma_b))


# -- settings and events, no run -------------------------------------------------------------------------
def test_adaptive_settings_are_read_and_the_configured_multiplier_recovered():
    dp = _settings(0.8, 4, 1.0)
    assert dp.wrapper == "DifferentialPrivacyServerSideAdaptiveClipping" and not dp.client_side
    # Flower keeps z_Δ = (z⁻² − (2σ_b)⁻²)^(-1/2) (Andrew et al. 2021, Thm 1); z is read back from it
    assert dp.noise_multiplier == pytest.approx((0.8 ** -2 - 2.0 ** -2) ** -0.5) and dp.count_stddev == 1.0
    assert dp.configured_noise_multiplier == pytest.approx(0.8, rel=1e-12)
    assert (dp.initial_clipping_norm, dp.target_clipped_quantile, dp.clip_norm_lr) == (1.0, 0.5, 0.2)
    assert dp.clipping_norm is None  # no single clip: a caller needing one C must ask for it
    assert _settings(client_side=True).client_side
    assert configured_noise_multiplier(0.0, 0.0) == 0.0
    with pytest.raises(InvalidParameterError, match="two Flower DP wrappers"):
        flower_dp_settings(DifferentialPrivacyServerSideAdaptiveClipping(
            DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.0, 1.0, 4), 0.8, 4, clipped_count_stddev=1.0))


def test_every_node_training_records_both_releases_with_the_realised_clip_ratio():
    dp = _settings(0.8, 4, 1.0)
    events = adaptive_round_events(dp, AdaptiveRound(3, sampled=4, population=4, replied=4, weights=[5.0] * 4, clip=1.0,
                                   next_clip=0.9, count_released=True, mean_released=True))
    z_mean = dp.noise_multiplier * 0.9  # Flower noises the mean at C_t+1 = 0.9 a sum of sensitivity C_t = 1
    assert [e.mechanism for e in events] == [Gaussian(z_mean), Gaussian(1.0)]
    assert all(e.valid and e.client_id == SERVER and e.round == 3 for e in events)
    assert any("C_t+1 = 0.9" in a for a in events[0].assumptions)
    # composed, one Gaussian of multiplier (z₁⁻² + σ_b⁻²)^(-1/2): the uncentred count has sensitivity 1, not Thm 1's ½
    ledger = PrivacyLedger()
    ledger.record_all(events)
    joint = (z_mean ** -2 + 1.0) ** -0.5
    alone = PrivacyLedger()
    alone.record(PrivacyEvent(SERVER, 3, Gaussian(joint)))
    assert ledger.epsilon_for(SERVER, DELTA, "auto").epsilon == pytest.approx(alone.epsilon_for(SERVER, DELTA, "auto").epsilon,
                                                                              rel=1e-9)
    assert joint < 0.8 * 0.9  # below what the wrapper was configured with, even before the clip ratio


def test_sampled_nodes_make_one_joint_fixed_size_event():
    dp = _settings(0.8, 4, 1.0)
    same_clip = adaptive_round_events(dp, AdaptiveRound(1, sampled=4, population=8, replied=4, weights=[1.0] * 4, clip=1.0,
                                      next_clip=1.0, count_released=True, mean_released=True))
    # the sample size is public: Thm 1's combination, exactly the configured z when the clip did not move
    assert len(same_clip) == 1
    assert same_clip[0].mechanism.noise_multiplier == pytest.approx(0.8, rel=1e-12)
    assert same_clip[0].mechanism.sample_rate == 0.5
    assert same_clip[0].mechanism.sampling is Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT
    moved = adaptive_round_events(dp, AdaptiveRound(1, sampled=4, population=8, replied=3, weights=[1.0] * 3, clip=2.0,
                                  next_clip=1.5, count_released=True, mean_released=True))
    z_mean = dp.noise_multiplier * (1.5 / 2.0) * 3 / 4
    assert moved[0].mechanism.noise_multiplier == pytest.approx((z_mean ** -2 + 2.0 ** -2) ** -0.5, rel=1e-12)
    count_only = adaptive_round_events(dp, AdaptiveRound(1, sampled=4, population=8, replied=4, weights=None, clip=1.0,
                                       next_clip=1.2, count_released=True, mean_released=False))
    assert [e.mechanism for e in count_only] == [SubsampledGaussian(2.0, 0.5, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT)]
    assert count_only[0].valid  # the weights are the mean's business
    full_count_only = adaptive_round_events(dp, AdaptiveRound(1, sampled=4, population=4, replied=4, weights=None, clip=1.0,
                                            next_clip=1.2, count_released=True, mean_released=False))
    assert [e.mechanism for e in full_count_only] == [Gaussian(1.0)]
    assert adaptive_round_events(dp, AdaptiveRound(1, sampled=4, population=4, replied=0, weights=[], clip=1.0, next_clip=1.0,
                                 count_released=False, mean_released=False)) == []


def test_what_breaks_the_mean_leaves_the_count_valid():
    dp = _settings(0.8, 4, 1.0)
    unequal = adaptive_round_events(dp, AdaptiveRound(1, sampled=4, population=4, replied=4, weights=[1.0, 1.0, 1.0, 3.0], clip=1.0,
                                    next_clip=1.0, count_released=True, mean_released=True))
    assert not unequal[0].valid and "weights differ" in unequal[0].note and unequal[1].valid
    sampled = adaptive_round_events(dp, AdaptiveRound(1, sampled=2, population=4, replied=2, weights=None, clip=1.0, next_clip=1.0,
                                    count_released=True, mean_released=True))
    assert not sampled[0].valid and "weights are unknown" in sampled[0].note  # one joint event: invalid as a whole
    median = _settings(inner=FedMedian())
    assert not median.mean_aggregation
    bad = adaptive_round_events(median, AdaptiveRound(1, sampled=4, population=4, replied=4, weights=[1.0] * 4, clip=1.0,
                                next_clip=1.0, count_released=True, mean_released=True))
    assert not bad[0].valid and "FedMedian.aggregate_train" in bad[0].note
    client = _settings(client_side=True)
    unclipped = adaptive_round_events(client, AdaptiveRound(1, sampled=4, population=4, replied=4, weights=[1.0] * 4, clip=0.5,
                                      next_clip=0.5, count_released=True, mean_released=True, largest_norm=0.8))
    assert not unclipped[0].valid and "adaptiveclipping_mod" in unclipped[0].note
    noiseless = flower_dp_settings(DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(), 0.0, 4))
    assert not adaptive_round_events(noiseless, AdaptiveRound(1, sampled=4, population=4, replied=4, weights=[1.0] * 4, clip=1.0,
                                     next_clip=1.0, count_released=True, mean_released=True))[0].has_guarantee


# -- the real wrappers, driven round by round --------------------------------------------------------------
@pytest.fixture(autouse=True)
def _flower_run_id(monkeypatch):
    """Flower's Message needs the run, node and task ids a ServerApp process has; restored after each test."""
    from flwr.supercore.task_identity import TaskIdentity

    monkeypatch.setattr(TaskIdentity, "_run_id", 1)
    monkeypatch.setattr(TaskIdentity, "_node_id", 0)
    monkeypatch.setattr(TaskIdentity, "_task_id", 1)


class _Grid:
    """What FedAvg.configure_train and the tap ask of a grid: the connected nodes (1..N, node k holds partition k−1)."""

    def __init__(self, nodes: int) -> None:
        self.nodes = list(range(1, nodes + 1))

    def get_node_ids(self):
        return list(self.nodes)


def _reply(state: dict[str, torch.Tensor], examples: int = 10):
    return SimpleNamespace(content=RecordDict({"arrays": ArrayRecord(state), "metrics": MetricRecord({"num-examples": examples})}),
                           has_error=lambda: False, metadata=SimpleNamespace(src_node_id=0, message_type="train"))


def _update(state: dict[str, torch.Tensor], partition: int, round_: int, norm: float) -> dict[str, torch.Tensor]:
    """A deterministic update of L2 norm ``norm`` (all clients' clipped when norm > C)."""
    generator = torch.Generator().manual_seed(1000 * round_ + partition)
    noise = {k: torch.randn(v.shape, generator=generator) for k, v in state.items()}
    scale = norm / math.sqrt(sum(float((v ** 2).sum()) for v in noise.values()))
    return {k: noise[k] * scale for k in state}


def _run(tmp_path, wrapper, nodes: int, rounds: int, *, norms=lambda p: 10.0, client_side=False, skip_mod=()):
    """Drive ``AuditTap(wrapper)`` for ``rounds`` rounds; returns (checkpoint, per-round facts read off the wrapper)."""
    net = _net()
    parts = {k: list(range(10 * k, 10 * k + 10)) for k in range(nodes)}
    recorder = FederationRecorder(tmp_path / "ck", model=net, dataset=DatasetReference.packaged("digits", partition=parts),
                                  framework="flwr")
    tap = AuditTap(wrapper, recorder=recorder)
    grid = _Grid(nodes)
    arrays = ArrayRecord(net.state_dict())
    facts = []
    for r in range(1, rounds + 1):
        messages = list(tap.configure_train(r, arrays, ConfigRecord({}), grid))
        before = float(wrapper.clipping_norm)
        current = arrays.to_torch_state_dict()
        replies, clipped_sum = [], {k: torch.zeros_like(v, dtype=torch.float64) for k, v in current.items()}
        for message in messages:
            partition = int(message.metadata.dst_node_id) - 1
            update = _update(current, partition, r, norms(partition))
            size = math.sqrt(sum(float((v.double() ** 2).sum()) for v in update.values()))
            for k in update:
                clipped_sum[k] += update[k].double() * min(1.0, before / size)

            def call_next(msg, context, update=update):
                state = msg.content["arrays"].to_torch_state_dict()
                return _reply({k: state[k] + update[k] for k in state})

            if client_side and partition not in skip_mod:
                reply = adaptiveclipping_mod(message, None, call_next)
            else:
                reply = call_next(message, None)
                if client_side:  # a client without the mod still reports a bit, or Flower refuses the round
                    reply.content["metrics"]["norm_bit"] = 0
            reply.content[TAP_RECORD] = ConfigRecord({"partition-id": partition})
            replies.append(reply)
        aggregated, _ = tap.aggregate_train(r, replies)
        after = float(wrapper.clipping_norm)
        released = aggregated.to_torch_state_dict()
        residual = torch.cat([(released[k].double() - current[k].double() - clipped_sum[k] / len(replies)).flatten()
                              for k in current])
        facts.append({"clip": before, "next_clip": after, "sampled": len(messages), "noise_std": float(residual.std())})
        arrays = aggregated
    tap.close()
    return tmp_path / "ck", facts


def test_server_side_rounds_record_what_flower_drew(tmp_path):
    """Every node trains: per round the count (σ_b) and the mean, whose recorded multiplier is the noise Flower drew
    (measured on the released model) over C_t — Flower noises at C_t+1 (a regression test of that reading)."""
    np.random.seed(3)
    wrapper = DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(), 0.8, 4, initial_clipping_norm=1.0,
                                                            clipped_count_stddev=1.0)
    checkpoint, facts = _run(tmp_path, wrapper, nodes=4, rounds=4)
    ledger = read_ledger(checkpoint)
    metrics = TrainedFederation(checkpoint).manifest["metrics"]
    moved = 0
    for r, fact in enumerate(facts, start=1):
        events = [e for e in ledger.events if e.round == r]
        assert [type(e.mechanism) for e in events] == [Gaussian, Gaussian] and all(e.valid for e in events)
        mean, count = events
        assert count.mechanism == Gaussian(1.0)
        assert mean.mechanism.noise_multiplier * fact["clip"] / 4 == pytest.approx(fact["noise_std"], rel=0.02)
        if abs(fact["next_clip"] / fact["clip"] - 1) > 0.05:  # the clip moved by more than the measurement's precision
            moved += 1
            assert abs(fact["noise_std"] / (wrapper.noise_multiplier * fact["clip"] / 4) - 1) > 0.03  # not drawn at C_t
        assert metrics[r - 1]["other"][CLIP_METRIC] == pytest.approx(fact["clip"])
    assert moved >= 2
    # Flower moves the clip with the clipped fraction in the paper's rule for the unclipped one: every update is
    # clipped here (norm 10 > C), and the clip shrinks instead of growing
    assert facts[-1]["next_clip"] < facts[0]["clip"]


def _dp_accounting_epsilon(event, relation: str, accountant: str) -> float:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    rel = getattr(dp_accounting.NeighboringRelation, relation)
    # PLD at a value discretisation interval of 1e-3: the 5-round figures below move by < 1e-6 from 1e-4, 10× faster
    acct = (pld_privacy_accountant.PLDAccountant(rel, value_discretization_interval=1e-3) if accountant == "pld"
            else rdp_privacy_accountant.RdpAccountant(neighboring_relation=rel))
    return float(acct.compose(event).get_epsilon(DELTA))


def test_full_participation_epsilon_matches_dp_accounting(tmp_path):
    """The same mechanism built in dp-accounting from the wrapper's own parameters and the clip norms read off it:
    per round a Gaussian of multiplier z_Δ·C_t+1/C_t on the sum and one of σ_b on the count (add/remove)."""
    import dp_accounting

    np.random.seed(5)
    wrapper = DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(), 0.8, 4, initial_clipping_norm=1.0,
                                                            clipped_count_stddev=1.0)
    checkpoint, facts = _run(tmp_path, wrapper, nodes=4, rounds=5, norms=lambda p: 0.5 + 0.4 * p)
    ours = read_ledger(checkpoint).summary(DELTA, "auto")
    assert ours.guarantee == "dp"
    z_delta = wrapper.noise_multiplier
    rounds = [dp_accounting.ComposedDpEvent([dp_accounting.GaussianDpEvent(z_delta * f["next_clip"] / f["clip"]),
                                             dp_accounting.GaussianDpEvent(wrapper.clipped_count_stddev)]) for f in facts]
    event = dp_accounting.ComposedDpEvent(rounds)
    pld = _dp_accounting_epsilon(event, "ADD_OR_REMOVE_ONE", "pld")
    rdp = _dp_accounting_epsilon(event, "ADD_OR_REMOVE_ONE", "rdp")
    print(f"adaptive, 4 of 4, 5 rounds: privaudit {ours.max_epsilon:.4f} ({ours.accountant}), dp-accounting PLD {pld:.4f}, "
          f"RDP {rdp:.4f}")
    assert ours.max_epsilon == pytest.approx(pld, rel=0.01)  # stated tolerance: 1 %
    assert ours.max_epsilon <= rdp  # RDP's conversion is looser
    # Thm 1's figure, 5 × Gaussian(z) (centred bits), is below what the uncentred count of Flower gives
    theorem = _dp_accounting_epsilon(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(0.8), 5),
                                     "ADD_OR_REMOVE_ONE", "pld")
    print(f"Thm 1's 5 × Gaussian(z = 0.8): {theorem:.4f}")
    assert theorem < ours.max_epsilon


def test_sampled_rounds_epsilon_matches_dp_accounting(tmp_path):
    """4 of 8 nodes per round, one joint fixed-size event per round. dp-accounting has no PLD of fixed-size sampling:
    privaudit's add/remove pair for it is the Poisson add/remove pair at σ/2 (privaudit.accounting.pairs), built here
    as PoissonSampledDpEvent(q, GaussianDpEvent(z_joint/2)); and dp-accounting's own model of sampling without
    replacement (Wang, Balle & Kasiviswanathan 2019) is stated for replace-one neighbours (the dataset size public),
    compared with privaudit's RDP of the same ledger read under replace-one. z_joint is rebuilt from the wrapper's
    z_Δ, σ_b and the clip norms read off it: one client moves the sum by ≤ 2C_t and the count by ≤ 1."""
    import dp_accounting

    np.random.seed(7)
    random.seed(7)
    wrapper = DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(fraction_train=0.5, min_available_nodes=8), 0.8, 4,
                                                            initial_clipping_norm=1.0, clipped_count_stddev=1.0)
    checkpoint, facts = _run(tmp_path, wrapper, nodes=8, rounds=5, norms=lambda p: 0.5 + 0.2 * p)
    ledger = read_ledger(checkpoint)
    assert len(ledger.events) == 5 and all(isinstance(e.mechanism, SubsampledGaussian) for e in ledger.events)
    sigma_b = wrapper.clipped_count_stddev
    joints = [((wrapper.noise_multiplier * f["next_clip"] / f["clip"]) ** -2 + (2 * sigma_b) ** -2) ** -0.5 for f in facts]
    assert [e.mechanism.noise_multiplier for e in ledger.events] == pytest.approx(joints, rel=1e-12)
    assert all(f["sampled"] == 4 for f in facts)

    ours = ledger.summary(DELTA, "auto")
    poisson = dp_accounting.ComposedDpEvent([dp_accounting.PoissonSampledDpEvent(0.5, dp_accounting.GaussianDpEvent(z / 2))
                                             for z in joints])
    pld = _dp_accounting_epsilon(poisson, "ADD_OR_REMOVE_ONE", "pld")
    print(f"adaptive, 4 of 8, 5 rounds, add/remove: privaudit {ours.max_epsilon:.4f} ({ours.accountant}), "
          f"dp-accounting PLD of the same pair {pld:.4f}")
    assert ours.max_epsilon == pytest.approx(pld, rel=0.01)

    replace = PrivacyLedger(neighbouring=Neighbouring.REPLACE_ONE)
    replace.record_all(ledger.events)
    ours_rdp = replace.epsilon_for(SERVER, DELTA, "rdp").epsilon
    wor = dp_accounting.ComposedDpEvent([dp_accounting.SampledWithoutReplacementDpEvent(8, 4, dp_accounting.GaussianDpEvent(z / 2))
                                         for z in joints])
    rdp = _dp_accounting_epsilon(wor, "REPLACE_ONE", "rdp")
    print(f"replace-one, RDP: privaudit {ours_rdp:.4f}, dp-accounting {rdp:.4f}")
    assert ours_rdp == pytest.approx(rdp, rel=0.02)  # stated tolerance: 2 % (different RDP orders)


def test_client_side_clip_is_sent_measured_and_checked(tmp_path):
    """The clients clip to the C_t the wrapper sends (adaptiveclipping_mod); a client without the mod is caught."""
    np.random.seed(11)
    wrapper = DifferentialPrivacyClientSideAdaptiveClipping(FedAvg(), 0.8, 4, initial_clipping_norm=0.7,
                                                            clipped_count_stddev=1.0)
    checkpoint, facts = _run(tmp_path / "ok", wrapper, nodes=4, rounds=2, client_side=True)
    ledger = read_ledger(checkpoint)
    assert all(e.valid for e in ledger.events) and len(ledger.events) == 4
    assert facts[0]["clip"] == 0.7 and facts[1]["clip"] == pytest.approx(facts[0]["next_clip"])
    metrics = TrainedFederation(checkpoint).manifest["metrics"]
    assert [m["other"][CLIP_METRIC] for m in metrics] == pytest.approx([f["clip"] for f in facts])

    np.random.seed(11)
    wrapper = DifferentialPrivacyClientSideAdaptiveClipping(FedAvg(), 0.8, 4, initial_clipping_norm=0.7,
                                                            clipped_count_stddev=1.0)
    checkpoint, _ = _run(tmp_path / "bad", wrapper, nodes=4, rounds=1, client_side=True, skip_mod=(2,))
    bad = read_ledger(checkpoint)
    mean = [e for e in bad.events if not e.valid]
    assert len(mean) == 1 and "adaptiveclipping_mod" in mean[0].note
    assert bad.summary(DELTA).guarantee == "invalid"


# -- examples/flower_audit.py --adaptive -------------------------------------------------------------------
def _example(*args: str, timeout: float = 900):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "examples/flower_audit.py", *args], cwd=repo, capture_output=True, text=True,
                          timeout=timeout)


def test_example_refuses_adaptive_settings_in_one_line(tmp_path):
    for args, words in ((("--noise", "1"), "clipped_count_stddev"), (("--canary-audit", "4"), "not offered")):
        run = _example("--out", str(tmp_path / "x"), "--adaptive", *args, timeout=600)
        assert run.returncode == 2 and words in run.stderr and "Traceback" not in run.stderr
        assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_example_records_client_side_adaptive_clipping(tmp_path):
    run = _example("--out", str(tmp_path / "run"), "--adaptive", "client", "--rounds", "2", "--seed", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "adaptive clip norm C_t per round: 1, " in run.stdout
    ledger = read_ledger(tmp_path / "run")
    assert [type(e.mechanism) for e in ledger.events] == [Gaussian] * 4 and all(e.valid for e in ledger.events)
    assert 0.4 in {e.mechanism.noise_multiplier for e in ledger.events if e.round == 1}  # the count: σ_b = m/20 = 8/20
