"""The residual of each aggregate against the clipped mean of the recorded client releases: the noise, if the run did
what it declares.

For a round declared as DP-FedAvg (McMahan, Ramage, Talwar & Zhang 2018, "Learning differentially private recurrent
language models", Alg. 1 with the fixed denominator; :mod:`privaudit.check.declared`)::

    θ_r = θ_(r−1) + (Σ_k clip_C(Δ_k) + ξ_r) / A_r,    Δ_k = w_k − θ_(r−1),   ξ_r ~ N(0, s_r² I)

with w_k the model client k released, clip_C(x) = x·min(1, C/‖x‖₂) over all checked tensors at once, A_r the declared
divisor and s_r the declared noise std on the sum. So e_r = θ_r − θ_(r−1) − Σ_k clip_C(Δ_k)/A_r must be N(0, τ_r² I)
with τ_r = s_r/A_r, independent of everything released before ξ_r was drawn (the clients' updates of round r
included). The standardised residual u_r = e_r/τ_r is what :mod:`privaudit.check.noise` and
:mod:`privaudit.check.randomness` test.

Three specific deviations are predicted from the same releases (each a vector d_r such that, under that deviation,
e_r = d_r + noise): per-tensor clipping at C instead of one global clip (each tensor t clipped to C on its own:
d_r = Σ_k (pclip_C(Δ_k) − clip_C(Δ_k))/A_r), no clipping (d_r = Σ_k (Δ_k − clip_C(Δ_k))/A_r) and the realised instead
of the expected divisor (d_r = Σ_k clip_C(Δ_k)·(1/n_r − 1/A_r), n_r the number of updates that arrived).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from privaudit.check.declared import CentralRelease, ClipSite
from privaudit.check.record import NEEDS_RELEASES, RunRecord, flat

#: The predicted deviations (module docstring), by name.
PER_TENSOR_CLIPPING = "per-tensor clipping"
NO_CLIPPING = "no clipping"
REALISED_DIVISOR = "realised divisor"
DEVIATIONS = (PER_TENSOR_CLIPPING, NO_CLIPPING, REALISED_DIVISOR)


@dataclass(frozen=True, eq=False)
class RoundResidual:
    """One checked round: the standardised residual u_r (float64, checked tensors in model order), τ_r, the divisor,
    the updates that arrived, their norms and the standardised predicted deviations (d_r/τ_r)."""

    round: int
    release: CentralRelease
    standardised: np.ndarray
    tau: float
    divisor: float
    arrived: int
    norms: tuple[float, ...]
    deviations: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Residuals:
    """The checked rounds, the rounds left out and why, and each checked tensor's slice of a flat vector."""

    rounds: tuple[RoundResidual, ...]
    skipped: dict[int, str]
    slices: dict[str, slice]
    reason: str = ""  # why no round could be checked (empty when some could)

    @property
    def dimension(self) -> int:
        return max((s.stop for s in self.slices.values()), default=0)


def _slices(record: RunRecord) -> dict[str, slice]:
    out, offset = {}, 0
    for name in record.names:
        out[name] = slice(offset, offset + record.sizes[name])
        offset += record.sizes[name]
    return out


def _clip(update: np.ndarray, clip: float) -> tuple[np.ndarray, float]:
    norm = float(np.sqrt(np.dot(update, update)))
    return (update * min(1.0, clip / norm) if norm > 0 else update), norm


def _per_tensor_clip(update: np.ndarray, clip: float, slices: dict[str, slice]) -> np.ndarray:
    out = update.copy()
    for part in slices.values():
        norm = float(np.sqrt(np.dot(update[part], update[part])))
        if norm > clip:
            out[part] *= clip / norm
    return out


