"""PrivateFL-CDP's median-clipped central DP: 001 Alg. 1 as printed (``paper``) and as its code runs it (``reference``).

Δ_k = θ_k − θ^r is client k's update over the aggregated (shared) parameters, K_s the number of clients of the round,
σ the noise multiplier calibrated for the claimed (ε, δ).

``paper`` — 001 Algorithm 1, lines 12–14, as printed::

    ζ_k = ‖Δ_k‖₂,  ζ = median_k ζ_k,  θ^{r+1} = θ^r + (1/K_s)(Σ_k Δ_k/ζ_k + N(0, σ²ζ²I))

  Each normalised update has norm 1 (sensitivity 1), yet the noise std is σζ: the realised noise multiplier
  is σζ, below σ whenever ζ < 1, and ζ is an unprivatised function of the clients' updates (audit point P2). The
  event records Gaussian multiplier σζ with ``valid=False``.

``reference`` — the reference code (``get_median_norm``/``agg_updates`` of BHui97/PrivateFL@39711e6:FedServer.py;
audit points P1–P3): per aggregated tensor t, ζ_t = min(median_k ‖Δ_{k,t}‖, 10); Δ_{k,t} is clipped to ζ_t; the server
adds N(0, (σζ_t)²) to tensor t and divides by sr·N as a float (``sample_clients = sample_rate*NUM_CLIENTS`` in
BHui97/PrivateFL@0ff71d6:FedAverage.py; the driver samples ⌊sr·N⌋ clients, so the two differ when sr·N is not whole:
:attr:`~privaudit.fl.privacy.central_dp.CentralDPConfig.reference_divisor`). Rescaling tensor t by 1/ζ_t shows the
release is a Gaussian mechanism of multiplier σ/√L (L tensors,
:func:`~privaudit.papers.privatefl.closed_forms.per_tensor_effective_multiplier`) — *if* the ζ_t did not depend on the
data. They are unprivatised medians, so the event (multiplier σ/√L) is recorded with ``valid=False``.

:class:`PrivateFLCentralDP` runs them (and dp-fedavg, as its base class does); the paper registers it as its
``central-dp`` hook, so ``--privacy cdp --central-variant paper|reference`` runs them around any algorithm, and
``--algorithm privatefl --privacy cdp`` keeps the paper's Alg. 1 as its default.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import torch

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.fl.engine.params import State
from privaudit.fl.privacy.central_dp import CDPVariant, CentralDP, Release, gaussian_noise, update_norm


def paper_release(updates: Sequence[State], sigma: float, generator: torch.Generator) -> tuple[State, float]:
    """001 Alg. 1 lines 12–14: (Σ_k Δ_k/ζ_k + N(0, σ²ζ²I))/K_s with ζ the median of ζ_k = ‖Δ_k‖; returns (mean update, ζ)."""
    norms = [update_norm(list(u.values())) for u in updates]
    zeta = statistics.median(norms)
    names = list(updates[0])
    total = {n: sum(u[n] / z if z > 0 else torch.zeros_like(u[n]) for u, z in zip(updates, norms, strict=True)) for n in names}
    for n in names:
        total[n] = (total[n] + gaussian_noise(total[n].shape, sigma * zeta, generator, total[n].dtype)) / len(updates)
    return total, zeta


def reference_release(updates: Sequence[State], sigma: float, cap: float, divisor: float, generator: torch.Generator
                      ) -> tuple[State, dict[str, float]]:
    """The reference code's per-tensor release: clip tensor t to ζ_t = min(median ‖Δ_{k,t}‖, cap), add N(0, (σζ_t)²), ÷ K_s.

    Returns the mean update and the per-tensor clip norms ζ_t.
    """
    names = list(updates[0])
    out: State = {}
    clips: dict[str, float] = {}
    for n in names:
        norms = [update_norm([u[n]]) for u in updates]
        clip = min(statistics.median(norms), cap)
        clips[n] = clip
        total = sum(u[n] * min(1.0, clip / norm) if norm > 0 else u[n] for u, norm in zip(updates, norms, strict=True))
        out[n] = (total + gaussian_noise(total.shape, sigma * clip, generator, total.dtype)) / divisor
    return out, clips


class PrivateFLCentralDP(CentralDP):
    """Central DP with 001's median variants (module docstring) beside dp-fedavg."""

    def median_release(self, round: int, updates: Sequence[State], generator: torch.Generator) -> Release:
        cfg = self.config
        if cfg.variant is CDPVariant.PAPER:
            mean, zeta = paper_release(updates, cfg.noise_multiplier, generator)
            return mean, (self._paper_event(round, zeta),), {"zeta": zeta}
        mean, clips = reference_release(updates, cfg.noise_multiplier, cfg.clip_cap, cfg.reference_divisor, generator)
        return mean, (self._reference_event(round, clips),), dict(clips)

    def _paper_event(self, round: int, zeta: float) -> PrivacyEvent:
        """001 Alg. 1 lines 12–14's event: multiplier σζ, invalid (ζ is an unprivatised median; audit point P2)."""
        sigma = self.config.noise_multiplier
        z = sigma * zeta if zeta > 0 else sigma
        failures = [f"the noise std σζ uses ζ = {zeta:.4g}, the unprivatised median of the clients' update norms (audit point P2)"]
        if zeta < 1:
            failures.append(f"ζ < 1: the normalised updates have sensitivity 1 but the noise is σζ = {z:.4g} < σ = {sigma:g}")
        failures.extend(self.sampling_failures())
        return self.server_event(
            round, self.sampled_mechanism(z),
            ("PrivateFL Alg. 1 lines 12–14 as printed: every update normalised by its own norm (sensitivity 1), "
             f"noise N(0, σ²ζ²I) with σ = {sigma:g}; recorded multiplier σζ as if ζ were data-independent",),
            failures)

    def _reference_event(self, round: int, clips: dict[str, float]) -> PrivacyEvent:
        """The reference code's event: multiplier σ/√L for L separately clipped tensors (P1), invalid (unprivatised ζ_t, P2)."""
        sigma = self.config.noise_multiplier
        tensors = len(clips)
        z = sigma / math.sqrt(tensors)
        failures = [f"the per-tensor clip norms ζ_t = min(median_k ‖Δ_{{k,t}}‖, {self.config.clip_cap:g}) are unprivatised functions "
                    "of the clients' updates and also set the noise std (audit point P2)", *self.sampling_failures()]
        return self.server_event(
            round, self.sampled_mechanism(z),
            (f"PrivateFL reference code: {tensors} tensors each clipped to its own ζ_t and noised N(0, (σζ_t)²) with σ = {sigma:g}: "
             f"a Gaussian mechanism with multiplier σ/√L = {z:.6g} if the ζ_t were data-independent (audit point P1); "
             f"the paper's ε assumes multiplier σ",),
            failures)
