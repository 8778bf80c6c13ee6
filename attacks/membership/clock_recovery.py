"""Recovering output-perturbation noise seeded from the clock (Upcycled-FL reference code; audit point U5).

The reference code seeds its noise with ``torch.manual_seed(int(frac(time.time())·1000))`` and then draws
``torch.normal(0, std)`` for every state-dict key in order, so a release Y = ξ(ω) + n has n ∈ {n_0, …, n_999}.
Given Y, the auditor regenerates the 1000 candidate noises exactly as the engine's ``rng="clock-ms"``
privatizer draws them (:func:`privaudit.fl.privacy.noise.gaussian_noise` with a generator seeded k, key by key in the
model's order — the same numbers as the reference code's global-RNG draws) and tests each implied clipped
model ξ_k = Y − n_k:

1. ``exact-clip-norm``: ‖ξ_k‖ = τ within ``rtol`` — the true candidate when clipping bound;
2. ``within-clip-norm``: ‖ξ_k‖ ≤ τ(1 + rtol) — any clipped model lies in the τ-ball, while a wrong
   candidate ξ + n − n_k has squared norm ≈ ‖ξ‖² + 2s²d;
3. ``nearest-reference``: among several survivors, the one closest to a reference model (the global model
   the client started from: a wrong candidate is ≈ 2s²d farther away in squared distance).

Runs trained with ``--noise-rng clock-ms`` draw each client's seed from privaudit's simulated clock
(:mod:`privaudit.fl.privacy.clock_seed`: one independent millisecond per client, as the reference's clients read the
clock ~35 ms apart) and their noise exactly as above, so the search recovers those seeds; in the reference (and the
emulation) a recovered seed also fixes the next client's straggler draw and mini-batch order.

Consequence: given ξ(ω), the release takes at most 1000 values; for neighbouring inputs with
ξ(ω) ≠ ξ(ω') the two output distributions have disjoint supports (outside a null set), so no finite ε bounds
the privacy loss — ε = ∞ — and the recovered ξ(ω) is the client's clipped model to float precision.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.params import State, flatten, unflatten
from privaudit.fl.privacy import noise

from .releases import releases_of, select_rounds

SEEDS = 1000
CONSEQUENCE = (
    "the noise is one of at most 1000 clock-seeded draws, so given the clipped model the release takes at most 1000 "
    "values; neighbouring inputs with different clipped models have disjoint output supports: ε = ∞ (not DP)"
)


def clock_noise(like: State, std: float, seed: int) -> State:
    """The noise the engine's clock-ms privatizer draws for clock seed ``seed`` (model key order)."""
    return noise.gaussian_noise(like, std, torch.Generator().manual_seed(int(seed)))


@dataclass(frozen=True, eq=False)
class SeedRecovery:
    """What the search found for one release."""

    seed: int | None
    method: str  # exact-clip-norm | within-clip-norm | nearest-reference | ambiguous | none
    candidates: int  # seeds that passed the deciding criterion
    recovered: State | None
    norm: float | None
    margin: float | None = None  # nearest-reference only: (2nd − 1st squared distance) / (2s²d)
    error: float | None = None  # max |recovered − truth| when the truth was given

    def to_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "method": self.method, "candidates": self.candidates, "norm": self.norm,
                "margin": self.margin, "error": self.error}


@dataclass(frozen=True, eq=False)
class ClockRecoveryReport:
    recoveries: tuple[SeedRecovery, ...]
    seconds: float
    shared_seeds: dict[int, list[int]] = field(default_factory=dict)  # seed → indices of releases that used it
    labels: tuple[Any, ...] = ()
    consequence: str = CONSEQUENCE

    @property
    def recovered_fraction(self) -> float:
        return sum(r.seed is not None for r in self.recoveries) / max(1, len(self.recoveries))

    @property
    def max_error(self) -> float | None:
        errors = [r.error for r in self.recoveries if r.error is not None]
        return max(errors) if errors else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "releases": len(self.recoveries), "recovered_fraction": self.recovered_fraction, "seconds": self.seconds,
            "max_error": self.max_error, "epsilon": "inf", "consequence": self.consequence,
            "shared_seeds": {str(k): v for k, v in self.shared_seeds.items()},
            "per_release": [{**r.to_dict(), "label": lab} for r, lab in zip(self.recoveries, self.labels or [None] * len(self.recoveries), strict=True)],
        }


def _decide(norms: np.ndarray, distances: np.ndarray | None, clip: float, rtol: float, gap: float) -> tuple[int | None, str, int, float | None]:
    exact = np.flatnonzero(np.abs(norms / clip - 1.0) <= rtol)
    within = np.flatnonzero(norms <= clip * (1.0 + rtol))
    for pool, method in ((exact, "exact-clip-norm"), (within, "within-clip-norm")):
        if pool.size == 1:
            return int(pool[0]), method, 1, None
        if pool.size > 1:
            if distances is None:
                return None, "ambiguous", int(pool.size), None
            order = pool[np.argsort(distances[pool])]
            margin = float((distances[order[1]] - distances[order[0]]) / gap) if gap > 0 else None
            return int(order[0]), "nearest-reference", int(pool.size), margin
    return None, "none", 0, None


