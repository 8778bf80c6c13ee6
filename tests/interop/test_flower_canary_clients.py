"""Canary clients in Flower (:class:`privaudit.interop.flower.FlowerCanaryClients`): appended to the replies before
Flower's own DP wrapper clips, averages and noises them, its noise calibrated to the results including the canaries;
recorded without listing a canary as a client; audited by ``privaudit audit --checkpoint RUN --client-canaries m``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import ArrayRecord, Message, Metadata, MetricRecord, RecordDict
from flwr.serverapp.strategy import (
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
)

from privaudit.errors import InvalidParameterError
from privaudit.interop import LoopCanaries
from privaudit.interop.flower import FlowerCanaryClients

REPO = Path(__file__).resolve().parents[2]


class _Sampled(FedAvg):
    """FedAvg whose configure_train 'samples' n nodes without a Flower run (no grid, no message identity needed)."""

    def __init__(self, n: int) -> None:
        super().__init__(fraction_evaluate=0.0)
        self.n = n

    def configure_train(self, server_round, arrays, config, grid):
        return [f"instruction {i}" for i in range(self.n)]


def _reply(node: int, state: dict[str, torch.Tensor], examples: int = 10) -> Message:
    metadata = Metadata(run_id=1, message_id="", src_node_id=node, dst_node_id=0, reply_to_message_id="", group_id="",
                        created_at=0.0, ttl=60.0, message_type="train")
    content = RecordDict({"arrays": ArrayRecord(state), "metrics": MetricRecord({"num-examples": examples,
                                                                                 "train_loss": float(node)})})
    return Message(content=content, metadata=metadata)


def _flat(record: ArrayRecord) -> np.ndarray:
    return np.concatenate([a.ravel() for a in record.to_numpy_ndarrays()]).astype(np.float64)


def _setup(noise: float, count: int = 40, real: int = 3):
    base = {"w": torch.zeros(20, 10), "b": torch.zeros(10)}
    canaries = LoopCanaries(base, count=count, clip=1.0, first_id=real, seed=3)
    dp = DifferentialPrivacyServerSideFixedClipping(_Sampled(real), noise, 1.0, real)
    strategy = FlowerCanaryClients(dp, canaries, real_sampled=real)
    return base, canaries, dp, strategy


def test_canaries_pass_through_flowers_dp_wrapper_which_counts_them():
    base, canaries, dp, strategy = _setup(noise=0.0)
    present = len(canaries.client_ids)
    assert 0 < present < 40 and dp.num_sampled_clients == 3 + present  # Flower's m counts the canaries
    assert len(strategy.configure_train(1, ArrayRecord(base), None, None)) == 3 and strategy.round_canaries == canaries.client_ids
    real = [{"w": torch.full((20, 10), 5.0 * (i + 1)), "b": torch.zeros(10)} for i in range(3)]  # far beyond C = 1
    aggregated, metrics = strategy.aggregate_train(1, [_reply(i, s) for i, s in enumerate(real)])
    # σ = 0: the mean of the n + P results as Flower's wrapper clipped them (each real update to norm 1)
    clipped = sum(_flat(ArrayRecord(s)) / np.linalg.norm(_flat(ArrayRecord(s))) for s in real)
    inserted = sum(canaries.canaries.directions[canaries.canaries.canary_of_client()[k]] for k in canaries.client_ids)
    expected = (clipped + inserted) / (3 + present)
    assert np.allclose(_flat(aggregated), expected, atol=1e-6)
    assert metrics["train_loss"] == pytest.approx(1.0)  # the canaries carry the real replies' mean metrics
    assert canaries.participations == {k: 1 for k in canaries.client_ids}


def test_the_wrappers_noise_is_calibrated_to_the_results_including_canaries():
    np.random.seed(0)  # Flower's wrapper draws its noise from NumPy's global generator
    base, canaries, _, strategy = _setup(noise=2.0, count=150)
    n = 3 + len(canaries.client_ids)
    strategy.configure_train(1, ArrayRecord(base), None, None)
    real = {"w": torch.full((20, 10), 1e-3), "b": torch.zeros(10)}  # (Flower's clip divides by the norm: not 0)
    aggregated, _ = strategy.aggregate_train(1, [_reply(i, dict(real)) for i in range(3)])
    inserted = sum(canaries.canaries.directions[canaries.canaries.canary_of_client()[k]] for k in canaries.client_ids)
    residual = _flat(aggregated) - (inserted + 3 * _flat(ArrayRecord(real))) / n
    # N(0, (σC/m)²) per coordinate with m = n results: the noise on their sum has multiplier σ
    assert np.std(residual) * n == pytest.approx(2.0, rel=0.2)


def test_every_present_canary_takes_part_in_every_round():
    base, canaries, dp, strategy = _setup(noise=1.0, count=400)
    present = list(canaries.client_ids)
    assert dp.num_sampled_clients == 3 + len(present)
    for round_ in (1, 2):
        strategy.configure_train(round_, ArrayRecord(base), None, None)
        assert strategy.round_canaries == present


class _Grid:
    def __init__(self, nodes: int) -> None:
        self.nodes = nodes

    def get_node_ids(self):
        return list(range(self.nodes))


def test_a_round_that_samples_fewer_than_every_node_is_refused():
    base, _canaries, _dp, strategy = _setup(noise=1.0)  # the strategy configures 3 nodes
    strategy.configure_train(1, ArrayRecord(base), None, _Grid(3))
    with pytest.raises(InvalidParameterError, match="every node in every round"):
        strategy.configure_train(2, ArrayRecord(base), None, _Grid(6))


def test_the_example_refuses_canary_clients_under_client_sampling(tmp_path):
    done = _run("examples/flower_audit.py", "--out", str(tmp_path / "run"), "--fraction", "0.5", "--noise", "1",
                "--canary-clients", "10", timeout=300)
    assert done.returncode == 2, done.stderr
    assert "--fraction 1" in done.stderr and "Traceback" not in done.stderr


def test_refuses_what_it_cannot_audit():
    base = {"w": torch.zeros(20, 10)}
    canaries = LoopCanaries(base, count=10, clip=1.0, first_id=3)
    with pytest.raises(InvalidParameterError, match="fixed-clipping"):
        FlowerCanaryClients(DifferentialPrivacyServerSideAdaptiveClipping(FedAvg(), 0.5, 20), canaries, real_sampled=3)
    with pytest.raises(InvalidParameterError, match="clip"):
        FlowerCanaryClients(DifferentialPrivacyServerSideFixedClipping(FedAvg(), 1.0, 2.0, 3), canaries, real_sampled=3)


def _run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_flower_canary_client_audit_runs_end_to_end_and_stays_below_epsilon(tmp_path):
    out = tmp_path / "flower"
    run = _run("examples/flower_audit.py", "--out", str(out), "--clients", "4", "--rounds", "2", "--noise", "2",
               "--canary-clients", "60", "--seed", "1")
    assert run.returncode == 0, run.stderr[-3000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [m["clients"] for m in manifest["metrics"]] == [list(range(4))] * 2  # no canary listed as a client
    assert manifest["dataset"]["partition"]["clients"] == 4
    stored = json.loads((out / "canary-clients.json").read_text())
    present = len(stored["client_ids"])
    assert stored["count"] == 60 and stored["participations"] == {str(k): 2 for k in stored["client_ids"]}
    events = manifest["ledger"]["events"]
    assert len(events) == 2 and all(e["mechanism"]["type"] == "Gaussian" for e in events)
    assert all(e["mechanism"]["noise_multiplier"] == pytest.approx(2.0) for e in events)
    assert all(e["assumptions"][1].startswith(f"{4 + present} of {4 + present} nodes sampled: 4 by Flower's sample_nodes")
               for e in events)
    assert all(f"and {present} virtual canary clients" in e["assumptions"][1] for e in events)
    check = _run("-m", "privaudit", "check", str(out), "--json")
    assert check.returncode == 0, check.stdout[-3000:]  # the recorded sampling fits what the ledger declares

    audit = _run("-m", "privaudit", "audit", "--checkpoint", str(out), "--client-canaries", "60", "--out",
                 str(tmp_path / "audit"))
    assert audit.returncode == 0, audit.stderr[-3000:]
    result = json.loads((tmp_path / "audit" / "client-canaries.json").read_text())
    data = result.get("data", result)
    bounds = data["lower_bounds"]
    assert [b["estimator"] for b in bounds] == ["one-run-fdp"]  # every client every round: the Gaussian curve
    claimed = data["claimed"]["epsilon"]
    assert all(0 <= b["epsilon_lb"] <= claimed for b in bounds)


@pytest.mark.slow
def test_flower_canary_clients_certify_half_the_claim(tmp_path):
    """README, "Canary-client audits": DP-FedAvg in Flower, every client every round, σ = 3, 10 rounds (ε = 4.653)."""
    out = tmp_path / "flower"
    run = _run("examples/flower_audit.py", "--out", str(out), "--rounds", "10", "--noise", "3", "--hidden", "256",
               "--canary-clients", "10000", "--seed", "0", timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    audit = _run("-m", "privaudit", "audit", "--checkpoint", str(out), "--client-canaries", "10000", "--out",
                 str(tmp_path / "audit"))
    assert audit.returncode == 0, audit.stderr[-3000:]
    data = json.loads((tmp_path / "audit" / "client-canaries.json").read_text())["data"]
    (bound,) = data["lower_bounds"]
    claimed = data["claimed"]["epsilon"]
    assert claimed == pytest.approx(4.653, abs=1e-3)
    assert 0.5 * claimed <= bound["epsilon_lb"] <= claimed < bound["ceiling"]
