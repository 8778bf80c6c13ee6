"""PFA options that reproduce the reference code (Emory-AIMS/PFA@72b3f89): its Lanczos solver with its defects (audit
point F7), its stop when no public client is drawn, and its CNN's Keras initialisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privaudit.errors import InvalidParameterError, NumericalFailure
from privaudit.fl.engine.seeding import seeded_torch_global
from privaudit.models import build_model
from privaudit.papers.pfa.budget_participation import RESAMPLE_TRIES, BudgetedSampler
from privaudit.papers.pfa.model_init import keras_initialise, model_builder
from privaudit.papers.pfa.projection import (
    lanczos_top_eigenvectors,
    public_subspace,
    reference_lanczos_defect,
    reference_lanczos_top_eigenvectors,
)
from privaudit.papers.pfa.settings import NoPublic, PFASettings


def _centred(public: int, p: int = 400, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    stacked = torch.randn(p, public, generator=g, dtype=torch.float64)
    return stacked - stacked.mean(dim=1, keepdim=True)  # rank public − 1


@pytest.mark.parametrize("public", [2, 3])
def test_reference_solver_is_exact_with_rank_plus_two_iterations(public):
    columns = _centred(public)
    rank = public - 1
    defect = reference_lanczos_defect(columns, rank + 2)
    assert defect.rank == rank
    assert defect.ritz_over_true == pytest.approx(1.0, rel=1e-8)
    assert defect.abs_cos == pytest.approx(1.0, abs=1e-8)
    assert defect.norm == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("public", [2, 3])
def test_reference_solver_loses_orthogonality_at_its_default_256_iterations(public):
    """The defect the reference runs with: past breakdown β is rounding noise and the basis is no longer orthonormal;
    privaudit's own Lanczos on the same operator stays exact."""
    columns = _centred(public)
    broken = [reference_lanczos_defect(columns, 256, seed) for seed in range(3)]
    assert all(abs(d.ritz_over_true - 1) > 0.5 or d.abs_cos < 0.9 or abs(d.norm - 1) > 0.1 for d in broken)
    assert max(d.ritz_over_true for d in broken) > 1.5
    values, vectors = lanczos_top_eigenvectors(columns, 1, 256)
    truth = torch.linalg.svd(columns, full_matrices=False)
    assert float(values[0]) == pytest.approx(float(truth.S[0] ** 2), rel=1e-10)
    assert abs(float(vectors[:, 0] @ truth.U[:, 0])) == pytest.approx(1.0, abs=1e-10)


def test_reference_solver_keeps_the_last_row_of_T_and_V_zero_and_takes_top_k_unnormalised():
    columns = _centred(3, p=50)
    values, vectors = reference_lanczos_top_eigenvectors(columns, 2, 5, torch.Generator().manual_seed(1))
    assert vectors.shape == (50, 2) and values.shape == (2,)
    assert float(values[0]) >= float(values[1])
    subspace = public_subspace([c for c in (columns + 1.0).T], [1.0, 1.0, 1.0], 2, "reference", "reference-lanczos",
                               iterations=5)
    assert subspace.dims == 2 and torch.isfinite(subspace.basis).all()


def test_reference_solver_fails_with_a_typed_error_where_the_code_divides_by_zero():
    same = torch.ones(30, 1, dtype=torch.float64)  # a rank-one operator whose start vector's residual can vanish
    with pytest.raises(NumericalFailure, match="β = 0"):
        reference_lanczos_top_eigenvectors(torch.zeros(30, 2, dtype=torch.float64), 1, 8)
    values, _ = reference_lanczos_top_eigenvectors(same, 1, 3)
    assert math.isfinite(float(values[0]))


def test_settings_accept_the_reference_solver_and_the_stop_rule():
    settings = PFASettings.from_options(eigensolver="reference-lanczos", no_public="stop", model_init="keras")
    assert settings.projection.eigensolver.value == "reference-lanczos"
    assert settings.projection.no_public is NoPublic.STOP
    assert settings.to_dict()["model_init"] == "keras"
    with pytest.raises(InvalidParameterError, match="reference-lanczos"):
        PFASettings.from_options(eigensolver="arnoldi")


def _sampler(stop: bool, public_ids: tuple[int, ...] = ()) -> BudgetedSampler:
    def split(ids):
        return tuple(c for c in ids if c in public_ids), tuple(c for c in ids if c not in public_ids)

    return BudgetedSampler(10, 3, None, split, require_public=True, stop_without_public=stop)


def test_no_public_client_stops_training_as_the_reference_does():
    sampler = _sampler(stop=True)
    assert sampler.can_train(1)
    assert sampler.sample(1, np.random.default_rng(0)) == []
    assert sampler.stopped is not None and sampler.stopped.draws_without_public == RESAMPLE_TRIES
    assert "no public client" in sampler.stopped.reason
    assert not sampler.can_train(2)


def test_resample_trains_the_last_draw_and_a_found_public_client_trains_either_way():
    sampler = _sampler(stop=False)
    assert sampler.can_train(1)
    assert len(sampler.sample(1, np.random.default_rng(0))) == 3
    assert sampler.stopped is None and sampler.rounds[-1].resamples == RESAMPLE_TRIES
    found = _sampler(stop=True, public_ids=(4,))
    assert found.can_train(1)
    chosen = found.sample(1, np.random.default_rng(0))
    assert 4 in chosen and found.stopped is None


def test_keras_initialisation_of_the_reference_cnn():
    model = seeded_torch_global(0, lambda: keras_initialise(build_model("pfa-cnn", (1, 28, 28), 10)))
    layers = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)]
    assert len(layers) == 4
    for layer in layers:
        weight = layer.weight.detach()
        assert torch.count_nonzero(layer.bias.detach()) == 0
        fan_in = weight[0].numel()
        fan_out = weight.shape[0] * (weight[0, 0].numel() if weight.dim() == 4 else 1)
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        assert float(weight.abs().max()) <= limit
        assert float(weight.abs().max()) > 0.9 * limit  # uniform over the whole range
    assert model_builder("pfa-cnn", "torch") == "pfa-cnn"
    assert callable(model_builder("pfa-cnn", "keras"))
    with pytest.raises(InvalidParameterError, match="pfa-cnn"):
        model_builder("pfa-lr", "keras")


def test_exact_local_steps_run_tau_dp_sgd_steps_per_round():
    """``local_step_rule="exact"``: τ DP-SGD steps per round (the reference's ``local_update`` loop), not whole epochs."""
    from privaudit.papers.pfa.budget_calibration import local_schedule
    from privaudit.papers.pfa.experiment import PFAConfig, realised_steps, train_pfa

    assert local_schedule(450, 8, 20) == (8 / 450, 1, 57)  # whole Poisson epochs: ⌈450/8⌉ = 57 steps
    assert local_schedule(450, 8, 20, "exact") == (8 / 450, 1, 20)
    assert local_schedule(450, 8, 100, "exact") == (8 / 450, 2, 100)
    options = {"noise_calibration": "reference", "local_step_rule": "exact"}
    result = train_pfa(PFAConfig(algorithm="weiavg", budgets="reference-mixgauss1", num_clients=10, rounds=2, local_steps=7,
                                 options=options))
    steps = realised_steps(result)
    assert steps and all(s % 7 == 0 and s > 0 for s in steps.values())
    assert result.report["plan"]["local_steps_per_round"] == [7] * 10
    assert {c.steps_per_round for c in result.calibrations} == {7}
