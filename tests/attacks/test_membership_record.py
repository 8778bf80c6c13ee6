"""Record-level attacks on a trained federation: members score higher on an overfitted model, ≈ chance on a
model trained on neither set; the registry; the client-release threat model."""

from __future__ import annotations

import numpy as np
import pytest

from attacks.membership import (
    ATTACKS,
    RecordedReleases,
    TargetModel,
    available_attacks,
    build_attack,
    examples_from_dataset,
    run_membership_attack,
)
from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.compose import run_spec_on_dataset
from privaudit.fl.engine.recording import ReleaseRecorder
from tests.attacks.membership_setup import overfit_dataset, overfit_spec

SIGNAL_ATTACKS = ("loss", "confidence", "modified-entropy")


@pytest.fixture(scope="module")
def overfitted():
    dataset = overfit_dataset(seed=0)
    spec = overfit_spec()
    recorder = ReleaseRecorder()
    result = run_spec_on_dataset(spec, dataset, observers=[recorder])
    return TargetModel.from_result(result, dataset, spec), recorder


@pytest.mark.parametrize("attack", SIGNAL_ATTACKS)
def test_members_score_higher_on_an_overfitted_model(overfitted, attack):
    target, _ = overfitted
    scores = run_membership_attack(target, attack)
    assert scores.n_in == scores.n_out == 96
    assert scores.summary()["auc"] > 0.6
    assert scores.meta["attack"] == attack and scores.meta["threat_model"] == "final-model"


@pytest.mark.parametrize("attack", (*SIGNAL_ATTACKS, "entropy"))
def test_chance_on_a_model_trained_on_neither_set(overfitted, attack):
    target, _ = overfitted
    other = overfit_dataset(seed=7)  # same task, other records: the model never saw any of them
    spec = overfit_spec(seed=3)
    stranger = TargetModel.from_result(run_spec_on_dataset(spec, other), target.dataset, spec)
    aucs = [run_membership_attack(stranger, attack).summary()["auc"]]
    untrained = target.with_state(overfitted[1].global_states[0], "initial model")
    aucs.append(run_membership_attack(untrained, attack).summary()["auc"])
    for auc in aucs:  # 96 per side: the AUC's null standard deviation is ≈ 0.042
        assert abs(auc - 0.5) < 0.13


def test_attacks_are_deterministic_and_subsample_per_side(overfitted):
    target, _ = overfitted
    first = run_membership_attack(target, "loss", max_examples=30, seed=5)
    second = run_membership_attack(target, "loss", max_examples=30, seed=5)
    assert first.n_in == first.n_out == 30
    np.testing.assert_array_equal(first.in_scores, second.in_scores)
    other = run_membership_attack(target, "loss", max_examples=30, seed=6)
    assert not np.array_equal(first.in_scores, other.in_scores)


def test_client_release_threat_model(overfitted):
    target, recorder = overfitted
    scores = run_membership_attack(target, "loss", threat_model="client-releases", releases=RecordedReleases(recorder))
    assert scores.meta["clients"] == 4 and scores.n_in == 96
    assert scores.summary()["auc"] > 0.6  # a client's own release memorises its records even more
    with pytest.raises(InvalidParameterError, match="needs the run's releases"):
        run_membership_attack(target, "loss", threat_model="client-releases")
    with pytest.raises(InvalidParameterError, match="final-model threat model only"):
        run_membership_attack(target, "lira", threat_model="client-releases", releases=RecordedReleases(recorder))


def test_registry_lists_and_builds():
    assert set(ATTACKS) == {"loss", "confidence", "entropy", "modified-entropy", "lira"}
    assert all(available_attacks().values())
    assert build_attack("lira", shadows=4).config.shadows == 4
    with pytest.raises(InvalidParameterError, match="unknown membership attack"):
        build_attack("rmia")
    with pytest.raises(InvalidParameterError, match="has no option"):
        build_attack("loss", shadows=3)
    with pytest.raises(InvalidParameterError, match="at least 2 shadow models"):
        build_attack("lira", shadows=1)


def test_examples_split_members_from_held_out_records():
    dataset = overfit_dataset()
    examples = examples_from_dataset(dataset)
    assert examples.n_members == sum(c.num_train for c in dataset.clients)
    assert len(examples) - examples.n_members == sum(c.num_test for c in dataset.clients)
    assert np.array_equal(examples.x[examples.member][:24], dataset.clients[0].x_train)


def test_targets_without_data_or_recipe_say_what_is_missing(overfitted):
    target, _ = overfitted
    bare = TargetModel(target.module, target.state)
    with pytest.raises(InvalidParameterError, match="training data"):
        run_membership_attack(bare, "loss")
    no_recipe = TargetModel(target.module, target.state, "logreg", target.dataset, None)
    with pytest.raises(InvalidParameterError, match="training recipe"):
        run_membership_attack(no_recipe, "lira", options={"shadows": 2})
