"""PFA's subspace: top-k eigenvectors of a low-rank p×p matrix, computed without ever forming it.

PFA (004 Alg. 3 lines 2–4, as the paper states) takes V_k = top-k eigenvectors of
Σ = Δx̄^pub (Δx̄^pub)ᵀ, Δx̄^pub the ε-weighted mean of the public updates, and projects the ε-weighted mean of
the private updates: Δx̂^pri = V_k V_kᵀ Δx̄^pri. Σ has rank one, so its only informative eigenvector is
Δx̄^pub/‖Δx̄^pub‖: for k > 1 the remaining eigenvalues are zero and their eigenvectors are arbitrary. Here
eigenvectors whose eigenvalue is below ``rtol``·λ_max are dropped (the *effective* dimension is reported);
the paper's Σ therefore always projects onto one direction (audit point F4).

As the reference code runs it (``projection="reference"``, Emory-AIMS/PFA@72b3f89:modules/server.py; audit point
F4): per tensor, the public updates are
centred by their *unweighted* mean c (no centring with a single public client), V_k are the top-k principal
directions of the deviations u_j − c (Lanczos), and Δx̂^pri = V_k V_kᵀ(Δx̄^pri − c) + c.

Both Σ's are sums of a few outer products, Σ = Σ_j a_j a_jᵀ = A Aᵀ with A of shape p×r (r = 1 for the
paper, the number of public clients for the reference). Every solver here only applies v ↦ A(Aᵀv):

* ``lanczos`` — Lanczos with full reorthogonalisation from a seeded start vector; the Krylov space of a
  rank-r operator has dimension ≤ r + 1, so it ends (breakdown) after at most r + 1 steps or ``iterations``;
* ``power`` — block power (subspace) iteration with QR and a final Rayleigh–Ritz rotation;
* ``dense`` — forms the p×p matrix and calls ``eigh``: O(p²) memory, for tests and the benchmark only;
* ``reference-lanczos`` — the reference code's solver as it behaves (Emory-AIMS/PFA@72b3f89:modules/lanczos.py, called
  by ``modules/server.py``'s ``__eigen_by_lanczos``), defects included, written here from this description of it
  (audit point F7): start from a uniform [0, 1) vector; for j = 1 … m − 2 set V_j = w/β with β = ‖w‖ and *no
  breakdown test*, re-orthogonalise V_j against V_0 … V_{j−2} only (not the previous vector V_{j−1}) and renormalise,
  then store T[j−1, j] = T[j, j−1] = β — the norm from *before* re-orthogonalisation; the last row of T and of V stay
  zero. The top-k eigenvectors y of T give V_k = Vᵀy, neither re-normalised nor checked. Once the Krylov space of
  the rank-r operator is exhausted (j > r) β is rounding noise, V_j amplifies it, and the basis loses orthogonality:
  with m = r + 2 iterations the result is exact, at the code's default m = 256 the top Ritz value, the direction
  and the norm of V_k are far off (measured by :func:`reference_lanczos_defect`). An operator with β = 0 exactly
  (all public updates equal) would make the reference divide by zero; here that is a
  :class:`~privaudit.errors.NumericalFailure`, never NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import torch

from privaudit.errors import InvalidParameterError, NumericalFailure

#: Eigenvalues below RTOL·λ_max are treated as zero (their eigenvectors carry no information).
RTOL = 1e-9
#: ``dense`` refuses matrices with more entries than this (p = 20,000 → 3.2 GB in float64).
DENSE_MAX_ENTRIES = 400_000_000


class ProjectionForm(str, Enum):
    PAPER = "paper"  # Σ = Δx̄^pub Δx̄^pubᵀ, no centring (Alg. 3)
    REFERENCE = "reference"  # centred public updates, mean added back (reference code, audit point F4)

    @classmethod
    def parse(cls, value: str | ProjectionForm) -> ProjectionForm:
        if isinstance(value, ProjectionForm):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown projection {value!r}; use 'paper' or 'reference'")


class EigenSolver(str, Enum):
    LANCZOS = "lanczos"
    POWER = "power"
    DENSE = "dense"
    REFERENCE_LANCZOS = "reference-lanczos"  # the reference code's solver, defects included (audit point F7)

    @classmethod
    def parse(cls, value: str | EigenSolver) -> EigenSolver:
        if isinstance(value, EigenSolver):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown eigensolver {value!r}; use 'lanczos', 'power', 'dense' or 'reference-lanczos'")


@dataclass(frozen=True)
class Subspace:
    """A basis V (p×k), its eigenvalues, and the centre c the projection is taken around. V is orthonormal for every
    solver but ``reference-lanczos``, whose V_k is whatever the reference's solver returns (audit point F7)."""

    basis: torch.Tensor
    eigenvalues: torch.Tensor
    centre: torch.Tensor | None = None
    requested: int = 1

    @property
    def dims(self) -> int:
        return int(self.basis.shape[1])

    def coefficients(self, vector: torch.Tensor) -> torch.Tensor:
        """Vᵀ(x − c): the k numbers a PFA+ private client uploads for this block."""
        x = vector.reshape(-1).to(self.basis.dtype)
        if self.centre is not None:
            x = x - self.centre
        return self.basis.T @ x

    def reconstruct(self, coefficients: torch.Tensor) -> torch.Tensor:
        """V·a + c (the server's reconstruction of uploaded coefficients)."""
        out = self.basis @ coefficients.to(self.basis.dtype)
        return out + self.centre if self.centre is not None else out

    def project(self, vector: torch.Tensor) -> torch.Tensor:
        """V Vᵀ(x − c) + c (a projection only when V is orthonormal)."""
        return self.reconstruct(self.coefficients(vector))


