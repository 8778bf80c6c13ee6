"""Central (client-level) DP at a trusted server: PrivateFL-CDP as the paper states it, as its code runs it, and done right.

Three named variants (:class:`CDPVariant`), each recording what its release really is. Δ_k = θ_k − θ^r is
client k's update over the aggregated (shared) parameters, K_s the number of clients of the round, σ the
noise multiplier calibrated for the claimed (ε, δ).

``paper`` — 001 Algorithm 1, lines 12–14, as printed::

    ζ_k = ‖Δ_k‖₂,  ζ = median_k ζ_k,  θ^{r+1} = θ^r + (1/K_s)(Σ_k Δ_k/ζ_k + N(0, σ²ζ²I))

  Each normalised update has norm 1 (sensitivity 1), yet the noise std is σζ: the realised noise multiplier
  is σζ, below σ whenever ζ < 1, and ζ is an unprivatised function of the clients' updates (audit point P2). The
  event records Gaussian multiplier σζ with ``valid=False``.

``reference`` — the reference code (``get_median_norm``/``agg_updates`` of BHui97/PrivateFL@39711e6:FedServer.py;
audit points P1–P3): per
aggregated tensor t, ζ_t = min(median_k ‖Δ_{k,t}‖, 10); Δ_{k,t} is clipped to ζ_t; the server adds
N(0, (σζ_t)²) to tensor t and divides by sr·N as a float (``sample_clients = sample_rate*NUM_CLIENTS`` in
BHui97/PrivateFL@0ff71d6:FedAverage.py; the driver samples ⌊sr·N⌋ clients, so the two differ when sr·N is not whole:
:attr:`CentralDPConfig.reference_divisor`). Rescaling tensor t by 1/ζ_t shows the release is a
Gaussian mechanism of multiplier σ/√L (L tensors, :func:`privaudit.accounting.closed_form.per_tensor_effective_multiplier`)
— *if* the ζ_t did not depend on the data. They are unprivatised medians, so the event (multiplier σ/√L)
is recorded with ``valid=False``.

``dp-fedavg`` — client-level DP-FedAvg done right (McMahan, Ramage, Talwar & Zhang 2018): a fixed clip C over
the whole update, θ^{r+1} = θ^r + (Σ_k clip_C(Δ_k) + N(0, σ²C²I))/(q·N) with Poisson client sampling at rate q
and the fixed denominator q·N (the expected number of clients). Event: SubsampledGaussian(σ, q), valid.
Optional private adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy 2021, "Differentially private
learning with adaptive clipping", Alg. 1) replaces the median: each client also reports
b_k = 1[‖Δ_k‖ ≤ C]; the server forms b̃ = (Σ_k (b_k − ½) + N(0, σ_b²))/(q·N) + ½ and sets
C ← C·exp(−η_C (b̃ − γ)) towards the γ-quantile of the update norms. The bit query has sensitivity ½, so it
is recorded as its own SubsampledGaussian(2σ_b, q) event each round.

Any algorithm whose server step is post-processing of the clients' mean update (its declared
``server_dp_compatible``) runs under any variant: ``privaudit train --algorithm X --privacy cdp --clip C --noise σ
[--central-variant dp-fedavg|paper|reference]`` (:mod:`privaudit.fl.privacy.registry`). There the default is
``dp-fedavg``, the mechanism done right; ``paper`` and ``reference`` are PrivateFL's faithfulness switches
(``--algorithm privatefl --privacy cdp`` keeps the paper's Alg. 1 as its default). The private model θ^r + meañ
is handed to the wrapped algorithm's own server step (:mod:`privaudit.fl.privacy.server_release`). The client
sampling (q, Poisson or fixed-size, N) is the federation's; under fixed-size sampling with q < 1 the Poisson
event is recorded ``valid=False`` (run ``--sampling poisson``, or every client, for a valid one).

Noise comes from the run's seeded stream ("central-noise", round).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

import torch

from privaudit.accounting.ledger import SERVER, PrivacyEvent
from privaudit.accounting.mechanisms import Gaussian, Mechanism, Neighbouring, Sampling, SubsampledGaussian
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientResult
from privaudit.fl.engine.capabilities import NeighbouringRelation
from privaudit.fl.engine.params import State
from privaudit.fl.privacy.server_release import ServerReleaseWrapper


class CDPVariant(str, Enum):
    PAPER = "paper"
    REFERENCE = "reference"
    DP_FEDAVG = "dp-fedavg"

    @classmethod
    def parse(cls, value: str | CDPVariant) -> CDPVariant:
        return parse_enum(cls, value, "CDP variant")


@dataclass(frozen=True)
class AdaptiveClipping:
    """Andrew et al. 2021: target quantile γ, geometric step η_C, noise σ_b of the clipped-bit count."""

    target_quantile: float = 0.5
    learning_rate: float = 0.2
    bit_noise: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.target_quantile < 1:
            raise InvalidParameterError(f"the target quantile γ must lie in (0, 1), got {self.target_quantile}")
        if not self.learning_rate > 0 or not self.bit_noise > 0:
            raise InvalidParameterError("adaptive clipping needs a positive step η_C and a positive bit noise σ_b")


@dataclass(frozen=True)
class CentralDPConfig:
    """σ, the variant, the client sampling (rate sr of N clients, Poisson or fixed-size) and the clip settings.

    ``client_rate``, ``num_clients`` and ``client_sampling`` left ``None`` are taken from the federation the
    wrapper runs in (:meth:`for_federation`, called by the run's ``start_federation`` hook); given explicitly,
    they must agree with it.
    """

    variant: CDPVariant
    noise_multiplier: float
    client_rate: float | None = None
    num_clients: int | None = None
    client_sampling: Sampling | None = None
    clip_norm: float = 1.0
    clip_cap: float = 10.0
    adaptive: AdaptiveClipping | None = None
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "variant", CDPVariant.parse(self.variant))
        if not self.noise_multiplier > 0 or math.isinf(self.noise_multiplier):
            raise InvalidParameterError(f"central DP needs a finite noise multiplier σ > 0, got {self.noise_multiplier}")
        if self.client_rate is not None and not 0 < self.client_rate <= 1:
            raise InvalidParameterError(f"the client sampling rate must lie in (0, 1], got {self.client_rate}")
        if self.num_clients is not None and (isinstance(self.num_clients, bool) or int(self.num_clients) != self.num_clients
                                             or int(self.num_clients) < 1):
            raise InvalidParameterError(f"the number of clients must be a positive integer, got {self.num_clients}")
        if self.client_sampling is not None:
            object.__setattr__(self, "client_sampling", Sampling.parse(self.client_sampling))
        if not self.clip_norm > 0 or not self.clip_cap > 0 or math.isinf(self.clip_norm):
            raise InvalidParameterError("central DP needs a positive finite clip norm and a positive clip cap")
        if self.adaptive is not None and self.variant is not CDPVariant.DP_FEDAVG:
            raise InvalidParameterError("private adaptive clipping replaces the median in the dp-fedavg variant only")

    @property
    def federated(self) -> bool:
        """Whether the client sampling is known (given, or taken from the federation)."""
        return None not in (self.client_rate, self.num_clients, self.client_sampling)

    def for_federation(self, client_rate: float, client_sampling: Sampling | str, num_clients: int) -> CentralDPConfig:
        """This configuration with the federation's client sampling filled in; refuses one that contradicts it."""
        given = {"client_rate": float(client_rate), "client_sampling": Sampling.parse(client_sampling),
                 "num_clients": int(num_clients)}
        mine = {"client_rate": self.client_rate, "client_sampling": self.client_sampling, "num_clients": self.num_clients}
        for name, value in given.items():
            if name == "client_sampling" and given["client_rate"] >= 1:
                continue  # every client takes part: Poisson and fixed-size sampling coincide
            if mine[name] is not None and mine[name] != value:
                raise InvalidParameterError(f"central DP was configured for {name.replace('_', ' ')} {_text(mine[name])}, "
                                            f"but the federation runs {_text(value)}")
        return replace(self, **given)

    @property
    def reference_divisor(self) -> float:
        """What the reference server divides the noisy sum by: sr·N as a float (its ``sample_clients``), even where it
        samples ⌊sr·N⌋ clients; equal to :attr:`expected_clients` whenever sr·N is a whole number."""
        if not self.federated:
            raise InvalidParameterError("central DP needs the federation's client sampling (run it through run_federation)")
        if self.client_sampling is Sampling.POISSON:
            return self.client_rate * self.num_clients
        return max(self.client_rate * self.num_clients, 1.0)

    @property
    def expected_clients(self) -> float:
        """q·N (Poisson) or the fixed K_s = max(⌊sr·N⌋, 1) of the reference code."""
        if not self.federated:
            raise InvalidParameterError("central DP needs the federation's client sampling (run it through run_federation)")
        if self.client_sampling is Sampling.POISSON:
            return self.client_rate * self.num_clients
        return float(max(math.floor(self.client_rate * self.num_clients + 1e-9), 1))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["variant"] = self.variant.value
        out["client_sampling"] = None if self.client_sampling is None else self.client_sampling.value
        return out


def _text(value: Any) -> str:
    return value.value if isinstance(value, Enum) else str(value)


def finite_or_zero(update: State) -> State:
    """A client update with any non-finite entry (diverged local training) counts as zero (TFF's zeroing)."""
    if all(bool(torch.isfinite(v).all()) for v in update.values()):
        return update
    return {k: torch.zeros_like(v) for k, v in update.items()}


def _norm(tensors: Sequence[torch.Tensor]) -> float:
    return float(torch.sqrt(sum((t.double() ** 2).sum() for t in tensors)))


def _noise(shape: torch.Size, std: float, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    return torch.normal(0.0, float(std), size=tuple(shape), generator=generator, dtype=dtype)


def paper_release(updates: Sequence[State], sigma: float, generator: torch.Generator) -> tuple[State, float]:
    """001 Alg. 1 lines 12–14: (Σ_k Δ_k/ζ_k + N(0, σ²ζ²I))/K_s with ζ the median of ζ_k = ‖Δ_k‖; returns (mean update, ζ)."""
    norms = [_norm(list(u.values())) for u in updates]
    zeta = statistics.median(norms)
    names = list(updates[0])
    total = {n: sum(u[n] / z if z > 0 else torch.zeros_like(u[n]) for u, z in zip(updates, norms, strict=True)) for n in names}
    for n in names:
        total[n] = (total[n] + _noise(total[n].shape, sigma * zeta, generator, total[n].dtype)) / len(updates)
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
        norms = [_norm([u[n]]) for u in updates]
        clip = min(statistics.median(norms), cap)
        clips[n] = clip
        total = sum(u[n] * min(1.0, clip / norm) if norm > 0 else u[n] for u, norm in zip(updates, norms, strict=True))
        out[n] = (total + _noise(total.shape, sigma * clip, generator, total.dtype)) / divisor
    return out, clips


def dp_fedavg_release(updates: Sequence[State], like: State, sigma: float, clip: float, divisor: float,
                      generator: torch.Generator) -> tuple[State, list[float]]:
    """McMahan et al. 2018: (Σ_k Δ_k·min(1, C/‖Δ_k‖) + N(0, σ²C²I)) / (q·N); returns (mean update, the ‖Δ_k‖)."""
    norms = [_norm(list(u.values())) for u in updates]
    out: State = {}
    for n, ref in like.items():
        total = torch.zeros_like(ref)
        for u, norm in zip(updates, norms, strict=True):
            total = total + u[n] * min(1.0, clip / norm if norm > 0 else 1.0)
        out[n] = (total + _noise(ref.shape, sigma * clip, generator, ref.dtype)) / divisor
    return out, norms


def adapt_clip(clip: float, norms: Sequence[float], adaptive: AdaptiveClipping, divisor: float, generator: torch.Generator) -> float:
    """Andrew et al. 2021 Alg. 1: b̃ = (Σ_k (1[‖Δ_k‖ ≤ C] − ½) + N(0, σ_b²))/(q·N) + ½; C ← C·exp(−η_C(b̃ − γ))."""
    centred = sum((1.0 if n <= clip else 0.0) - 0.5 for n in norms)
    noisy = centred + float(torch.normal(0.0, adaptive.bit_noise, size=(1,), generator=generator, dtype=torch.float64))
    fraction = noisy / divisor + 0.5
    return clip * math.exp(-adaptive.learning_rate * (fraction - adaptive.target_quantile))


class CentralDP(ServerReleaseWrapper, NeighbouringRelation):
    """The server clips, noises and averages the clients' updates (one of three variants) and records the truth."""

    prefix = "cdp"
    neighbouring = Neighbouring.ADD_REMOVE

    def __init__(self, inner: Algorithm, config: CentralDPConfig) -> None:
        super().__init__(inner)
        if not isinstance(config, CentralDPConfig):
            raise InvalidParameterError("CentralDP needs a CentralDPConfig")
        self.config = config
        self.clip_history: list[dict[str, float]] = []

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.inner.name}+cdp-{self.config.variant.value}"

    def setup(self, context) -> None:
        super().setup(context)
        self.clip = float(self.config.clip_norm)
        self.clip_history = []

    def configure(self, config) -> None:
        """The client sampling the events are stated for is the federation's own (rate q, Poisson or fixed-size, N)."""
        self.config = self.config.for_federation(config.clients_per_round, config.sampling, self.context.num_clients)

    @property
    def aggregate_clients(self) -> float:
        return self.config.expected_clients

    # -- the release ---------------------------------------------------------------------------------
    def release(self, round: int, global_state: State, results: Sequence[ClientResult]) -> tuple[State | None, tuple[PrivacyEvent, ...]]:
        cfg = self.config
        names = self.aggregated_names
        updates = [finite_or_zero({n: r.state[n] - global_state[n] for n in names}) for r in results]
        generator = self.context.seeds.torch("central-noise", round)
        new = P.clone(global_state)
        if cfg.variant is CDPVariant.DP_FEDAVG:
            like = {n: global_state[n] for n in names}
            clip = self.clip
            mean, norms = dp_fedavg_release(updates, like, cfg.noise_multiplier, clip, cfg.expected_clients, generator)
            events = [self._event(round, self._sampled(cfg.noise_multiplier), self._fedavg_assumptions(clip), self._sampling_check())]
            if cfg.adaptive is not None:
                self.clip = adapt_clip(clip, norms, cfg.adaptive, cfg.expected_clients, generator)
                bits = 2.0 * cfg.adaptive.bit_noise
                events.append(self._event(
                    round, self._sampled(bits),
                    (f"adaptive clipping (Andrew et al. 2021): the count of clients with ‖Δ‖ ≤ C, centred by ½ per client "
                     f"(sensitivity ½), plus N(0, σ_b²) with σ_b = {cfg.adaptive.bit_noise:g}: multiplier 2σ_b = {bits:g}",),
                    self._sampling_check()))
            self.clip_history.append({"clip": clip})
        elif not updates:  # paper and reference sample a fixed number of clients: no empty round to release
            return None, ()
        elif cfg.variant is CDPVariant.PAPER:
            mean, zeta = paper_release(updates, cfg.noise_multiplier, generator)
            events = [self._paper_event(round, zeta)]
            self.clip_history.append({"zeta": zeta})
        else:
            mean, clips = reference_release(updates, cfg.noise_multiplier, cfg.clip_cap, cfg.reference_divisor, generator)
            events = [self._reference_event(round, clips)]
            self.clip_history.append(dict(clips))
        for n in names:
            new[n] = global_state[n] + mean[n]
        return new, tuple(events)

    # -- events ------------------------------------------------------------------------------------
    def _event(self, round: int, mechanism: Mechanism, assumptions: Sequence[str], failures: Sequence[str] = ()) -> PrivacyEvent:
        return PrivacyEvent(
            client_id=SERVER,
            round=round,
            mechanism=mechanism,
            count=1,
            assumptions=(*assumptions, "client-level add/remove neighbours (one client's whole data)", *self.config.assumptions),
            valid=not failures,
            note="; ".join(failures),
        )

    def _sampled(self, z: float) -> Mechanism:
        rate = self.config.client_rate
        return SubsampledGaussian(z, rate) if rate < 1 else Gaussian(z)

    def _sampling_check(self) -> list[str]:
        cfg = self.config
        if cfg.client_rate < 1 and cfg.client_sampling is not Sampling.POISSON:
            return [f"clients are sampled as a fixed-size set of ⌊sr·N⌋ without replacement, but the event assumes Poisson "
                    f"sampling at rate {cfg.client_rate:g} (audit point P3)"]
        return []

    def _fedavg_assumptions(self, clip: float) -> tuple[str, ...]:
        cfg = self.config
        return (
            f"DP-FedAvg (McMahan et al. 2018): each update clipped to C = {clip:.6g} over all aggregated parameters, "
            f"N(0, σ²C²) with σ = {cfg.noise_multiplier:.6g} on the sum, fixed denominator q·N = {cfg.expected_clients:g}",
            "the clip norm is fixed in advance or set by the privatised quantile estimate of earlier rounds" if cfg.adaptive
            else "the clip norm C is fixed in advance (data-independent)",
        )

    def _paper_event(self, round: int, zeta: float) -> PrivacyEvent:
        sigma = self.config.noise_multiplier
        z = sigma * zeta if zeta > 0 else sigma
        failures = [f"the noise std σζ uses ζ = {zeta:.4g}, the unprivatised median of the clients' update norms (audit point P2)"]
        if zeta < 1:
            failures.append(f"ζ < 1: the normalised updates have sensitivity 1 but the noise is σζ = {z:.4g} < σ = {sigma:g}")
        failures.extend(self._sampling_check())
        return self._event(
            round, self._sampled(z),
            ("PrivateFL Alg. 1 lines 12–14 as printed: every update normalised by its own norm (sensitivity 1), "
             f"noise N(0, σ²ζ²I) with σ = {sigma:g}; recorded multiplier σζ as if ζ were data-independent",),
            failures)

    def _reference_event(self, round: int, clips: dict[str, float]) -> PrivacyEvent:
        sigma = self.config.noise_multiplier
        tensors = len(clips)
        z = sigma / math.sqrt(tensors)
        failures = [f"the per-tensor clip norms ζ_t = min(median_k ‖Δ_{{k,t}}‖, {self.config.clip_cap:g}) are unprivatised functions "
                    "of the clients' updates and also set the noise std (audit point P2)", *self._sampling_check()]
        return self._event(
            round, self._sampled(z),
            (f"PrivateFL reference code: {tensors} tensors each clipped to its own ζ_t and noised N(0, (σζ_t)²) with σ = {sigma:g}: "
             f"a Gaussian mechanism with multiplier σ/√L = {z:.6g} if the ζ_t were data-independent (audit point P1); "
             f"the paper's ε assumes multiplier σ",),
            failures)

    def hyperparameters(self) -> dict[str, Any]:
        return {**self.config.to_dict(), "clip_history": list(self.clip_history)}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "privacy": {"mechanism": "central-dp", **self.hyperparameters()}, "wraps": self.inner.describe()}