def recover_clock_seeds(
    releases: Sequence[State],
    *,
    clip: float,
    std: float,
    references: Sequence[State | None] | None = None,
    truths: Sequence[State | None] | None = None,
    seeds: Sequence[int] = range(SEEDS),
    rtol: float = 2e-6,
    labels: Sequence[Any] | None = None,
) -> ClockRecoveryReport:
    """Search the clock seeds for every release (see the module docstring); all releases share one key order.

    ``references[i]`` (optional) is release i's starting global model; ``truths[i]`` (optional, for tests and
    demonstrations) its true clipped model, to report the recovery error.
    """
    if not releases:
        raise InvalidParameterError("no releases to search")
    if not clip > 0 or not std > 0:
        raise InvalidParameterError(f"clock recovery needs a positive clip norm and noise std, got τ = {clip}, s = {std}")
    started = time.perf_counter()
    template = releases[0]
    keys = list(template)
    if any(list(r) != keys for r in releases):
        raise InvalidParameterError("every release must have the same keys in the same (model) order")
    observed = torch.stack([flatten(r).double() for r in releases])  # (R, d)
    has_ref = np.zeros(len(releases), dtype=bool)
    ref_matrix = torch.zeros_like(observed)
    if references is not None:
        if len(references) != len(releases):
            raise InvalidParameterError("give one reference (or None) per release")
        for row, ref in enumerate(references):
            if ref is not None:
                ref_matrix[row] = flatten(ref).double()
                has_ref[row] = True
    seeds = [int(s) for s in seeds]
    norms = torch.empty(len(releases), len(seeds), dtype=torch.float64)
    distances = torch.full((len(releases), len(seeds)), float("inf"), dtype=torch.float64)
    for column, seed in enumerate(seeds):
        candidate = observed - flatten(clock_noise(template, std, seed)).double()
        norms[:, column] = candidate.norm(dim=1)
        if has_ref.any():
            distances[:, column] = (candidate - ref_matrix).square().sum(dim=1)
    gap = 2.0 * std * std * observed.shape[1]
    recoveries = []
    for row, release in enumerate(releases):
        index, method, count, margin = _decide(norms[row].numpy(), distances[row].numpy() if has_ref[row] else None, clip, rtol, gap)
        if index is None:
            recoveries.append(SeedRecovery(None, method, count, None, None))
            continue
        seed = seeds[index]
        recovered_vector = flatten(release).double() - flatten(clock_noise(template, std, seed)).double()
        recovered = unflatten(recovered_vector, release)
        error = None
        if truths is not None and truths[row] is not None:
            error = float((recovered_vector - flatten(truths[row]).double()).abs().max())
        recoveries.append(SeedRecovery(seed, method, count, recovered, float(norms[row, index]), margin, error))
    shared: dict[int, list[int]] = {}
    for i, r in enumerate(recoveries):
        if r.seed is not None:
            shared.setdefault(r.seed, []).append(i)
    shared = {seed: rows for seed, rows in shared.items() if len(rows) > 1}
    return ClockRecoveryReport(tuple(recoveries), time.perf_counter() - started, shared, tuple(labels or ()))


def recover_from_releases(source: Any, *, rounds: Sequence[int] | None = None, rtol: float = 2e-6) -> ClockRecoveryReport:
    """Run the search on every client release of a clock-seeded output-perturbation run.

    ``source``: a checkpoint path (trained with ``--save-client-updates``), a ``ReleaseRecorder`` or a
    :class:`~attacks.membership.releases.FederationReleases`. The clip norm and noise std are read from the
    run's privatizer; each release's reference is the global model its round started from.
    """
    view = releases_of(source)
    privacy = view.privacy()
    if not privacy or privacy.get("mechanism") != "output-perturbation":
        raise InvalidParameterError(f"{view.source} was not trained with output perturbation; there is no noise to recover")
    if privacy.get("rng") != "clock-ms":
        raise InvalidParameterError(f"{view.source} drew its noise from seeded streams, not from the clock (noise rng {privacy.get('rng')!r})")
    sigma = float(privacy["sigma"])
    std = sigma if privacy.get("noise_std", "sigma") == "sigma" else sigma**2
    found, references, labels = [], [], []
    for r in select_rounds(view, rounds):
        start = view.global_state(r - 1)
        for cid, state in sorted(view.client_releases(r).items()):
            found.append(state)
            references.append(start)
            labels.append({"round": r, "client": cid})
    if not found:
        raise InvalidParameterError(f"{view.source} holds no client releases in the chosen rounds")
    return recover_clock_seeds(found, clip=float(privacy["clip"]), std=std, references=references, rtol=rtol, labels=labels)
