"""Top-k eigenvectors without the p×p matrix (Lanczos, power) against a dense eigh; PFA's two subspace forms."""

from __future__ import annotations

import pytest
import torch

from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.projection import Subspace, public_subspace, top_eigenvectors

torch.set_num_threads(1)


def _projector(vectors: torch.Tensor) -> torch.Tensor:
    return vectors @ vectors.T


def _low_rank(p: int, r: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scales = torch.tensor([10.0, 5.0, 2.0, 1.0, 0.5, 0.25, 0.1][:r], dtype=torch.float64)
    return torch.randn(p, r, generator=g, dtype=torch.float64) * scales


@pytest.mark.parametrize("solver", ["lanczos", "power"])
@pytest.mark.parametrize(("p", "r", "k"), [(40, 5, 1), (120, 5, 3), (300, 7, 7), (64, 3, 5)])
def test_iterative_solvers_match_dense_eigh(solver, p, r, k):
    columns = _low_rank(p, r, seed=p + r + k)
    values, vectors = top_eigenvectors(columns, k, solver, iterations=500, seed=1)
    dense_values, dense_vectors = top_eigenvectors(columns, k, "dense")
    assert vectors.shape == dense_vectors.shape == (p, min(k, r))  # zero eigenvalues (k > rank) are dropped
    assert torch.allclose(values, dense_values, rtol=1e-8, atol=1e-10)
    assert torch.allclose(_projector(vectors), _projector(dense_vectors), atol=1e-7)
    assert torch.allclose(vectors.T @ vectors, torch.eye(vectors.shape[1], dtype=torch.float64), atol=1e-10)


def test_lanczos_never_forms_the_p_by_p_matrix():
    # p = 2,000,000: the dense matrix would need 32 TB; Lanczos on A Aᵀ needs a few vectors of length p
    columns = _low_rank(2_000_000, 3, seed=0)
    values, vectors = top_eigenvectors(columns, 2, "lanczos", seed=0)
    gram = columns.T @ columns  # the same non-zero spectrum, r × r
    assert torch.allclose(values, torch.linalg.eigvalsh(gram).flip(0)[:2], rtol=1e-8)
    assert vectors.shape == (2_000_000, 2)
    assert torch.allclose(columns @ (columns.T @ vectors), vectors * values, rtol=1e-6, atol=1e-6 * float(values[0]))
    with pytest.raises(InvalidParameterError, match="dense"):
        top_eigenvectors(columns, 1, "dense")


def test_paper_subspace_is_the_normalised_weighted_public_mean():
    g = torch.Generator().manual_seed(0)
    updates = [torch.randn(50, generator=g) for _ in range(3)]
    eps = [10.0, 9.0, 11.0]
    subspace = public_subspace(updates, eps, k=3, form="paper")
    mean = sum(e * u.double() for e, u in zip(eps, updates, strict=True)) / sum(eps)
    assert subspace.dims == 1 and subspace.centre is None  # Σ = Δx̄ Δx̄ᵀ has rank one (audit point F4)
    direction = subspace.basis[:, 0] * torch.sign(subspace.basis[:, 0] @ mean)
    assert torch.allclose(direction, mean / mean.norm(), atol=1e-10)
    x = torch.randn(50, generator=g, dtype=torch.float64)
    assert torch.allclose(subspace.project(x), (x @ direction) * direction, atol=1e-10)


def test_reference_subspace_centres_by_the_unweighted_public_mean():
    g = torch.Generator().manual_seed(1)
    updates = [torch.randn(30, generator=g, dtype=torch.float64) for _ in range(4)]
    subspace = public_subspace(updates, [10.0, 1.0, 1.0, 1.0], k=2, form="reference")
    centre = torch.stack(updates).mean(0)
    assert torch.allclose(subspace.centre, centre)
    deviations = torch.stack([u - centre for u in updates], dim=1)
    _, dense = torch.linalg.eigh(deviations @ deviations.T)
    top2 = dense[:, -2:]
    assert torch.allclose(_projector(subspace.basis), _projector(top2), atol=1e-8)
    x = torch.randn(30, generator=g, dtype=torch.float64)
    assert torch.allclose(subspace.project(x), top2 @ (top2.T @ (x - centre)) + centre, atol=1e-8)
    single = public_subspace(updates[:1], [1.0], k=1, form="reference")
    assert single.centre is None  # one public client: no centring, as the reference code


def test_coefficients_and_reconstruction_are_the_pfa_plus_upload():
    basis = torch.linalg.qr(torch.randn(20, 2, dtype=torch.float64))[0]
    centre = torch.randn(20, dtype=torch.float64)
    subspace = Subspace(basis, torch.ones(2, dtype=torch.float64), centre, 2)
    x = torch.randn(20, dtype=torch.float64)
    coeffs = subspace.coefficients(x)
    assert coeffs.shape == (2,)
    assert torch.allclose(subspace.reconstruct(coeffs), subspace.project(x))
    assert torch.allclose(subspace.project(subspace.project(x)), subspace.project(x))  # a projection


def test_bad_dimensions_and_empty_public_sets():
    with pytest.raises(InvalidParameterError, match="at least 1"):
        top_eigenvectors(torch.ones(5, 1), 0)
    with pytest.raises(InvalidParameterError, match="at least one public update"):
        public_subspace([], [], k=1)
    with pytest.raises(InvalidParameterError, match="unknown eigensolver"):
        top_eigenvectors(torch.ones(5, 1), 1, "svd")
