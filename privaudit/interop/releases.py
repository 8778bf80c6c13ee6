"""Privacy releases in the user's terms: :class:`GaussianRelease` and :class:`NoDP`, and the ledger events they cause.

Each round's releases are described in your terms — :class:`GaussianRelease` (noise multiplier σ = noise std / clip C,
the clip C, the sampling rate q and scheme of each step, the number of steps) or :class:`NoDP` — and become privaudit
:class:`~privaudit.accounting.ledger.PrivacyEvent` values in the manifest's ledger (:func:`privacy_events`), accounted by
privaudit's tight accountants (``compute-epsilon --checkpoint``). A Gaussian release is the Gaussian mechanism on a
query of L2 sensitivity Δ (Dwork & Roth 2014, "The algorithmic foundations of differential privacy", Thm A.1; Balle &
Wang 2018 for its exact profile), repeated ``steps`` times, each step subsampled at rate q (Abadi et al. 2016,
"Deep learning with differential privacy", Algorithm 1). A sampling rate below 1 needs its scheme
(:class:`~privaudit.accounting.mechanisms.Sampling`: ``"poisson"`` or ``"fixed-size"``; no default).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from privaudit.accounting.ledger import SERVER, PrivacyEvent
from privaudit.accounting.mechanisms import Gaussian, Sampling, SubsampledGaussian
from privaudit.errors import InvalidParameterError


@dataclass(frozen=True)
class GaussianRelease:
    """Gaussian noise on clipped contributions, released ``steps`` times in one round.

    ``clients``: who the guarantee protects — client ids (each client's records, ``level="record"``: local DP-SGD or
    noise on a client's own update) or ``"server"`` (``level="client"``: central DP over whole clients, one event for
    the federation). ``noise_multiplier`` σ = noise std / ``clip`` (give it, or ``noise_std``). ``sensitivity`` Δ is how
    far (L2) the noised quantity moves when one protected unit is added or removed: C when each unit adds one clipped
    term to the noised sum (DP-SGD's per-example clipping; DP-FedAvg's per-client clipping under ``level="client"``,
    the default there); noise on one client's whole clipped update that protects its *records* has Δ = 2C (the update
    may change anywhere in the ball of radius C). Record-level releases must state Δ: there is no safe default. ``sample_rate`` q and ``sampling`` (``poisson`` or ``fixed-size``)
    describe how each step samples what it protects (records within a client for DP-SGD; clients for central DP);
    q = 1 means every step sees everything. With q < 1 ``sampling`` must be given, as there is no safe default either:
    ``"poisson"`` (each unit independently with probability q, so the number sampled varies) or ``"fixed-size"``
    (exactly q·N drawn without replacement — the ordinary ``random.sample`` loop, and Flower's — for which an added
    unit displaces a sampled one and the guarantee is far weaker: σ = 1, q = 0.5, 10 rounds, δ = 1e-5 gives ε = 31.4
    fixed-size against 10.5 Poisson). Accounted as ``steps`` runs of ``Gaussian(z)`` (q = 1) or
    ``SubsampledGaussian(z, q, sampling)`` with z = noise std / Δ.
    """

    clients: Sequence[int | str] | int | str
    noise_multiplier: float | None = None
    noise_std: float | None = None
    clip: float | None = None
    sensitivity: float | None = None
    sample_rate: float = 1.0
    sampling: Sampling | str | None = None
    steps: int = 1
    level: str = "record"
    assumptions: Sequence[str] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if self.clip is None or not (isinstance(self.clip, int | float) and math.isfinite(self.clip) and self.clip > 0):
            raise InvalidParameterError(f"a Gaussian release needs the clip C that bounds each contribution (positive), got {self.clip!r}")
        if (self.noise_multiplier is None) == (self.noise_std is None):
            raise InvalidParameterError("give exactly one of noise_multiplier (σ = std / clip) or noise_std")
        if self.sensitivity is not None and not (isinstance(self.sensitivity, int | float) and math.isfinite(self.sensitivity)
                                                 and self.sensitivity > 0):
            raise InvalidParameterError(f"sensitivity must be a positive number, got {self.sensitivity!r}")
        if self.level not in ("record", "client"):
            raise InvalidParameterError(f"level must be 'record' or 'client', got {self.level!r}")
        if self.level == "record" and self.sensitivity is None:
            # No silent default: Δ = C (per-example clipped sums, DP-SGD) and Δ = 2C (noise on a client's whole clipped
            # update) are both common, and the wrong one halves the noise the accountant believes in.
            raise InvalidParameterError("a record-level Gaussian release needs its sensitivity: sensitivity=clip for DP-SGD's "
                                        "per-example clipped sums, sensitivity=2*clip for noise on a whole clipped update")
        if isinstance(self.steps, bool) or int(self.steps) != self.steps or self.steps < 1:
            raise InvalidParameterError(f"steps must be a positive integer, got {self.steps!r}")
        if self.sampling is not None:
            object.__setattr__(self, "sampling", Sampling.parse(self.sampling))  # the one parse: used by value below
        if self.sampling is None and isinstance(self.sample_rate, int | float) and self.sample_rate < 1:
            raise InvalidParameterError(
                f"sample_rate={self.sample_rate:g} needs sampling='poisson' (each independently with probability q: the "
                "number sampled varies) or sampling='fixed-size' (exactly q·N drawn without replacement, e.g. "
                "random.sample; far weaker guarantees): there is no safe default")
        self.mechanism()  # validates σ, q and the sampling scheme now, where the user made the mistake

    @property
    def std(self) -> float:
        """The noise standard deviation (σ·C)."""
        return float(self.noise_std) if self.noise_std is not None else float(self.noise_multiplier) * float(self.clip)  # type: ignore[arg-type]

    @property
    def multiplier(self) -> float:
        """z = noise std / Δ, the multiplier the accountants take."""
        return self.std / float(self.sensitivity if self.sensitivity is not None else self.clip)  # type: ignore[arg-type]

    def mechanism(self) -> Gaussian | SubsampledGaussian:
        if float(self.sample_rate) >= 1.0:
            if float(self.sample_rate) > 1.0:
                raise InvalidParameterError(f"sample_rate must lie in (0, 1], got {self.sample_rate}")
            return Gaussian(self.multiplier)
        return SubsampledGaussian(self.multiplier, float(self.sample_rate), self.sampling)  # type: ignore[arg-type]

    def client_ids(self) -> list[str]:
        clients = [self.clients] if isinstance(self.clients, int | str) else list(self.clients)
        if self.level == "client" and clients != [SERVER]:
            raise InvalidParameterError("a client-level (central DP) release is charged to clients='server'")
        if self.level == "record" and SERVER in clients:
            raise InvalidParameterError("a release charged to 'server' protects whole clients: pass level='client'")
        return [str(c) for c in clients]

    def describe(self) -> str:
        delta = float(self.sensitivity if self.sensitivity is not None else self.clip)  # type: ignore[arg-type]
        text = (f"Gaussian noise of std {self.std:g} on contributions clipped to C = {float(self.clip):g} (L2 sensitivity "  # type: ignore[arg-type]
                f"Δ = {delta:g}, multiplier z = {self.multiplier:g})")
        if float(self.sample_rate) < 1:
            text += f", {self.sampling.value.replace('_', ' ')} sampling q = {float(self.sample_rate):g}"  # type: ignore[union-attr]
        return text + f", {int(self.steps)} step(s)"


@dataclass(frozen=True)
class NoDP:
    """Releases without calibrated noise: each named client has no DP guarantee (ε = ∞) from this round on."""

    clients: Sequence[int | str] | int | str
    reason: str = "released without calibrated noise"

    def client_ids(self) -> list[str]:
        return [str(c) for c in ([self.clients] if isinstance(self.clients, int | str) else list(self.clients))]


Release = GaussianRelease | NoDP | PrivacyEvent


def privacy_events(release: Release, round: int) -> list[PrivacyEvent]:
    """The privaudit ledger events that ``release`` caused in ``round`` (one per protected client)."""
    if isinstance(release, PrivacyEvent):
        return [release]
    if isinstance(release, NoDP):
        return [PrivacyEvent.no_guarantee(cid, round, release.reason) for cid in release.client_ids()]
    if not isinstance(release, GaussianRelease):
        raise InvalidParameterError(f"a privacy event is a GaussianRelease, NoDP or PrivacyEvent, got {type(release).__name__}")
    neighbours = ("client-level neighbours (one client's whole data)",) if release.level == "client" else ()
    assumptions = (release.describe(), *neighbours, *release.assumptions)
    return [PrivacyEvent(cid, round, release.mechanism(), int(release.steps), assumptions, True, release.note)
            for cid in release.client_ids()]


def round_events(release: Release, round: int) -> list[PrivacyEvent]:
    """:func:`privacy_events` of ``release`` in ``round``, refusing a :class:`PrivacyEvent` stamped with another round."""
    events = privacy_events(release, round)
    for event in events:
        if event.round != round:
            raise InvalidParameterError(f"a PrivacyEvent of round {event.round} was given to round {round}")
    return events