def _matvec(columns: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """(A Aᵀ) V without forming A Aᵀ: A is p×r, V is p×m."""
    return columns @ (columns.T @ vectors)


def _start(p: int, generator: torch.Generator, columns: torch.Tensor, count: int = 1) -> torch.Tensor:
    return torch.randn(p, count, generator=generator, dtype=columns.dtype)


def _keep(values: torch.Tensor, vectors: torch.Tensor, k: int, rtol: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The top-k eigenpairs by eigenvalue, dropping those at or below ``rtol`` × the largest (the rank of the public
    updates' subspace, 004 Alg. 3)."""
    order = torch.argsort(values, descending=True)
    values, vectors = values[order], vectors[:, order]
    top = float(values[0]) if values.numel() else 0.0
    keep = (values > rtol * top) & (values > 0) if top > 0 else torch.zeros_like(values, dtype=torch.bool)
    count = min(k, int(keep.sum()))
    return values[:count], vectors[:, :count]


def lanczos_top_eigenvectors(columns: torch.Tensor, k: int, iterations: int = 256, rtol: float = RTOL,
                             generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k eigenpairs of A Aᵀ by Lanczos with full reorthogonalisation (A = ``columns``, p×r, float64)."""
    p = columns.shape[0]
    generator = generator or torch.Generator().manual_seed(0)
    steps = max(1, min(int(iterations), p))
    q = _start(p, generator, columns)[:, 0]
    q = q / torch.linalg.vector_norm(q)
    basis = [q]
    alphas: list[float] = []
    betas: list[float] = []
    scale = float(torch.linalg.matrix_norm(columns) ** 2) or 1.0
    for j in range(steps):
        w = _matvec(columns, basis[j][:, None])[:, 0]
        alpha = float(basis[j] @ w)
        alphas.append(alpha)
        stacked = torch.stack(basis, dim=1)
        for _ in range(2):  # full reorthogonalisation, twice ("twice is enough")
            w = w - stacked @ (stacked.T @ w)
        beta = float(torch.linalg.vector_norm(w))
        if j == steps - 1 or beta <= 1e-12 * scale:
            break
        betas.append(beta)
        basis.append(w / beta)
    m = len(alphas)
    tridiagonal = torch.diag(torch.tensor(alphas, dtype=columns.dtype))
    if m > 1:
        off = torch.tensor(betas[: m - 1], dtype=columns.dtype)
        tridiagonal += torch.diag(off, 1) + torch.diag(off, -1)
    values, small = torch.linalg.eigh(tridiagonal)
    vectors = torch.stack(basis[:m], dim=1) @ small
    return _keep(values, vectors, k, rtol)


def power_top_eigenvectors(columns: torch.Tensor, k: int, iterations: int = 256, tol: float = 1e-10, rtol: float = RTOL,
                           generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k eigenpairs of A Aᵀ by block power iteration (QR each step, Rayleigh–Ritz at the end)."""
    p, r = columns.shape
    generator = generator or torch.Generator().manual_seed(0)
    width = max(1, min(k, p, r))  # A Aᵀ has rank ≤ r: more directions than that are zero-eigenvalue noise
    q, _ = torch.linalg.qr(_start(p, generator, columns, width))
    for _ in range(max(1, int(iterations))):
        z, _ = torch.linalg.qr(_matvec(columns, q))
        change = torch.linalg.matrix_norm(z - q @ (q.T @ z))
        q = z
        if float(change) <= tol:
            break
    small = q.T @ _matvec(columns, q)
    values, rotation = torch.linalg.eigh(0.5 * (small + small.T))
    return _keep(values, q @ rotation, k, rtol)


def dense_top_eigenvectors(columns: torch.Tensor, k: int, rtol: float = RTOL) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k eigenpairs by forming the p×p matrix A Aᵀ and calling ``eigh`` (reference; O(p²) memory)."""
    p = columns.shape[0]
    if p * p > DENSE_MAX_ENTRIES:
        raise InvalidParameterError(f"a dense {p}×{p} eigendecomposition would need {p * p * 8 / 1e9:.1f} GB; use lanczos or power")
    values, vectors = torch.linalg.eigh(columns @ columns.T)
    return _keep(values, vectors, k, rtol)


def reference_lanczos_top_eigenvectors(columns: torch.Tensor, k: int, iterations: int = 256,
                                       generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(top-k eigenvalues of T, V_k = Vᵀy) as the reference code's Lanczos computes them, defects included (module
    docstring, ``reference-lanczos``; audit point F7). ``columns`` is A (p×r, float64), the operator A Aᵀ. The columns of
    V_k are not unit vectors in general, and their eigenvalues are Ritz values of a T that is not V's projection."""
    p = columns.shape[0]
    m = max(1, int(iterations))
    generator = generator or torch.Generator().manual_seed(0)
    basis = torch.zeros(m, p, dtype=columns.dtype)
    tridiagonal = torch.zeros(m, m, dtype=columns.dtype)
    start = torch.rand(p, generator=generator, dtype=columns.dtype)
    basis[0] = start / torch.linalg.vector_norm(start)
    w = _matvec(columns, basis[0][:, None])[:, 0]
    alpha = w @ basis[0]
    w = w - alpha * basis[0]
    tridiagonal[0, 0] = alpha
    for j in range(1, m - 1):
        beta = torch.linalg.vector_norm(w)
        if not float(beta) > 0:
            raise NumericalFailure("the reference Lanczos solver divides by β = 0 (the public updates span nothing new); "
                                   "the reference code would produce NaN here")
        vector = w / beta
        for i in range(j - 1):  # every earlier vector but the previous one
            vector = vector - (vector @ basis[i]) * basis[i]
        vector = vector / torch.linalg.vector_norm(vector)
        basis[j] = vector
        w = _matvec(columns, vector[:, None])[:, 0]
        alpha = w @ vector
        w = w - alpha * vector - beta * basis[j - 1]
        tridiagonal[j, j] = alpha
        tridiagonal[j - 1, j] = beta  # the norm before re-orthogonalisation
        tridiagonal[j, j - 1] = beta
    values, small = torch.linalg.eigh(tridiagonal)
    order = torch.argsort(values, descending=True)[: int(k)]
    vectors = basis.T @ small[:, order]
    if not bool(torch.isfinite(vectors).all()):
        raise NumericalFailure("the reference Lanczos solver produced a non-finite subspace")
    return values[order], vectors


@dataclass(frozen=True)
class LanczosDefect:
    """How far the reference solver's top direction is from the true one after ``iterations`` steps (audit point F7)."""

    rank: int
    dimension: int
    iterations: int
    ritz_over_true: float  # top Ritz value of the reference's T / the true top eigenvalue of A Aᵀ
    abs_cos: float  # |cos| between the reference's V_k (k = 1) and the true top eigenvector
    norm: float  # ‖V_k‖ (1 for an orthonormal basis)

    def to_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def reference_lanczos_defect(columns: torch.Tensor, iterations: int, seed: int = 0) -> LanczosDefect:
    """The reference solver's top eigenpair of A Aᵀ (A = ``columns``, p×r) against the exact one (an SVD of A)."""
    a = columns.detach().to(torch.float64)
    if a.dim() == 1:
        a = a[:, None]
    values, vectors = reference_lanczos_top_eigenvectors(a, 1, iterations, torch.Generator().manual_seed(int(seed)))
    left, singular, _ = torch.linalg.svd(a, full_matrices=False)
    true_value, true_vector = float(singular[0] ** 2), left[:, 0]
    top = vectors[:, 0]
    norm = float(torch.linalg.vector_norm(top))
    cos = abs(float(top @ true_vector)) / norm if norm > 0 else 0.0
    rank = int(torch.linalg.matrix_rank(a))
    return LanczosDefect(rank, int(a.shape[0]), int(iterations), float(values[0]) / true_value, cos, norm)


def top_eigenvectors(columns: torch.Tensor, k: int, solver: str | EigenSolver = EigenSolver.LANCZOS, *, iterations: int = 256,
                     seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(eigenvalues, eigenvectors p×k') of A Aᵀ, k' ≤ k the number of non-zero eigenvalues among the top k."""
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise InvalidParameterError(f"projection dimension k must be at least 1, got {k!r}")
    solver = EigenSolver.parse(solver)
    a = columns.detach().to(torch.float64)
    if a.dim() == 1:
        a = a[:, None]
    generator = torch.Generator().manual_seed(int(seed))
    if solver is EigenSolver.LANCZOS:
        return lanczos_top_eigenvectors(a, int(k), iterations, generator=generator)
    if solver is EigenSolver.POWER:
        return power_top_eigenvectors(a, int(k), iterations, generator=generator)
    if solver is EigenSolver.REFERENCE_LANCZOS:
        return reference_lanczos_top_eigenvectors(a, int(k), iterations, generator=generator)
    return dense_top_eigenvectors(a, int(k))


def public_subspace(
    public_updates: Sequence[torch.Tensor],
    public_weights: Sequence[float],
    k: int,
    form: str | ProjectionForm = ProjectionForm.PAPER,
    solver: str | EigenSolver = EigenSolver.LANCZOS,
    *,
    iterations: int = 256,
    seed: int = 0,
) -> Subspace:
    """The subspace one block of the public updates defines (flattened vectors of one length p).

    ``public_weights`` are W(ε_m) = ε_m/Σ_pub ε (the paper's Δx̄^pub); the reference form ignores them for the
    centre (it centres by the unweighted mean) and uses the deviations as the columns of A.
    """
    form = ProjectionForm.parse(form)
    if not public_updates:
        raise InvalidParameterError("a projection subspace needs at least one public update")
    stacked = torch.stack([u.reshape(-1).to(torch.float64) for u in public_updates], dim=1)  # p × n_pub
    if form is ProjectionForm.PAPER:
        weights = torch.tensor([float(w) for w in public_weights], dtype=torch.float64)
        columns = stacked @ (weights / weights.sum())
        centre = None
    else:
        if stacked.shape[1] > 1:
            centre = stacked.mean(dim=1)
            columns = stacked - centre[:, None]
        else:
            centre, columns = None, stacked
    values, vectors = top_eigenvectors(columns, k, solver, iterations=iterations, seed=seed)
    return Subspace(vectors, values, centre, int(k))
