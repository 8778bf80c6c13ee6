"""Local releases: each client's own noised release, x = a + n with a known bound ‖a‖ ≤ b on its data-dependent part.

Record-level releases carry their noise themselves, so the noise cannot be separated from the client's data — but two
of privaudit's producers bound the data-dependent part a, and that is enough to test the noise's *randomness*
(:mod:`privaudit.check.randomness`) with conservative p-values:

* output perturbation (:mod:`privaudit.fl.privacy.perturbation`, Upcycled-FL Thm 6.2 and its reference code): the
  release is ξ(ω) + n with ‖ξ(ω)‖ ≤ τ, so x = the release itself, b = τ, n ~ N(0, s²I) with s the std the event
  records (σ, or σ² as the reference draws it);
* a record-level :class:`~privaudit.interop.releases.GaussianRelease` of one step with Δ = 2C (noise on a client's
  whole clipped update): x = the release − θ_(r−1), b = C.

Under the null that n is a fresh N(0, s²I) draw, for two releases ‖x_i − x_j‖ ≥ ‖n_i − n_j‖ − b_i − b_j with
‖n_i − n_j‖² / (s_i² + s_j²) ~ χ²(d); and for any fixed unit vector c, |⟨x, c⟩| ≤ |⟨n, c⟩| + b with ⟨n, c⟩ ~ N(0, s²).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from privaudit.accounting.mechanisms import Gaussian
from privaudit.check.record import RunRecord, flat

_RELEASE = re.compile(r"^Gaussian noise of std ([0-9.eE+-]+) on contributions clipped to C = ([0-9.eE+-]+) \(L2 sensitivity "
                      r"Δ = ([0-9.eE+-]+)")


@dataclass(frozen=True, eq=False)
class LocalRelease:
    """One client's release in one round: x (checked tensors, float64), its noise std s and the bound b on ‖a‖."""

    round: int
    client: int
    event: int
    vector: np.ndarray
    noise_std: float
    bound: float
    source: str


def _declared(record: RunRecord, event) -> tuple[float, float, str, bool] | None:
    """(s, b, source, relative to the previous global model) of a record-level event, or None."""
    privacy = record.manifest.get("algorithm", {}).get("privacy") if isinstance(record.manifest.get("algorithm"), dict) else None
    if not isinstance(event.mechanism, Gaussian) or event.count != 1:
        return None
    if isinstance(privacy, dict) and privacy.get("mechanism") == "output-perturbation" and isinstance(privacy.get("clip"), int | float):
        return float(event.mechanism.noise_multiplier), float(privacy["clip"]), "output perturbation", False
    for text in event.assumptions:
        match = _RELEASE.match(text)
        if match:
            std, clip, sensitivity = (float(g) for g in match.groups())
            if abs(sensitivity - 2 * clip) <= 1e-6 * sensitivity:
                return std, clip, "GaussianRelease on a whole clipped update", True
    return None


def local_releases(record: RunRecord) -> list[LocalRelease]:
    """Every recorded record-level release whose declaration bounds its data-dependent part (module docstring)."""
    if not record.releases_recorded or not record.declared.record_level:
        return []
    out = []
    for index, event in enumerate(record.ledger.events):
        if event.client_id == "server" or not event.has_guarantee or not event.client_id.isdigit():
            continue
        declared = _declared(record, event)
        if declared is None or not 0 < event.round <= record.rounds:
            continue
        releases = record.releases(event.round) or {}
        client = int(event.client_id)
        if client not in releases:
            continue
        std, bound, source, relative = declared
        vector = flat(releases[client], record.names)
        if relative:
            vector = vector - flat(record.global_model(event.round - 1), record.names)
        if np.all(np.isfinite(vector)) and std > 0:
            out.append(LocalRelease(event.round, client, index, vector, std, bound, source))
    return out


def local(record: RunRecord) -> list[LocalRelease]:
    """:func:`local_releases`, computed once per record."""
    return record.cached("local-releases", local_releases)
