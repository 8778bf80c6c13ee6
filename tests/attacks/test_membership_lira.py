"""LiRA: the Gaussian statistics on synthetic shadows, the shadow design, the executor path, resumption, and
LiRA beating the LOSS attack on a tiny overfitting federation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attacks.membership import (
    LiRAAttack,
    LiRAConfig,
    ShadowStatistics,
    TargetModel,
    lira_offline,
    lira_online,
    run_membership_attack,
)
from attacks.membership.examples import dataset_pool, examples_from_dataset
from attacks.membership.shadows import shadow_homes, shadow_membership
from attacks.metrics import roc_auc, tpr_at_fpr
from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.compose import run_spec_on_dataset
from tests.attacks.membership_setup import overfit_dataset, overfit_spec


def _synthetic_shadows(rng, examples=400, shadows=16, gap=1.0):
    """φ_s(x) = difficulty(x) + gap·IN + N(0, 0.3²): per-example offsets that only LiRA can calibrate."""
    difficulty = rng.normal(0.0, 3.0, examples)
    keep = np.zeros((shadows, examples), dtype=bool)
    for s in range(0, shadows, 2):
        half = rng.random(examples) < 0.5
        keep[s], keep[s + 1] = half, ~half
    phi = difficulty + gap * keep + rng.normal(0.0, 0.3, keep.shape)
    member = rng.random(examples) < 0.5
    target = difficulty + gap * member + rng.normal(0.0, 0.3, examples)
    return ShadowStatistics(phi, keep), target, member, difficulty


@pytest.mark.parametrize("variance", ["fixed", "per-example"])
def test_lira_calibrates_per_example_difficulty(variance):
    stats, target, member, _ = _synthetic_shadows(np.random.default_rng(0))
    online = lira_online(target, stats, variance)
    offline = lira_offline(target, stats, variance)
    raw_auc = roc_auc(target[member], target[~member])  # thresholding φ itself: difficulty swamps the signal
    for scores in (online, offline):
        assert roc_auc(scores[member], scores[~member]) > raw_auc + 0.2
    # the ideal test of N(gap, 0.3²) vs N(0, 0.3²) has AUC Φ(gap/(0.3·√2)) = 0.9909
    assert roc_auc(online[member], online[~member]) == pytest.approx(0.99, abs=0.02)


def test_lira_needs_observations_on_both_sides():
    rng = np.random.default_rng(1)
    keep = np.zeros((2, 5), dtype=bool)
    keep[0] = True
    stats = ShadowStatistics(rng.normal(size=(2, 5)), keep)
    with pytest.raises(InvalidParameterError, match="at least 2 IN shadow"):
        lira_online(np.zeros(5), stats, "per-example")
    with pytest.raises(InvalidParameterError, match="unknown LiRA variance"):
        lira_online(np.zeros(5), stats, "robust")


def test_shadow_design_is_balanced_and_keeps_every_client_busy():
    dataset = overfit_dataset(clients=3, n=5)
    pool = dataset_pool(dataset)
    homes = shadow_homes(pool, dataset.num_clients, seed=2)
    keep = shadow_membership(homes, 6, seed=2)
    assert keep.shape == (6, len(pool))
    assert np.all(keep.sum(axis=0) == 3)  # every record IN for exactly half of the shadows
    assert np.all(keep[0] == ~keep[1]) and not np.array_equal(keep[0], keep[2])
    for s in range(6):
        for k in range(3):
            rows = homes == k
            assert 4 <= keep[s, rows].sum() <= 6  # a half of the client's 10 records
    np.testing.assert_array_equal(keep, shadow_membership(homes, 6, seed=2))


@pytest.fixture(scope="module")
def overfitted_target():
    dataset = overfit_dataset(seed=1)
    spec = overfit_spec()
    return TargetModel.from_result(run_spec_on_dataset(spec, dataset), dataset, spec)


def _loss_and_lira(seed: int, shadows: int):
    dataset = overfit_dataset(seed=seed)
    spec = overfit_spec()
    target = TargetModel.from_result(run_spec_on_dataset(spec, dataset), dataset, spec)
    return run_membership_attack(target, "loss"), run_membership_attack(target, "lira", options={"shadows": shadows, "seed": seed})


def test_lira_online_beats_loss_on_an_overfitting_federation():
    loss, lira = _loss_and_lira(seed=0, shadows=16)
    assert lira.meta["variance_used"] == "fixed" and lira.meta["mode"] == "online"
    assert lira.summary()["auc"] > loss.summary()["auc"]


@pytest.mark.slow
def test_lira_online_beats_loss_across_seeds():
    gains, tpr_gains = [], []
    for seed in range(4):
        loss, lira = _loss_and_lira(seed=seed, shadows=16)
        gains.append(lira.summary()["auc"] - loss.summary()["auc"])
        tpr_gains.append(tpr_at_fpr(*lira.as_pair(), 0.05) - tpr_at_fpr(*loss.as_pair(), 0.05))
    assert min(gains) > 0 and np.mean(gains) > 0.04
    assert np.mean(tpr_gains) > 0.05


def test_shadows_resume_from_the_out_dir_and_refuse_another_design(overfitted_target, tmp_path):
    examples = examples_from_dataset(overfitted_target.dataset, max_per_side=20, seed=0)
    attack = LiRAAttack(LiRAConfig(shadows=2, out_dir=str(tmp_path), seed=4))
    first = attack.run(overfitted_target, examples)
    lines = (tmp_path / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all(len(json.loads(line)["result"]["phi"]) == 40 for line in lines)
    second = LiRAAttack(LiRAConfig(shadows=2, out_dir=str(tmp_path), seed=4)).run(overfitted_target, examples)
    assert (tmp_path / "trials.jsonl").read_text().splitlines() == lines  # nothing retrained
    np.testing.assert_array_equal(first.in_scores, second.in_scores)
    with pytest.raises(InvalidParameterError, match="another target or design"):
        LiRAAttack(LiRAConfig(shadows=2, out_dir=str(tmp_path), seed=5)).run(overfitted_target, examples)


def test_a_missing_executor_fails_before_training(overfitted_target):
    examples = examples_from_dataset(overfitted_target.dataset, max_per_side=5)
    with pytest.raises(InvalidParameterError, match="executor"):
        LiRAAttack(LiRAConfig(shadows=2, executor="slurm")).run(overfitted_target, examples)


@pytest.mark.slow
def test_process_pool_gives_the_same_scores_as_in_process(overfitted_target, tmp_path):
    examples = examples_from_dataset(overfitted_target.dataset, max_per_side=15)
    local = LiRAAttack(LiRAConfig(shadows=4, seed=9)).run(overfitted_target, examples)
    pooled = LiRAAttack(LiRAConfig(shadows=4, seed=9, executor="process", workers=2)).run(overfitted_target, examples)
    np.testing.assert_array_equal(local.in_scores, pooled.in_scores)
    np.testing.assert_array_equal(local.out_scores, pooled.out_scores)
