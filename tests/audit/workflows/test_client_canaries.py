"""White-box canary-client audits (issue 26, part 2): orthonormal directions, the summed-projection score on known
releases, the recorded-loop helper (LoopCanaries) and its stored record, and ``privaudit audit --checkpoint DIR
--client-canaries m`` end to end on a re-trained privaudit run and on a recorded plain loop (bad input → one line,
exit 2)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from attacks.membership import canary_client_sums
from attacks.membership.releases import FederationReleases
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.canaries import directions as directions_module
from privaudit.fl.canaries.client_file import CANARY_FILE, read_canary_clients
from privaudit.fl.canaries.clients import make_canary_clients
from privaudit.fl.canaries.directions import random_orthonormal_directions
from privaudit.interop import DatasetReference, FederationRecorder, GaussianRelease, LoopCanaries
from tests.audit.helpers import checkpoint_without_recipe, one_line_audit_error, run_audit

torch.set_num_threads(1)


@pytest.mark.parametrize("budget", [2e10, 0.0])  # QR (Haar) and, beyond the flop budget, disjoint supports
def test_orthonormal_directions_are_orthonormal(monkeypatch, budget):
    monkeypatch.setattr(directions_module, "QR_BUDGET", budget)
    count, dimension = 40, 130
    directions = random_orthonormal_directions(count, dimension, np.random.default_rng(0))
    assert directions.shape == (count, dimension)
    assert np.abs(directions @ directions.T - np.eye(count)).max() < 1e-10


def test_more_orthonormal_directions_than_dimensions_are_refused():
    with pytest.raises(InvalidParameterError, match="at most 5"):
        random_orthonormal_directions(6, 5, np.random.default_rng(0))


class _Known(FederationReleases):
    """Global models given as vectors (one tensor)."""

    def __init__(self, vectors):
        self.vectors = [torch.tensor(v, dtype=torch.float64) for v in vectors]
        self.rounds = len(vectors) - 1
        self.trained_rounds = tuple(range(1, len(vectors)))
        self.keys = ("w",)
        self.source = "known"

    def global_state(self, round_):
        return {"w": self.vectors[round_]}


def test_iterate_sums_are_the_summed_projections_of_every_round():
    canaries = make_canary_clients(4, 3, seed=1, orthonormal=True)
    rng = np.random.default_rng(5)
    vectors = np.cumsum(rng.normal(size=(6, 4)), axis=0)
    expected = sum(canaries.directions @ (vectors[t] - vectors[t - 1]) for t in range(1, 6))
    np.testing.assert_allclose(canary_client_sums(_Known(vectors), canaries), expected, atol=1e-12)
    with pytest.raises(InvalidParameterError, match="dimension 4"):
        canary_client_sums(_Known(rng.normal(size=(3, 5))), canaries)


# -- a recorded plain loop with canary clients ------------------------------------------------------
def _loop(out, *, noise: float, canaries: int, rounds: int = 3, clients: int = 4, seed: int = 0, save: bool = True):
    """DP-FedAvg, every client every round, on random data: the loop examples/byo_pytorch.py runs, in miniature."""
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(80, 8)).astype(np.float32), rng.integers(0, 3, 80)
    partition = {k: np.arange(k * 10, k * 10 + 10) for k in range(clients)}
    data = DatasetReference.from_arrays("toy", x, y, partition=partition, non_members=np.arange(40, 80), store=True)
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))  # d = 195
    helper = LoopCanaries(net, canaries, clip=1.0, first_id=clients, seed=seed)
    population = [*range(clients), *helper.client_ids]
    generator = torch.Generator().manual_seed(seed)
    with FederationRecorder(out, model=net, dataset=data, seed=seed, overwrite=True) as recorder:
        for r in range(1, rounds + 1):
            base = {k: v.detach().clone() for k, v in net.state_dict().items()}
            total = {k: torch.zeros_like(v) for k, v in base.items()}
            for k in population:
                if helper.is_canary(k):
                    update = helper.update(k, like=base)
                else:
                    update = {n: 0.01 * torch.randn(v.shape, generator=generator) for n, v in base.items()}
                norm = float(torch.sqrt(sum((u ** 2).sum() for u in update.values())))
                for n in base:
                    total[n] += update[n] * min(1.0, 1.0 / max(norm, 1e-12))
            net.load_state_dict({n: base[n] + (total[n] + noise * torch.randn(base[n].shape, generator=generator))
                                 / len(population) for n in base})
            recorder.record_round(r, global_model=net, sampled_clients=list(range(clients)),
                                  privacy_events=[GaussianRelease("server", noise_multiplier=noise, clip=1.0, level="client",
                                                                  sample_rate=1.0)])
    if save:
        helper.save(out)
    return helper


def test_loop_canaries_give_clip_norm_updates_and_store_what_scoring_needs(tmp_path):
    helper = _loop(tmp_path / "run", noise=1.0, canaries=40)
    assert helper.orthonormal and len(helper.client_ids) == int(helper.canaries.inserted.sum())
    update = helper.update(helper.client_ids[0])
    assert float(torch.sqrt(sum((u.double() ** 2).sum() for u in update.values()))) == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(InvalidParameterError, match="not a present canary"):
        helper.update(0)
    canaries, record = read_canary_clients(tmp_path / "run")
    np.testing.assert_array_equal(canaries.directions, helper.canaries.directions)
    assert record["participations"][str(helper.client_ids[0])] == 3  # sampled in each of the three rounds
    # an edited record is refused, not scored against other directions
    record["inserted"][0] = not record["inserted"][0]
    (tmp_path / "run" / CANARY_FILE).write_text(json.dumps(record))
    with pytest.raises(CheckpointError, match="differ from those its seed regenerates"):
        read_canary_clients(tmp_path / "run")


def test_recorded_loop_audit_separates_inserted_canaries_and_stays_below_the_claim(tmp_path, capsys):
    helper = _loop(tmp_path / "run", noise=1.0, canaries=150)
    result = helper.audit(tmp_path / "run")
    assert result.source == "recorded"
    bounds = {b.estimator: b for b in result.bounds}
    assert list(bounds) == ["one-run-fdp"]  # a Gaussian ledger without subsampling: its own curve, at the full α
    assert bounds["one-run-fdp"].significance == pytest.approx(0.05)
    assert result.details["mechanism_mu"]["composed"] == pytest.approx(np.sqrt(3.0))
    assert result.attack["metrics"]["auc"]["estimate"] > 0.75  # μ = √3: AUC Φ(√3/√2) ≈ 0.89
    assert 0 < bounds["one-run-fdp"].epsilon_lb <= result.claim.epsilon
    code, out, err = run_audit(capsys, "--checkpoint", str(tmp_path / "run"), "--client-canaries", "150", "--out",
                               str(tmp_path / "audit"), "--power-trials", "10", "--quiet")
    assert code == 0, err
    data = json.loads((tmp_path / "audit" / "client-canaries.json").read_text())["data"]
    assert data["details"]["source"] == "recorded" and "recorded by the run's loop" in out
    assert [b["epsilon_lb"] for b in data["lower_bounds"]] == [b.epsilon_lb for b in result.bounds]
    one_line_audit_error(capsys, "--checkpoint", str(tmp_path / "run"), "--client-canaries", "20",
                         match="give --client-canaries 150")


# -- a privaudit run, re-trained with canary clients ------------------------------------------------
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.run import TrainSpec, run_training

    root = tmp_path_factory.mktemp("cc-runs")
    made = {}
    cdp = {"privacy": "cdp", "privacy_options": {"clip": 1.0, "noise": 1.0}}
    sampled = {**cdp, "clients_per_round": 0.5, "sampling": "poisson"}
    record_level = {"privacy": "dp-sgd", "privacy_options": {"clip": 1.0, "noise": 4.0}}
    for name, privacy in (("cdp", cdp), ("sampled", sampled), ("plain", {}), ("dp-sgd", record_level)):
        spec = TrainSpec(algorithm="fedavg", dataset="synthetic:iid", rounds=3, num_clients=6,
                         local=LocalTrainingConfig(epochs=1, batch_size=32, lr=0.1),
                         dataset_options={"dim": 20, "num_classes": 3}, **privacy)  # logreg: d = 63 scalars
        made[name] = run_training(spec, root / name, progress=False) and root / name
    return made


def test_rerun_audit_adds_canary_clients_sampled_like_clients(capsys, tmp_path, runs):
    code, _out, err = run_audit(capsys, "--checkpoint", str(runs["cdp"]), "--client-canaries", "60", "--out", str(tmp_path),
                               "--power-trials", "10", "--quiet")
    assert code == 0, err
    data = json.loads((tmp_path / "client-canaries.json").read_text())["data"]
    details = data["details"]
    assert details["source"] == "re-run" and details["real_clients"] == 6
    inserted = data["attack"]["inserted"]
    assert details["canary_clients_sampled_per_round"] == [inserted] * 3  # every client (canaries too) every round
    assert details["directions"].startswith("random orthonormal")  # 60 ≤ d = 63
    assert [b["estimator"] for b in data["lower_bounds"]] == ["one-run-fdp"]
    assert all(b["epsilon_lb"] <= data["claimed"]["epsilon"] for b in data["lower_bounds"])
    assert data["attack"]["metrics"]["auc"]["estimate"] > 0.8  # μ = √3


def test_rerun_canaries_are_subject_to_the_runs_client_sampling(capsys, tmp_path, runs):
    code, _out, err = run_audit(capsys, "--checkpoint", str(runs["sampled"]), "--client-canaries", "60", "--out",
                                str(tmp_path), "--power-trials", "10", "--quiet")
    assert code == 0, err
    data = json.loads((tmp_path / "client-canaries.json").read_text())["data"]
    per_round, inserted = data["details"]["canary_clients_sampled_per_round"], data["attack"]["inserted"]
    assert all(0 < n < inserted for n in per_round) and len(set(per_round)) > 1  # Poisson at q = ½, not always in
    assert data["details"]["mechanism_family"] == "any" and data["details"]["mechanism_mu"] is None
    # the run's own curve: the ledger's T Poisson-subsampled Gaussian releases (one-run-fdp-ledger alone at α)
    assert [b["estimator"] for b in data["lower_bounds"]] == ["one-run-fdp-ledger"]
    assert "subsampled" in data["details"]["mechanism_family_reason"].lower()
    assert all(b["epsilon_lb"] <= data["claimed"]["epsilon"] for b in data["lower_bounds"])


@pytest.mark.parametrize(("args", "match"), [
    (("--client-canaries", "1"), "at least 2 canary clients"),
    (("--client-canaries", "10", "--one-run"), "does not take --one-run"),
    (("--client-canaries", "10", "--gradient-canaries", "10"), "does not take --gradient-canaries"),
    (("--client-canaries", "10", "--trials", "2"), "does not take --trials"),
])
def test_bad_client_canary_input_is_one_line_and_exit_2(capsys, runs, args, match):
    one_line_audit_error(capsys, "--checkpoint", str(runs["cdp"]), *args, match=match)


def test_bad_client_canary_checkpoints(capsys, tmp_path, runs):
    one_line_audit_error(capsys, "--checkpoint", str(checkpoint_without_recipe(runs["cdp"], tmp_path)),
                         "--client-canaries", "10", match="records no training recipe")
    one_line_audit_error(capsys, "--checkpoint", str(runs["plain"]), "--client-canaries", "10", "--claimed-epsilon", "1",
                         match="canary clients audit client-level DP")
    # record-level DP (DP-SGD in the clients): a canary client's update would pass un-noised, so it is refused
    one_line_audit_error(capsys, "--checkpoint", str(runs["dp-sgd"]), "--client-canaries", "10",
                         match="record-level DP")
    one_line_audit_error(capsys, "--claim", "pfa-heterogeneous-calibration", "--client-canaries", "10",
                         match="apply to --checkpoint audits only")
