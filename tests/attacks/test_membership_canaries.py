"""Scoring canaries: input canaries on the final model, per-round gradient-canary observations (mean C in,
0 out, the privatizer's noise std), canary-client cosines against the analytic null N(0, 1/d)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from attacks.membership import (
    TargetModel,
    canary_client_scores,
    gradient_canary_observations,
    null_cosine_cdf,
    null_cosine_pdf,
    null_cosine_sf,
    null_cosine_variance,
    sample_null_cosines,
    score_input_canaries,
    summed_canary_scores,
)
from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.clients import CanaryClientInsertion, add_canary_clients, make_canary_clients
from privaudit.fl.canaries.compose import run_spec_on_dataset, with_canaries
from privaudit.fl.canaries.gradients import GradientCanaryInsertion, make_gradient_canaries
from privaudit.fl.canaries.inputs import insert_input_canaries, make_input_canaries
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.recording import ReleaseRecorder
from privaudit.fl.run import TrainSpec
from tests.attacks.membership_setup import overfit_dataset, overfit_spec
from tests.fl.conftest import make_dataset

DIM, CLASSES = 400, 10
D = DIM * CLASSES + CLASSES  # logreg parameters: 4,010


def _wide_spec(privacy_options, rounds=5, seed=1) -> TrainSpec:
    return TrainSpec(algorithm="fedavg", dataset="tiny", rounds=rounds, model="logreg", seed=seed,
                     local=LocalTrainingConfig(epochs=2, batch_size=10, lr=0.05),
                     privacy="output-perturbation", privacy_options=privacy_options)


def _wide_dataset():
    return make_dataset(sizes=(30, 30, 30, 30), dim=DIM, num_classes=CLASSES, test_size=5)


def _recorded(spec, dataset, wrapper):
    recorder = ReleaseRecorder()
    run_spec_on_dataset(spec, dataset, algorithm=with_canaries(spec, [wrapper]), observers=[recorder])
    return recorder


# -- input canaries --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["mislabelled", "ood"])
def test_inserted_input_canaries_score_higher(kind):
    dataset = overfit_dataset(seed=2)
    canaries = make_input_canaries(dataset, 60, kind=kind, seed=4)
    spec = overfit_spec()
    grown = insert_input_canaries(dataset, canaries)
    target = TargetModel.from_result(run_spec_on_dataset(spec, grown), grown, spec)
    scores = score_input_canaries(target, canaries)
    assert scores.n_in == canaries.inserted.sum() and scores.n_in + scores.n_out == 60
    assert scores.summary()["auc"] > 0.6
    assert scores.meta["canary_kind"] == kind


# -- gradient canaries -----------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["dirac", "random"])
@pytest.mark.parametrize(("convention", "sigma"), [("sigma", 1.0), ("sigma-squared", 1.2)])
def test_gradient_canary_observations_have_mean_c_in_and_the_noise_std(kind, convention, sigma):
    magnitude, rounds = 2.0, 5
    canaries = make_gradient_canaries(D, 40, magnitude=magnitude, client=0, rounds=range(1, rounds + 1), kind=kind, seed=3)
    spec = _wide_spec({"clip": 1e3, "noise": sigma, "noise_std": convention})  # the clip never binds
    recorder = _recorded(spec, _wide_dataset(), lambda a: GradientCanaryInsertion(a, canaries))
    std = sigma if convention == "sigma" else sigma**2

    observations = gradient_canary_observations(recorder, canaries)
    assert observations.rounds == (1, 2, 3, 4, 5) and len(observations.pairs()) == 5
    assert observations.meta["noise_std"] == pytest.approx(std)
    pooled = observations.pooled()
    assert pooled.n_in + pooled.n_out == 200
    se = std / math.sqrt(min(pooled.n_in, pooled.n_out))
    assert pooled.in_scores.mean() == pytest.approx(magnitude, abs=3.5 * se)
    assert pooled.out_scores.mean() == pytest.approx(0.0, abs=3.5 * se)
    for side in pooled.as_pair():  # the privatizer's noise ⟨n, c⟩ ~ N(0, s²) dominates each observation
        assert side.std(ddof=1) == pytest.approx(std, rel=0.3)

    aggregate = gradient_canary_observations(recorder, canaries, view="aggregate").pooled()
    weight = 30 / 120  # the canary client's share of the example-weighted average
    noise = std * math.sqrt(4 * weight**2)  # Σ_i p_i n_i over the four clients
    assert aggregate.in_scores.mean() == pytest.approx(weight * magnitude, abs=4 * noise / math.sqrt(aggregate.n_in))
    assert aggregate.out_scores.std(ddof=1) == pytest.approx(noise, rel=0.3)


def test_per_canary_design_sums_the_rounds():
    canaries = make_gradient_canaries(D, 30, magnitude=2.0, client=1, rounds=[1, 2, 3], kind="dirac", membership="per-canary", seed=5)
    assert np.all(canaries.inserted == canaries.inserted[0])
    recorder = _recorded(_wide_spec({"clip": 1e3, "noise": 1.0}, rounds=3), _wide_dataset(), lambda a: GradientCanaryInsertion(a, canaries))
    summed = summed_canary_scores(gradient_canary_observations(recorder, canaries), canaries)
    assert summed.n_in == canaries.inserted[0].sum()
    assert summed.in_scores.mean() == pytest.approx(3 * 2.0, abs=3.5 * math.sqrt(3) / math.sqrt(summed.n_in))
    assert summed.summary()["auc"] > 0.95


def test_gradient_observations_need_client_releases_and_the_right_dimension():
    canaries = make_gradient_canaries(D, 4, magnitude=1.0, client=0, rounds=[1], seed=0)
    recorder = ReleaseRecorder(client_releases=False)
    spec = _wide_spec({"clip": 1e3, "noise": 1.0}, rounds=1)
    run_spec_on_dataset(spec, _wide_dataset(), algorithm=with_canaries(spec, [lambda a: GradientCanaryInsertion(a, canaries)]),
                        observers=[recorder])
    with pytest.raises(InvalidParameterError, match="without client releases"):
        gradient_canary_observations(recorder, canaries)
    assert gradient_canary_observations(recorder, canaries, view="aggregate").rounds == (1,)
    other = make_gradient_canaries(D - 1, 4, magnitude=1.0, client=0, rounds=[1], seed=0)
    with pytest.raises(InvalidParameterError, match="dimension"):
        gradient_canary_observations(recorder, other, view="aggregate")


# -- canary clients --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def canary_client_run():
    canaries = make_canary_clients(D, 300, seed=6)
    dataset, placed = add_canary_clients(_wide_dataset(), canaries)
    # output perturbation clips the *model*: a canary client releases ≈ τ·c_j + noise, and the aggregate moves
    # toward the weighted mean of the releases, so τ must be large next to the initial model's norm (≈ 0.63)
    spec = _wide_spec({"clip": 10.0, "noise": 0.01}, rounds=3)
    recorder = _recorded(spec, dataset, lambda a: CanaryClientInsertion(a, placed))
    return canaries, recorder


def test_unseen_canary_cosines_follow_the_analytic_null(canary_client_run):
    canaries, recorder = canary_client_run
    scores = canary_client_scores(recorder, canaries)
    unseen = scores.out_scores
    assert unseen.size > 120
    assert stats.kstest(unseen, lambda t: null_cosine_cdf(t, D)).pvalue > 0.01
    assert np.var(unseen) == pytest.approx(1 / D, rel=0.35)  # ≈ N(0, 1/d)
    assert abs(unseen.mean()) < 4 / math.sqrt(D * unseen.size)
    assert scores.summary()["auc"] > 0.98  # inserted canaries stand out in the final model
    assert scores.meta["dimension"] == D and scores.meta["threat_model"] == "final-model"


def test_all_iterates_scores_the_best_round(canary_client_run):
    canaries, recorder = canary_client_run
    final = canary_client_scores(recorder, canaries)
    every = canary_client_scores(recorder, canaries, threat_model="all-iterates")
    assert every.summary()["auc"] > 0.98 and every.meta["threat_model"] == "all-iterates"
    # a max over 3 rounds of null cosines sits above the null centre (E max of 3 iid N(0,1) = 0.85); the final one does not
    assert every.out_scores.mean() > final.out_scores.mean() + 0.5 / math.sqrt(D)
    with pytest.raises(InvalidParameterError, match="threat model"):
        canary_client_scores(recorder, canaries, threat_model="last-round")


def test_analytic_null_density():
    for d in (3, 10, 1000):
        mass, _ = integrate.quad(null_cosine_pdf, -1, 1, args=(d,))
        variance, _ = integrate.quad(lambda t, d: t * t * null_cosine_pdf(t, d), -1, 1, args=(d,))
        assert mass == pytest.approx(1.0, abs=1e-8)
        assert variance == pytest.approx(null_cosine_variance(d), rel=1e-6)
        assert null_cosine_sf(0.0, d) == pytest.approx(0.5)
    draws = sample_null_cosines(200_000, 50, np.random.default_rng(0))
    assert np.var(draws) == pytest.approx(1 / 50, rel=0.02)
    # uniform directions in R^d: cosines with a fixed vector follow the same law
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((4000, 20))
    cosines = vectors[:, 0] / np.linalg.norm(vectors, axis=1)
    assert stats.kstest(cosines, lambda t: null_cosine_cdf(t, 20)).pvalue > 0.01
    with pytest.raises(InvalidParameterError):
        null_cosine_pdf(0.0, 1)
