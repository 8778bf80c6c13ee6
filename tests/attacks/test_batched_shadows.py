"""LiRA's shadow federations in lanes (attacks.membership.batched_shadows) give the shadows trained one by one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from attacks.membership import LiRAAttack, LiRAConfig, TargetModel
from attacks.membership.batched_shadows import Lockstep
from attacks.membership.examples import examples_from_dataset
from privaudit.data.base import ClientData, FederatedDataset
from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.compose import run_spec_on_dataset
from privaudit.fl.engine.config import LocalTrainingConfig
from tests.attacks.membership_setup import overfit_dataset, overfit_spec


def _image_dataset(seed: int = 0, clients: int = 3, n: int = 8, classes: int = 3) -> FederatedDataset:
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(clients):
        x = rng.normal(size=(2 * n, 1, 8, 8)).astype(np.float32)
        y = rng.integers(0, classes, 2 * n)
        parts.append(ClientData(x[:n], y[:n], x[n:], y[n:]))
    return FederatedDataset(name="tiny-images", clients=parts, num_classes=classes, input_shape=(1, 8, 8))


def _shadow_phi(dataset, spec, *, shadows=4, batch=True):
    target = TargetModel.from_result(run_spec_on_dataset(spec, dataset, seed=0), dataset, spec)
    examples = examples_from_dataset(dataset, max_per_side=12, seed=0)
    attack = LiRAAttack(LiRAConfig(shadows=shadows, shadow_batch=batch, seed=3))
    stats = attack.shadow_statistics(target, examples)
    return stats, attack.extra_meta()


@pytest.mark.parametrize("model", ["logreg", "upcycled-mlp"])
def test_lanes_give_the_sequential_shadows_bit_for_bit(model):
    """Linear layers stack as batched matrix products: each lane's arithmetic is its federation's own (dropout too)."""
    dataset, spec = overfit_dataset(clients=3, n=10), overfit_spec(rounds=2, model=model, clients_per_round=0.7,
                                                                   local=LocalTrainingConfig(epochs=3, batch_size=4, lr=0.3))
    lanes, meta = _shadow_phi(dataset, spec, batch=True)
    alone, meta_alone = _shadow_phi(dataset, spec, batch=False)
    assert meta["shadow_training"].startswith("batched across shadow federations")
    assert not meta_alone["shadow_training"].startswith("batched across")
    np.testing.assert_array_equal(lanes.keep, alone.keep)
    np.testing.assert_array_equal(lanes.phi, alone.phi)
    assert np.unique(lanes.phi.round(6), axis=0).shape[0] == 4  # four different shadow models


def test_lanes_match_sequential_shadows_for_a_cnn():
    spec = overfit_spec(rounds=2, model="lenet-dlg", dataset="tiny-images", local=LocalTrainingConfig(epochs=2, batch_size=4, lr=0.1))
    dataset = _image_dataset()
    lanes, meta = _shadow_phi(dataset, spec, batch=True)
    alone, _ = _shadow_phi(dataset, spec, batch=False)
    assert meta["shadow_training"].startswith("batched across shadow federations")
    np.testing.assert_allclose(lanes.phi, alone.phi, rtol=0, atol=1e-5)


def test_solvers_without_a_stacked_form_run_per_shadow_in_lockstep():
    """DP-SGD solves per client: the lockstep hands each shadow's round to its own trainer, same results."""
    spec = overfit_spec(rounds=2, privacy="dp-sgd", privacy_options={"clip": 1.0, "noise": 0.5},
                        local=LocalTrainingConfig(epochs=1, batch_size=8, lr=0.3))
    dataset = overfit_dataset(clients=3, n=10)
    lanes, meta = _shadow_phi(dataset, spec, shadows=2, batch=True)
    alone, _ = _shadow_phi(dataset, spec, shadows=2, batch=False)
    assert "in lockstep" in meta["shadow_training"]
    np.testing.assert_array_equal(lanes.phi, alone.phi)


def test_a_failing_shadow_stops_the_lockstep_with_its_error():
    lockstep = Lockstep(3)
    calls = []

    def job(k):
        def run(make_trainer):
            calls.append(k)
            if k == 1:
                raise InvalidParameterError("shadow 1 failed")
            return k
        return run

    before = threading.active_count()
    with pytest.raises(InvalidParameterError, match="shadow 1 failed"):
        lockstep.run([job(k) for k in range(3)])
    assert calls[:2] == [0, 1]  # one thread at a time, in lane order
    assert threading.active_count() == before  # no thread left behind


def test_shadow_batch_must_be_a_boolean():
    with pytest.raises(InvalidParameterError, match="shadow_batch"):
        LiRAConfig(shadow_batch="yes")


