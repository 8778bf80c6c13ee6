"""Canary insertion on the engine side: input canaries in the data exactly as recorded, gradient canaries
added before the privatizer in the chosen rounds, canary clients as extra clients with fixed updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.clients import (
    CLIP_SCALE,
    CanaryClientInsertion,
    add_canary_clients,
    make_canary_clients,
)
from privaudit.fl.canaries.compose import run_spec_on_dataset, with_canaries
from privaudit.fl.canaries.directions import dirac_directions, random_unit_directions
from privaudit.fl.canaries.gradients import GradientCanaries, GradientCanaryInsertion, make_gradient_canaries
from privaudit.fl.canaries.inputs import InputCanaries, insert_input_canaries, make_input_canaries
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.params import flatten, global_norm
from privaudit.fl.engine.recording import ReleaseRecorder
from privaudit.fl.run import TrainSpec
from tests.fl.conftest import make_dataset

DIMENSION = 5 * 3 + 3  # logreg on make_dataset(): W (3×5) and b (3)


def _spec(**overrides) -> TrainSpec:
    values = {"algorithm": "fedavg", "dataset": "tiny", "rounds": 3, "model": "logreg",
              "local": LocalTrainingConfig(epochs=2, batch_size=8, lr=0.1), "seed": 4}
    values.update(overrides)
    return TrainSpec(**values)


def _run(spec, dataset, wrappers=()):
    recorder = ReleaseRecorder()
    result = run_spec_on_dataset(spec, dataset, algorithm=with_canaries(spec, wrappers), observers=[recorder])
    return result, recorder


# -- directions ------------------------------------------------------------------------------------
def test_directions_are_unit_vectors():
    rng = np.random.default_rng(0)
    random = random_unit_directions(50, 40, rng)
    np.testing.assert_allclose(np.linalg.norm(random, axis=1), 1.0, rtol=1e-12)
    dirac = dirac_directions(6, 10, rng)
    assert np.all(dirac.sum(axis=1) == 1) and len(set(np.argmax(dirac, axis=1))) == 6
    with pytest.raises(InvalidParameterError, match="distinct coordinates"):
        dirac_directions(11, 10, rng)


# -- input canaries --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mislabelled", "ood"])
def test_input_canaries_are_inserted_exactly_as_recorded(kind):
    dataset = make_dataset(test_size=20)
    canaries = make_input_canaries(dataset, 40, kind=kind, seed=3)
    grown = insert_input_canaries(dataset, canaries)
    for k, (before, after) in enumerate(zip(dataset.clients, grown.clients, strict=True)):
        mine = np.flatnonzero((canaries.clients == k) & canaries.inserted)
        assert after.num_train == before.num_train + mine.size
        np.testing.assert_array_equal(after.x_train[: before.num_train], before.x_train)
        np.testing.assert_array_equal(after.x_train[before.num_train :], canaries.x[mine])
        np.testing.assert_array_equal(after.y_train[before.num_train :], canaries.y[mine])
        np.testing.assert_array_equal(after.x_test, before.x_test)
    assert grown.metadata["input_canaries"]["inserted"] == int(canaries.inserted.sum())
    assert sum(c.num_train for c in grown.clients) - sum(c.num_train for c in dataset.clients) == canaries.inserted.sum()
    if kind == "mislabelled":  # natural test records with a wrong label
        rows = [np.flatnonzero((dataset.test[0] == x).all(axis=1))[0] for x in canaries.x]
        assert np.all(dataset.test[1][rows] != canaries.y)
    else:
        norms = np.linalg.norm(canaries.x, axis=1)
        np.testing.assert_allclose(norms, norms[0], rtol=1e-5)
    assert InputCanaries.from_dict(canaries.to_dict()).inserted.tolist() == canaries.inserted.tolist()


def test_input_canary_bits_are_fair_coins_and_seeded():
    dataset = make_dataset(test_size=400)
    canaries = make_input_canaries(dataset, 2000, kind="mislabelled", seed=1)
    assert abs(canaries.inserted.mean() - 0.5) < 4 * 0.5 / np.sqrt(2000)
    again = make_input_canaries(dataset, 2000, kind="mislabelled", seed=1)
    np.testing.assert_array_equal(canaries.inserted, again.inserted)
    one_client = make_input_canaries(dataset, 10, kind="ood", clients=2, seed=1)
    assert set(one_client.clients.tolist()) == {2}
    with pytest.raises(InvalidParameterError, match="pooled test records"):
        make_input_canaries(make_dataset(test_size=2), 100)


# -- gradient canaries -----------------------------------------------------------------------------
def test_gradient_canaries_enter_the_chosen_client_and_rounds_before_the_privatizer():
    dataset = make_dataset()
    canaries = make_gradient_canaries(DIMENSION, 4, magnitude=0.7, client=1, rounds=[1, 3], seed=2)
    _, clean = _run(_spec(), dataset)
    result, recorded = _run(_spec(), dataset, [lambda a: GradientCanaryInsertion(a, canaries)])
    shift = flatten(recorded.client_states[1][1]) - flatten(clean.client_states[1][1])
    expected = canaries.vector(1) if canaries.vector(1) is not None else np.zeros(DIMENSION)
    np.testing.assert_allclose(shift.double().numpy(), expected, atol=1e-6)
    for other in (0, 2, 3, 4, 5):  # round 1 starts from the same model: other clients are untouched
        assert torch.equal(flatten(recorded.client_states[1][other]), flatten(clean.client_states[1][other]))
    assert canaries.row(2) is None and canaries.vector(2) is None
    assert canaries.inserted.shape == (2, 4)
    assert result.info.algorithm["name"] == "gradient-canaries-fedavg"
    copy = GradientCanaries.from_dict(canaries.to_dict())
    np.testing.assert_array_equal(copy.directions, canaries.directions)


def test_gradient_canaries_are_clipped_and_noised_like_the_update():
    dataset = make_dataset()
    spec = _spec(privacy="output-perturbation", privacy_options={"clip": 0.5, "noise": 1e-4})
    canaries = make_gradient_canaries(DIMENSION, 2, magnitude=50.0, client=0, rounds=[1], membership="per-canary", seed=0)
    canaries = GradientCanaries(canaries.directions, 50.0, 0, (1,), np.ones((1, 2), dtype=bool), "random", "per-canary", 0)
    result, recorded = _run(spec, dataset, [lambda a: GradientCanaryInsertion(a, canaries)])
    release = recorded.client_states[1][0]
    assert global_norm(release) == pytest.approx(0.5, rel=2e-3)  # the huge canary was clipped with the model
    assert sum(1 for e in result.ledger.events if e.client_id == "0") == spec.rounds  # one event per round, as before


def test_gradient_canary_design_errors():
    with pytest.raises(InvalidParameterError, match="membership design"):
        make_gradient_canaries(10, 2, magnitude=1, client=0, rounds=[1], membership="per-client")
    with pytest.raises(InvalidParameterError, match="training rounds"):
        make_gradient_canaries(10, 2, magnitude=1, client=0, rounds=[0])
    canaries = make_gradient_canaries(7, 2, magnitude=1, client=0, rounds=[1])
    with pytest.raises(InvalidParameterError, match="dimension"):
        _run(_spec(), make_dataset(), [lambda a: GradientCanaryInsertion(a, canaries)])


# -- canary clients --------------------------------------------------------------------------------
def test_canary_clients_join_the_federation_with_their_fixed_update():
    dataset = make_dataset()
    canaries = make_canary_clients(DIMENSION, 6, seed=2, update_norm=2.0, weight=30)
    grown, placed = add_canary_clients(dataset, canaries)
    inserted = int(canaries.inserted.sum())
    assert inserted == 4
    assert grown.num_clients == dataset.num_clients + inserted and placed.client_ids == tuple(range(6, 6 + inserted))
    result, recorded = _run(_spec(rounds=2), grown, [lambda a: CanaryClientInsertion(a, placed)])
    start = flatten(recorded.global_states[0]).double().numpy()
    for client, canary in placed.canary_of_client().items():
        released = flatten(recorded.client_states[1][client]).double().numpy()
        np.testing.assert_allclose(released - start, 2.0 * canaries.directions[canary], atol=1e-5)
    # aggregation weighs a canary as 30 examples
    real = [recorded.client_states[1][k] for k in range(6)]
    weights = [*dataset.client_sizes.tolist(), *([30] * inserted)]
    states = real + [recorded.client_states[1][c] for c in placed.client_ids]
    expected = sum(w * flatten(s).double() for w, s in zip(weights, states, strict=True)) / sum(weights)
    np.testing.assert_allclose(flatten(recorded.global_states[1]).double().numpy(), expected.numpy(), atol=1e-5)
    assert result.history[-1].per_client_accuracy[-1] is None  # placeholders have no test data


def test_canary_clients_take_the_clip_norm_of_the_privatizer():
    dataset = make_dataset()
    canaries = make_canary_clients(DIMENSION, 4, seed=0)
    grown, placed = add_canary_clients(dataset, canaries)
    assert len(placed.client_ids) == 3
    spec = _spec(rounds=1, privacy="output-perturbation", privacy_options={"clip": 3.0, "noise": 1e-6})
    result, recorded = _run(spec, grown, [lambda a: CanaryClientInsertion(a, placed)])
    for client, canary in placed.canary_of_client().items():
        released = flatten(recorded.client_states[1][client]).double().numpy()
        np.testing.assert_allclose(released, 3.0 * canaries.directions[canary], atol=1e-3)  # exactly the clip norm
    wrapper = result.info.algorithm
    assert wrapper["hyperparameters"]["update_norm"] == CLIP_SCALE * 3.0
    assert {e.client_id for e in result.ledger.events} >= {str(c) for c in placed.client_ids}
    with pytest.raises(InvalidParameterError, match="update_norm"):
        _run(_spec(rounds=1), grown, [lambda a: CanaryClientInsertion(a, placed)])
    with pytest.raises(InvalidParameterError, match="add the canary clients"):
        CanaryClientInsertion(None, canaries)  # ids are assigned by add_canary_clients
