"""Central (client-level) DP at a trusted server: DP-FedAvg done right, and the hook for a paper's median variants.

Three named variants (:class:`CDPVariant`), each recording what its release really is. Δ_k = θ_k − θ^r is
client k's update over the aggregated (shared) parameters, σ the noise multiplier calibrated for the claimed (ε, δ).

``dp-fedavg`` — client-level DP-FedAvg done right (McMahan, Ramage, Talwar & Zhang 2018): a fixed clip C over
the whole update, θ^{r+1} = θ^r + (Σ_k clip_C(Δ_k) + N(0, σ²C²I))/(q·N) with Poisson client sampling at rate q
and the fixed denominator q·N (the expected number of clients). Event: SubsampledGaussian(σ, q), valid.
Optional private adaptive clipping (Andrew, Thakkar, McMahan & Ramaswamy 2021, "Differentially private
learning with adaptive clipping", Alg. 1) replaces a fixed C: each client also reports
b_k = 1[‖Δ_k‖ ≤ C]; the server forms b̃ = (Σ_k (b_k − ½) + N(0, σ_b²))/(q·N) + ½ and sets
C ← C·exp(−η_C (b̃ − γ)) towards the γ-quantile of the update norms. The bit query has sensitivity ½, so it
is recorded as its own SubsampledGaussian(2σ_b, q) event each round.

``paper`` and ``reference`` — the median-clipped releases of 001 (Algorithm 1, lines 12–14, as printed; and as its
reference code runs it, with a float divisor :attr:`CentralDPConfig.reference_divisor`), audit points P1–P3. They are
that paper's faithfulness switches: its package implements them (:meth:`CentralDP.median_release` in a subclass) and
registers the subclass (:attr:`privaudit.plugins.Paper.extras`, ``central-dp``); :func:`central_dp` builds the class a
configuration needs.

Any algorithm whose server step is post-processing of the clients' mean update (its declared
``server_dp_compatible``) runs under any variant: ``privaudit train --algorithm X --privacy cdp --clip C --noise σ
[--central-variant dp-fedavg|paper|reference]`` (:mod:`privaudit.fl.privacy.registry`); the default is
``dp-fedavg``, the mechanism done right. The private model θ^r + meañ is handed to the wrapped algorithm's own server
step (:mod:`privaudit.fl.privacy.server_release`). The client sampling (q, Poisson or fixed-size, N) is the
federation's; under fixed-size sampling with q < 1 the Poisson event is recorded ``valid=False`` (run ``--sampling
poisson``, or every client, for a valid one).

Noise comes from the run's seeded stream ("central-noise", round).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

import torch

from privaudit import plugins
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


def update_norm(tensors: Sequence[torch.Tensor]) -> float:
    """‖Δ‖₂ over ``tensors`` together, accumulated in float64."""
    return float(torch.sqrt(sum((t.double() ** 2).sum() for t in tensors)))


def gaussian_noise(shape: torch.Size, std: float, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """N(0, std²) of ``shape`` from ``generator`` (the run's "central-noise" stream)."""
    return torch.normal(0.0, float(std), size=tuple(shape), generator=generator, dtype=dtype)


def dp_fedavg_release(updates: Sequence[State], like: State, sigma: float, clip: float, divisor: float,
                      generator: torch.Generator) -> tuple[State, list[float]]:
    """McMahan et al. 2018: (Σ_k Δ_k·min(1, C/‖Δ_k‖) + N(0, σ²C²I)) / (q·N); returns (mean update, the ‖Δ_k‖)."""
    norms = [update_norm(list(u.values())) for u in updates]
    out: State = {}
    for n, ref in like.items():
        total = torch.zeros_like(ref)
        for u, norm in zip(updates, norms, strict=True):
            total = total + u[n] * min(1.0, clip / norm if norm > 0 else 1.0)
        out[n] = (total + gaussian_noise(ref.shape, sigma * clip, generator, ref.dtype)) / divisor
    return out, norms


def adapt_clip(clip: float, norms: Sequence[float], adaptive: AdaptiveClipping, divisor: float, generator: torch.Generator) -> float:
    """Andrew et al. 2021 Alg. 1: b̃ = (Σ_k (1[‖Δ_k‖ ≤ C] − ½) + N(0, σ_b²))/(q·N) + ½; C ← C·exp(−η_C(b̃ − γ))."""
    centred = sum((1.0 if n <= clip else 0.0) - 0.5 for n in norms)
    noisy = centred + float(torch.normal(0.0, adaptive.bit_noise, size=(1,), generator=generator, dtype=torch.float64))
    fraction = noisy / divisor + 0.5
    return clip * math.exp(-adaptive.learning_rate * (fraction - adaptive.target_quantile))


#: Release of a round: the mean update, the privacy events, and what the round's clip norms were (``clip_history``).
Release = tuple[State, tuple[PrivacyEvent, ...], dict[str, float]]


class CentralDP(ServerReleaseWrapper, NeighbouringRelation):
    """The server clips, noises and averages the clients' updates and records the truth.

    This class runs ``dp-fedavg``. The median variants (``paper``, ``reference``) reproduce one paper's Alg. 1 as
    printed and its code: that paper's package subclasses this class, implements :meth:`median_release` and registers
    the subclass as its ``central-dp`` hook (:attr:`privaudit.plugins.Paper.extras`); :func:`central_dp` builds the
    right class for a configuration.
    """

    prefix = "cdp"
    neighbouring = Neighbouring.ADD_REMOVE

    def __init__(self, inner: Algorithm, config: CentralDPConfig) -> None:
        super().__init__(inner)
        if not isinstance(config, CentralDPConfig):
            raise InvalidParameterError("CentralDP needs a CentralDPConfig")
        if config.variant is not CDPVariant.DP_FEDAVG and type(self).median_release is CentralDP.median_release:
            raise InvalidParameterError(f"the {config.variant.value} variant of central DP is a paper's; build it with "
                                        "privaudit.fl.privacy.central_dp.central_dp (the registered paper's class)")
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
        names = self.aggregated_names
        updates = [finite_or_zero({n: r.state[n] - global_state[n] for n in names}) for r in results]
        generator = self.context.seeds.torch("central-noise", round)
        if self.config.variant is CDPVariant.DP_FEDAVG:
            mean, events, history = self._dp_fedavg(round, updates, {n: global_state[n] for n in names}, generator)
        elif not updates:  # the median variants sample a fixed number of clients: no empty round to release
            return None, ()
        else:
            mean, events, history = self.median_release(round, updates, generator)
        self.clip_history.append(history)
        new = P.clone(global_state)
        for n in names:
            new[n] = global_state[n] + mean[n]
        return new, events

    def _dp_fedavg(self, round: int, updates: Sequence[State], like: State, generator: torch.Generator) -> Release:
        cfg, clip = self.config, self.clip
        mean, norms = dp_fedavg_release(updates, like, cfg.noise_multiplier, clip, cfg.expected_clients, generator)
        if cfg.adaptive is None:
            events = (self.server_event(round, self.sampled_mechanism(cfg.noise_multiplier), self._fedavg_assumptions(clip),
                                        self.sampling_failures()),)
            return mean, events, {"clip": clip}
        self.clip = adapt_clip(clip, norms, cfg.adaptive, cfg.expected_clients, generator)
        return mean, self._adaptive_events(round, clip), {"clip": clip}

    def _adaptive_events(self, round: int, clip: float) -> tuple[PrivacyEvent, ...]:
        """The round's two releases — the noisy mean (multiplier σ) and the noisy centred count of unclipped clients
        (sensitivity ½, noise σ_b: multiplier 2σ_b) — computed on the *same* sampled clients.

        With every client in the round they are two Gaussian events. With client sampling they are one subsampled
        mechanism: the pair of Gaussian releases on one sample is a single Gaussian of multiplier
        z = (σ⁻² + (2σ_b)⁻²)^{-1/2} (independent noise on orthogonal queries: μ² adds, Dong, Roth & Su 2022 Cor. 3.3;
        Andrew, Thakkar, McMahan & Ramaswamy 2021 Thm 1), subsampled once. Two separately subsampled events would
        assume independent samples and understate ε (q²(e^{μ₁²+μ₂²} − 1) ≥ q²(e^{μ₁²} − 1) + q²(e^{μ₂²} − 1) at
        second order)."""
        cfg = self.config
        bits = 2.0 * cfg.adaptive.bit_noise
        count = (f"adaptive clipping (Andrew et al. 2021): the count of clients with ‖Δ‖ ≤ C, centred by ½ per client "
                 f"(sensitivity ½), plus N(0, σ_b²) with σ_b = {cfg.adaptive.bit_noise:g}: multiplier 2σ_b = {bits:g}")
        if cfg.client_rate >= 1:
            return (self.server_event(round, Gaussian(cfg.noise_multiplier), self._fedavg_assumptions(clip)),
                    self.server_event(round, Gaussian(bits), (count,)))
        combined = 1.0 / math.sqrt(cfg.noise_multiplier ** -2 + bits ** -2)
        joint = (f"the mean and the count are released for the same sampled clients: one Gaussian of multiplier "
                 f"(σ⁻² + (2σ_b)⁻²)^(-1/2) = {combined:.6g}, subsampled once")
        return (self.server_event(round, self.sampled_mechanism(combined),
                                  (*self._fedavg_assumptions(clip), count, joint), self.sampling_failures()),)

    def median_release(self, round: int, updates: Sequence[State], generator: torch.Generator) -> Release:
        """The release of a median variant (``paper``/``reference``) for a non-empty round: implemented by the paper's
        subclass (see the class docstring); this class runs dp-fedavg only."""
        raise InvalidParameterError(f"the {self.config.variant.value} variant of central DP needs the registered paper's class")

    # -- events ------------------------------------------------------------------------------------
    def server_event(self, round: int, mechanism: Mechanism, assumptions: Sequence[str], failures: Sequence[str] = ()) -> PrivacyEvent:
        """The server's event of ``round``: client-level add/remove neighbours, valid unless ``failures``."""
        return PrivacyEvent(
            client_id=SERVER,
            round=round,
            mechanism=mechanism,
            count=1,
            assumptions=(*assumptions, "client-level add/remove neighbours (one client's whole data)", *self.config.assumptions),
            valid=not failures,
            note="; ".join(failures),
        )

    def sampled_mechanism(self, z: float) -> Mechanism:
        """Gaussian(z), subsampled at the federation's client rate q when q < 1."""
        rate = self.config.client_rate
        return SubsampledGaussian(z, rate) if rate < 1 else Gaussian(z)

    def sampling_failures(self) -> list[str]:
        """Why the Poisson-sampled event would not hold (fixed-size client sampling at q < 1), if it does not."""
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

    def hyperparameters(self) -> dict[str, Any]:
        return {**self.config.to_dict(), "clip_history": list(self.clip_history)}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "privacy": {"mechanism": "central-dp", **self.hyperparameters()}, "wraps": self.inner.describe()}


def central_dp(inner: Algorithm, config: CentralDPConfig) -> CentralDP:
    """Central DP around ``inner`` for ``config``: :class:`CentralDP` for dp-fedavg; for a median variant, the subclass
    a registered paper provides as its ``central-dp`` hook (:attr:`privaudit.plugins.Paper.extras`)."""
    if config.variant is CDPVariant.DP_FEDAVG:
        return CentralDP(inner, config)
    hooks = plugins.collected("extras")
    if "central-dp" not in hooks:
        raise InvalidParameterError(f"the {config.variant.value} variant of central DP needs a registered paper that provides "
                                    "it (extras['central-dp']); none is installed")
    return hooks["central-dp"][1].load()(inner, config)