def compute_residuals(record: RunRecord) -> Residuals:
    """The residual of every round whose declared release and recorded releases allow it (module docstring)."""
    slices = _slices(record)
    central = record.declared.central
    if not central:
        return Residuals((), {}, slices, "the ledger declares no client-level Gaussian release of the model (central DP) "
                                          "whose noise could be separated from the clients' data")
    if not record.releases_recorded:
        return Residuals((), {}, slices, f"needs {NEEDS_RELEASES}")
    out: list[RoundResidual] = []
    skipped: dict[int, str] = {}
    for round_, release in sorted(central.items()):
        problem = _round_problem(record, round_, release)
        if problem:
            skipped[round_] = problem
            continue
        releases = record.releases(round_) or {}
        previous = flat(record.global_model(round_ - 1), record.names)
        current = flat(record.global_model(round_), record.names)
        if not (np.all(np.isfinite(previous)) and np.all(np.isfinite(current))):
            skipped[round_] = "the global model is not finite"
            continue
        updates = [flat(releases[c], record.names) - previous for c in sorted(releases)]
        if not all(np.all(np.isfinite(u)) for u in updates):
            skipped[round_] = "a client release is not finite"
            continue
        clip = float(release.clip)  # type: ignore[arg-type]
        clipped, norms = [], []
        for update in updates:
            c, norm = _clip(update, clip)
            clipped.append(c)
            norms.append(norm)
        total = np.sum(clipped, axis=0) if clipped else np.zeros_like(previous)
        arrived = len(updates)
        divisor = release.aggregate_divisor(arrived)
        tau = float(release.noise_std) / divisor  # type: ignore[arg-type]
        residual = current - previous - total / divisor
        deviations = {}
        if updates and any(n > clip for n in norms):
            if len(slices) > 1:
                pclip = np.sum([_per_tensor_clip(u, clip, slices) for u in updates], axis=0)
                deviations[PER_TENSOR_CLIPPING] = (pclip - total) / divisor / tau
            deviations[NO_CLIPPING] = (np.sum(updates, axis=0) - total) / divisor / tau
        if arrived > 0 and abs(divisor - arrived) > 1e-9 * divisor:
            deviations[REALISED_DIVISOR] = total * (1.0 / arrived - 1.0 / divisor) / tau
        out.append(RoundResidual(round_, release, residual / tau, tau, divisor, arrived, tuple(norms), deviations))
    reason = "" if out else "no round could be checked: " + "; ".join(f"round {r}: {why}" for r, why in sorted(skipped.items())[:3])
    return Residuals(tuple(out), skipped, slices, reason)


def _round_problem(record: RunRecord, round_: int, release: CentralRelease) -> str | None:
    if release.problem:
        return release.problem
    if release.clip is None or release.noise_std is None:
        return "the declaration gives no clip C (pass it: --clip)"
    if not (release.noise_std > 0 and math.isfinite(release.noise_std)):
        return f"the declared noise std {release.noise_std} is not positive"
    if release.divisor == "expected" and release.population <= 0:
        return "the expected number of clients q·N needs the number of clients N, which the run does not record"
    if round_ > record.rounds:
        return f"the ledger has an event in round {round_} but the run recorded {record.rounds} round(s)"
    releases = record.releases(round_) or {}
    sampled = record.sampled(round_)
    if sampled is not None and set(sampled) != set(releases):
        missing = sorted(set(sampled) - set(releases))
        if missing:
            return f"client(s) {missing[:5]} trained but their releases were not recorded"
        return f"releases of client(s) {sorted(set(releases) - set(sampled))[:5]} were recorded but not as sampled"
    if release.aggregate_divisor(len(releases)) <= 0:
        return "no update arrived and the declared divisor is the number that arrived: nothing was averaged"
    return None


def residuals(record: RunRecord) -> Residuals:
    """:func:`compute_residuals`, computed once per record."""
    return record.cached("residuals", compute_residuals)


def client_side(record: RunRecord) -> bool:
    """Whether some declared release is clipped by the clients (then each recorded release must lie within C)."""
    return any(r.clipped_at is ClipSite.CLIENT for r in record.declared.central.values())