def test_lanes_resume_the_shadows_missing_from_out_dir(tmp_path):
    dataset = overfit_dataset(clients=3, n=10)
    spec = overfit_spec(rounds=2, local=LocalTrainingConfig(epochs=2, batch_size=4, lr=0.3))
    target = TargetModel.from_result(run_spec_on_dataset(spec, dataset, seed=0), dataset, spec)
    examples = examples_from_dataset(dataset, max_per_side=12, seed=0)
    first = LiRAAttack(LiRAConfig(shadows=4, out_dir=str(tmp_path)))
    full = first.shadow_statistics(target, examples)
    trials = tmp_path / "trials.jsonl"
    lines = trials.read_text().splitlines()
    trials.write_text("\n".join(lines[:2]) + "\n")  # as if killed after two shadows were recorded
    again = LiRAAttack(LiRAConfig(shadows=4, out_dir=str(tmp_path)))
    resumed = again.shadow_statistics(target, examples)
    np.testing.assert_array_equal(resumed.phi, full.phi)
    assert again.extra_meta()["shadow_lanes"]["shadows_trained"] == 2


@pytest.mark.parametrize("fail_in", ["stacked-round", "on-round", "after-training"])
def test_a_failure_inside_a_round_is_one_error_not_a_hang(monkeypatch, fail_in):
    """The round runs in whichever thread hands in last; its error (or one raised by a shadow that already trained a
    round) must stop every thread and surface once."""
    import attacks.membership.batched_shadows as batched

    def lanes(jobs):
        if fail_in == "stacked-round" and jobs[0].training_round == 2:
            raise RuntimeError("stacked round failed")
        return [[job.training_round] for job in jobs], True

    monkeypatch.setattr(batched, "train_federations_as_lanes", lanes)
    rounds = []

    def on_round():
        rounds.append(1)
        if fail_in == "on-round" and len(rounds) == 2:
            raise RuntimeError("progress failed")

    lockstep = Lockstep(3, on_round=on_round)

    def job(k):
        def run(make_trainer):
            for r in range(1, 4):
                lockstep.train(k, batched.LaneJob(None, {}, (), r))
                if fail_in == "after-training" and k == 2 and r == 2:
                    raise RuntimeError("shadow 2 failed")
            return k
        return run

    outcome = {}

    def call():
        try:
            outcome["value"] = lockstep.run([job(k) for k in range(3)])
        except RuntimeError as exc:
            outcome["error"] = str(exc)

    runner = threading.Thread(target=call, daemon=True)
    runner.start()
    runner.join(timeout=600)  # a hang guard (generous under load)
    assert not runner.is_alive(), "the lockstep hung"
    assert outcome.get("error") in ("stacked round failed", "progress failed", "shadow 2 failed")


def test_the_stacked_form_is_built_once_for_shadows_of_one_architecture(monkeypatch):
    """Building the stacked form (an fx trace and a lane-by-lane check) once per shadow cost more than the lockstep
    saved for small models; shadows of one recipe share one architecture, so the lockstep builds it once."""
    import attacks.membership.batched_shadows as lockstep_module

    built = []
    original = lockstep_module.build_stacked_model

    def counting(model, input_shape):
        built.append(type(model).__name__)
        return original(model, input_shape)

    monkeypatch.setattr(lockstep_module, "build_stacked_model", counting)
    dataset, spec = overfit_dataset(clients=3, n=10), overfit_spec(rounds=2, model="upcycled-mlp")
    lanes, meta = _shadow_phi(dataset, spec, shadows=5, batch=True)
    assert meta["shadow_training"].startswith("batched across shadow federations")
    assert len(built) == 1
    assert np.unique(lanes.phi.round(6), axis=0).shape[0] == 5  # still five different shadow models


def test_a_baton_pass_wakes_only_the_thread_whose_turn_it_is():
    """Each hand-in wakes one thread, not all of them (count² wake-ups per round made large locksteps slow)."""
    import attacks.membership.batched_shadows as lockstep_module

    count, rounds = 6, 3
    lockstep = Lockstep(count)
    wakes = [0] * count

    class CountingCondition(threading.Condition):
        def __init__(self, lock, lane):
            super().__init__(lock)
            self.lane = lane

        def notify(self, n=1):
            wakes[self.lane] += 1
            super().notify(n)

    lockstep._conds = [CountingCondition(lockstep._lock, k) for k in range(count)]
    original = lockstep_module.train_federations_as_lanes
    try:
        lockstep_module.train_federations_as_lanes = lambda jobs: ([[] for _ in jobs], False)

        def job(lane):
            for _ in range(rounds):
                lockstep.train(lane, None)
            return lane

        assert lockstep.run([lambda make, k=k: job(k) for k in range(count)]) == list(range(count))
    finally:
        lockstep_module.train_federations_as_lanes = original
    assert lockstep.rounds == rounds
    assert sum(wakes) <= (count + 1) * (rounds + 1)  # about one wake-up per hand-in, not count per hand-in
