"""The PFA family trained end to end on tiny federations: local DP-SGD, ledger, pre-check, stop, uplink."""

from __future__ import annotations

import pytest
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.registry import make_algorithm
from privaudit.fl.engine import params as P
from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
from privaudit.fl.engine.round_loop import run_federation
from privaudit.papers.pfa.experiment import PFAConfig, realised_steps, run_privacy, train_pfa
from tests.fl.conftest import make_dataset, tiny_model

SIZES = (40,) * 8

#: opacus warns on its own backward hooks for inputs without gradients (privaudit.fl.privacy.dpsgd); harmless here.
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")


def _budget_file(tmp_path, values=(0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 8.0, 9.0)):
    path = tmp_path / "eps.txt"
    path.write_text("\n".join(map(str, values)))
    return f"file:{path}"


def _run(name, tmp_path, rounds=6, seed=0, **options):
    dataset = make_dataset(sizes=SIZES, dim=5, num_classes=3)
    algorithm = make_algorithm(name, {"budgets": _budget_file(tmp_path), "local_steps": 8, **options})
    config = FederationConfig(rounds=rounds, local=LocalTrainingConfig(epochs=1, batch_size=5, lr=0.2, momentum=0.0),
                              clients_per_round=0.75, seed=seed)
    result = run_federation(dataset, tiny_model(dim=5, num_classes=3), algorithm, config, progress=False)
    return result, algorithm


def test_pfa_trains_with_local_dp_and_keeps_budgets_in_the_ledger(tmp_path):
    result, algorithm = _run("pfa", tmp_path)
    ledger = result.ledger
    assert {cid: b.epsilon for cid, b in ledger.budgets.items()} == {str(i): e for i, e in enumerate((0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 8.0, 9.0))}
    assert ledger.events and all(e.mechanism.sample_rate == pytest.approx(5 / 40) for e in ledger.events)
    plan = algorithm.plan
    assert plan["clients_per_round"] == 6 and plan["local_steps_per_round"] == [8] * 8  # τ = 8 = one epoch of ⌈40/5⌉
    planned = algorithm.calibrations[0].planned_steps  # ⌊6·6/8⌋ = 4 rounds of 8 steps
    assert planned == 32
    steps = realised_steps(result)
    assert max(steps.values()) <= planned
    summary = ledger.summary(1e-5, accountant="rdp")
    assert not any(c.over_budget for c in summary.per_client.values())
    # σ_m decreases with ε_m: the public clients are the least noised
    sigmas = [c.noise_multiplier for c in algorithm.calibrations]
    assert sigmas == sorted(sigmas, reverse=True)
    assert all(r.aggregation == "pfa" for r in algorithm.records)
    assert algorithm.records[0].public == [c for c in algorithm.records[0].public if c in (6, 7)]


def test_training_stops_when_fewer_than_k_clients_remain(tmp_path):
    result, algorithm = _run("weiavg", tmp_path, rounds=8)
    stopped = algorithm.sampler.stopped
    assert stopped is not None and stopped.round <= 8
    trained = [m for m in result.history if m.trained]
    assert len(trained) == stopped.round - 1 and all(len(m.clients) == 6 for m in trained)
    assert all(not m.clients for m in result.history if not m.trained)
    assert "pass the budget pre-check" in algorithm.stop_reason
    frozen = [m.test_accuracy for m in result.history[stopped.round - 1 :]]
    assert len(set(frozen)) == 1  # the global model no longer changes


def test_pfa_plus_uplink_reduction_and_determinism(tmp_path):
    result, algorithm = _run("pfa-plus", tmp_path, rounds=5)
    summary = algorithm.uplink.summary()
    assert summary["by_role"]["private"]["projected_uploads"] > 0
    p = sum(v.numel() for v in result.state.values())
    private = summary["by_role"]["private"]
    warm = sum(1 for u in algorithm.uplink.uploads if u.role == "private" and u.kind == "full")
    assert private["bytes"] == 4 * p * warm + 4 * 2 * private["projected_uploads"]  # 1 coefficient per tensor
    assert summary["reduction_private"] > 0.5
    again, _ = _run("pfa-plus", tmp_path, rounds=5)
    assert P.equal(result.state, again.state)


@pytest.mark.parametrize("name", ["fedavg-hdp", "minimum", "maximum", "public-only", "np-fedavg"])
def test_baselines(name, tmp_path):
    result, algorithm = _run(name, tmp_path, rounds=3)
    events = result.ledger.events
    if name == "np-fedavg":
        assert not events and not result.ledger.budgets and algorithm.dp is None
        return
    operating = set(algorithm.operating_eps)
    if name == "minimum":
        assert operating == {0.3}
    if name == "maximum":
        assert operating == {9.0}
        over = [c for c in result.ledger.summary(1e-5, accountant="rdp").per_client.values() if c.over_budget]
        assert over and all(float(c.budget) < 9.0 for c in over)  # Maximum spends more than the private budgets
    if name == "public-only":
        assert {int(e.client_id) for e in events} <= {6, 7}
    assert torch.isfinite(torch.cat([v.reshape(-1) for v in result.state.values()])).all()


def test_reference_calibration_run_and_real_epsilon(tmp_path):
    result, algorithm = _run("pfa", tmp_path, noise_calibration="reference")
    assert all(c.method == "reference" for c in algorithm.calibrations)
    steps = realised_steps(result)
    assert max(steps.values()) <= algorithm.calibrations[0].planned_steps


def test_bad_configurations(tmp_path):
    with pytest.raises(InvalidParameterError, match="projection dims k must be at least 1"):
        make_algorithm("pfa", {"projection_dims": 0})
    with pytest.raises(InvalidParameterError, match="unknown budget distribution"):
        make_algorithm("pfa", {"budgets": "zipf"})
    dataset = make_dataset(sizes=SIZES, dim=5, num_classes=3)
    algorithm = make_algorithm("pfa", {"budgets": _budget_file(tmp_path)})
    config = FederationConfig(rounds=2, clients_per_round=0.5, sampling="poisson")
    with pytest.raises(InvalidParameterError, match="fixed-size client sampling"):
        run_federation(dataset, tiny_model(dim=5, num_classes=3), algorithm, config, progress=False)
    with pytest.raises(InvalidParameterError, match=r"budget file .* has 8 budgets for 6 clients"):
        small = make_dataset(sizes=(40,) * 6, dim=5, num_classes=3)
        run_federation(small, tiny_model(dim=5, num_classes=3), make_algorithm("pfa", {"budgets": _budget_file(tmp_path)}),
                       FederationConfig(rounds=1), progress=False)


def test_train_pfa_entry_point_on_mnist5k():
    torch.set_num_threads(1)
    result = train_pfa(PFAConfig(algorithm="pfa", rounds=2, num_clients=20, local_steps=29, options={"split": "kmeans"}))
    assert result.final_accuracy is not None and result.final_accuracy > 0.2
    rows = run_privacy(result)
    assert len(rows) == 20 and all(r.epsilon_realised <= r.claimed_epsilon for r in rows)
    assert result.report["plan"]["local_steps_per_round"][0] == 29
    assert sum(r.realised_steps for r in rows) == sum(e.count for e in result.ledger.events)
