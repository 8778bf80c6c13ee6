"""Distributed DP with the Skellam mechanism and (simulated) secure aggregation: PrivateFL-DDP (001 Alg. 1 and 3).

Each client k of a round, with update Δ_k over the shared parameters (d scalars, padded to j = 2^⌈log₂ d⌉):

1. clip: Δ_k ← Δ_k·min(1, C/‖Δ_k‖);
2. rotate and scale: y = s·(1/√j)·H·D·Δ_k, D the round's random signs (shared by the clients, from the seeded
   stream ("ddp-rotation", training round)), H the Walsh–Hadamard matrix (:mod:`privaudit.fl.privacy.hadamard`);
3. conditional stochastic rounding: round every coordinate up with probability its fractional part, and
   repeat until ‖ỹ‖² ≤ M, M = min{(sC + √j)², s²C² + j/4 + √(2 ln(1/β))·(sC + √j/2)} (Agarwal, Kairouz & Liu
   2021, Eq. for the rounded norm; β the rounding bias);
4. add its Skellam share Sk(μ/K) = Poisson(μ/2K) − Poisson(μ/2K) per coordinate, so that K clients' shares sum
   to Sk(μ), μ = s²z²C² (z: the target central noise multiplier);
5. reduce modulo 2^b and hand the vector to secure aggregation.

:func:`secure_sum` is the simulated secure aggregation: the server only receives Σ_k ỹ_k mod 2^b, maps it to
[−2^{b−1}, 2^{b−1}), undoes scale and rotation and divides by the number of contributing clients.

The scale s fills the b-bit range: 2^b = 2m·√(s²C²K²/j + K/4 + s²z²C²) — m standard deviations of the sum's
coordinates (signal of K aligned clipped updates, rounding, noise); this is 001 Alg. 1's condition
"2^b = 2m√(C²K_s²/j + K_s/(4s²) + μ)" written in the scaled units. The default m makes an overflow of any of
the j coordinates unlikely (≈ ``overflow_probability`` under a Gaussian approximation): m = √(2 ln(2j/p)).

As the paper prints it, Alg. 3 clips and noises the *local model* and Alg. 1 line 10 never divides by K_s; its
rounding loop reads "while ‖θ‖² ≤ M" (the condition is inverted) and M's first term "s(C + √j)²". This module
runs the Skellam mechanism of Agarwal et al. (which the paper says it used, through TensorFlow Federated) on
model *updates*, with the corrected loop and bound, and averages the decoded sum.

Accounting: one ``SERVER`` event per round, :class:`~privaudit.accounting.mechanisms.Skellam` with the round's
realised noise variance n·μ/K (n contributing clients), Δ₂ = √M and Δ₁ = min(M, √j·√M), in the integer units
of the sum; neighbouring datasets zero out one client's update while its noise share stays (Kairouz et al.'s
distributed-DP model), no amplification by client sampling is claimed.

Any algorithm whose server step is post-processing of the clients' mean update (its declared
``server_dp_compatible``) runs under it: ``privaudit train --algorithm X --privacy ddp --clip C --noise z
[--modulus-bits b]`` (:mod:`privaudit.fl.privacy.registry`); K is then the federation's max(⌊q·N⌋, 1) and the
decoded mean goes to X's own server step (:mod:`privaudit.fl.privacy.server_release`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch

from privaudit.accounting.ledger import SERVER, PrivacyEvent
from privaudit.accounting.mechanisms import Neighbouring, Skellam
from privaudit.errors import InvalidParameterError, NumericalFailure
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult
from privaudit.fl.engine.capabilities import NeighbouringRelation
from privaudit.fl.engine.params import State
from privaudit.fl.privacy.hadamard import padded_length, random_signs, rotate, unrotate
from privaudit.fl.privacy.server_release import ServerReleaseWrapper

SECURE_AGGREGATION = "secure-aggregation"


@dataclass(frozen=True)
class DistributedDPConfig:
    """Target central noise multiplier z, clip C, bit width b, expected clients K, signal bound m, rounding bias β.

    ``expected_clients`` left ``None`` is the federation's max(⌊q·N⌋, 1), filled in when the run starts
    (:func:`federation_clients`); given explicitly, it must agree with the federation.
    """

    noise_multiplier: float
    clip_norm: float = 1.0
    bits: int = 16
    expected_clients: int | None = None
    signal_bound: float | None = None
    rounding_bias: float = math.exp(-0.5)
    overflow_probability: float = 1e-3
    max_rounding_tries: int = 1000
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.noise_multiplier >= 0 or math.isinf(self.noise_multiplier):
            raise InvalidParameterError(f"distributed DP needs a finite noise multiplier z ≥ 0, got {self.noise_multiplier}")
        if not self.clip_norm > 0 or math.isinf(self.clip_norm):
            raise InvalidParameterError(f"distributed DP needs a finite clip norm C > 0, got {self.clip_norm}")
        if isinstance(self.bits, bool) or int(self.bits) != self.bits or not 2 <= int(self.bits) <= 62:
            raise InvalidParameterError(f"the bit width b must be an integer in [2, 62] (int64 sums), got {self.bits}")
        if self.expected_clients is not None and (isinstance(self.expected_clients, bool)
                                                  or int(self.expected_clients) != self.expected_clients or int(self.expected_clients) < 1):
            raise InvalidParameterError(f"the expected number of clients per round must be ≥ 1, got {self.expected_clients}")
        if self.signal_bound is not None and not self.signal_bound > 0:
            raise InvalidParameterError(f"the signal bound m must be > 0, got {self.signal_bound}")
        if not 0 < self.rounding_bias < 1 or not 0 < self.overflow_probability < 1:
            raise InvalidParameterError("the rounding bias β and the overflow probability must lie in (0, 1)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class DDPScale:
    """The integer encoding of one federation: dimension d, padded j, signal bound m, scale s, rounded-norm bound M."""

    dimension: int
    padded: int
    signal_bound: float
    scale: float
    norm_bound_sq: float
    central_variance: float
    client_variance: float

    @property
    def l2_sensitivity(self) -> float:
        return math.sqrt(self.norm_bound_sq)

    @property
    def l1_sensitivity(self) -> float:
        """Δ₁ = min(M, √j·√M): an integer vector has ‖v‖₁ ≤ ‖v‖₂² and ‖v‖₁ ≤ √j‖v‖₂."""
        return min(self.norm_bound_sq, math.sqrt(self.padded) * self.l2_sensitivity)


def default_signal_bound(padded: int, overflow_probability: float) -> float:
    """m = √(2 ln(2j/p)): a Gaussian coordinate exceeds m standard deviations on any of j coordinates w.p. ≈ p."""
    return math.sqrt(2.0 * math.log(2.0 * padded / overflow_probability))


def rounding_norm_bound(scale: float, clip: float, padded: int, bias: float) -> float:
    """M = min{(sC + √j)², s²C² + j/4 + √(2 ln(1/β))·(sC + √j/2)} (Agarwal et al. 2021, conditional rounding)."""
    sc, root = scale * clip, math.sqrt(padded)
    return min((sc + root) ** 2, sc * sc + padded / 4.0 + math.sqrt(2.0 * math.log(1.0 / bias)) * (sc + root / 2.0))


def ddp_scale(config: DistributedDPConfig, dimension: int, *, check: bool = True) -> DDPScale:
    """Solve 2^b = 2m·√(s²C²K²/j + K/4 + s²z²C²) for s; refuse bit widths that leave no room for the signal.

    ``check=False`` skips the refusal of a scaled clip below the rounding noise (noise calibration probes
    noise levels that the final run never uses).
    """
    if config.expected_clients is None:
        raise InvalidParameterError("the Skellam encoding needs the expected number of clients per round K (expected_clients)")
    j = padded_length(dimension)
    k = float(config.expected_clients)
    m = config.signal_bound if config.signal_bound is not None else default_signal_bound(j, config.overflow_probability)
    c, z = float(config.clip_norm), float(config.noise_multiplier)
    room = (2.0 ** (int(config.bits) - 1) / m) ** 2 - k / 4.0
    if room <= 0:
        raise InvalidParameterError(
            f"{config.bits} bits cannot hold the sum of {int(k)} clients: the modular range 2^b must exceed "
            f"2m·√(K/4) = {2 * m * math.sqrt(k / 4):.3g} (m = {m:.3g}); use more bits")
    scale = math.sqrt(room / (c * c * k * k / j + z * z * c * c))
    if check and scale * c < math.sqrt(j) / 2.0:
        raise InvalidParameterError(
            f"{config.bits} bits leave a scaled clip norm sC = {scale * c:.3g} below the rounding noise √j/2 = {math.sqrt(j) / 2:.3g} "
            f"(d = {dimension}, K = {int(k)}, z = {z:g}); use more bits")
    mu = scale * scale * z * z * c * c
    return DDPScale(dimension, j, m, scale, rounding_norm_bound(scale, c, j, config.rounding_bias), mu, mu / k)


def federation_clients(client_rate: float, num_clients: int) -> int:
    """K = max(⌊q·N⌋, 1): the clients of a fixed-size round, the rounded-down expectation of a Poisson one."""
    return max(math.floor(float(client_rate) * int(num_clients) + 1e-9), 1)


def clip_vector(x: torch.Tensor, clip: float) -> torch.Tensor:
    """x·min(1, C/‖x‖); a vector with non-finite entries (diverged local training) becomes zero, as TFF's zeroing does."""
    if not bool(torch.isfinite(x).all()):
        return torch.zeros_like(x)
    norm = float(x.norm())
    return x * min(1.0, clip / norm) if norm > 0 else x.clone()


def conditional_round(y: torch.Tensor, norm_bound_sq: float, generator: torch.Generator, max_tries: int) -> tuple[torch.Tensor, int]:
    """Stochastic rounding (up w.p. the fractional part), repeated until ‖ỹ‖² ≤ M; returns (ỹ as int64, tries)."""
    floor = torch.floor(y)
    fraction = y - floor
    for tries in range(1, max_tries + 1):
        rounded = floor + (torch.rand(y.shape, generator=generator, dtype=y.dtype) < fraction).to(y.dtype)
        if float((rounded * rounded).sum()) <= norm_bound_sq:
            return rounded.to(torch.int64), tries
    raise NumericalFailure(f"conditional rounding did not reach ‖ỹ‖² ≤ M in {max_tries} tries")


def skellam_share(length: int, variance: float, generator: torch.Generator) -> torch.Tensor:
    """Sk(v) = Poisson(v/2) − Poisson(v/2) per coordinate (variance v), as int64."""
    if variance <= 0:
        return torch.zeros(length, dtype=torch.int64)
    rate = torch.full((length,), variance / 2.0, dtype=torch.float64)
    return (torch.poisson(rate, generator=generator) - torch.poisson(rate, generator=generator)).to(torch.int64)


def encode_update(update: torch.Tensor, scale: DDPScale, config: DistributedDPConfig, signs: torch.Tensor,
                  rounding: torch.Generator, noise: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Steps 1–5 for one client: returns (ỹ + noise mod 2^b, the same before the modular reduction, rounding tries)."""
    clipped = clip_vector(update.to(torch.float64), config.clip_norm)
    y = rotate(clipped, signs) * scale.scale
    rounded, tries = conditional_round(y, scale.norm_bound_sq, rounding, config.max_rounding_tries)
    signed = rounded + skellam_share(scale.padded, scale.client_variance, noise)
    return torch.remainder(signed, 2 ** int(config.bits)), signed, tries


def secure_sum(vectors: Sequence[torch.Tensor], bits: int) -> torch.Tensor:
    """The simulated secure aggregation: only Σ_k v_k mod 2^b leaves it."""
    modulus = 2 ** int(bits)
    total = torch.zeros_like(vectors[0])
    for v in vectors:
        total = torch.remainder(total + v, modulus)
    return total


def decode_sum(modular: torch.Tensor, scale: DDPScale, bits: int, signs: torch.Tensor) -> torch.Tensor:
    """Σ_k Δ_k (+ noise) in the update's units: signed representative in [−2^{b−1}, 2^{b−1}), ÷ s, inverse rotation."""
    half = 2 ** (int(bits) - 1)
    signed = torch.where(modular >= half, modular - 2 * half, modular).to(torch.float64)
    return unrotate(signed / scale.scale, signs, scale.dimension)


class DistributedDP(ServerReleaseWrapper, NeighbouringRelation):
    """Clients encode their clipped updates with Skellam noise; the server sees only their modular sum."""

    prefix = "ddp"
    neighbouring = Neighbouring.ADD_REMOVE

    def __init__(self, inner: Algorithm, config: DistributedDPConfig) -> None:
        super().__init__(inner)
        if not isinstance(config, DistributedDPConfig):
            raise InvalidParameterError("DistributedDP needs a DistributedDPConfig")
        if not config.noise_multiplier > 0:
            raise InvalidParameterError("DistributedDP needs a noise multiplier z > 0 (the encoding functions run noise-free)")
        self.config = config
        self.diagnostics: list[dict[str, float]] = []

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.inner.name}+ddp"

    def setup(self, context) -> None:
        super().setup(context)
        self.dimension = sum(context.initial_state[n].numel() for n in self.aggregated_names)
        if self.config.expected_clients is not None:
            self.scale = ddp_scale(self.config, self.dimension)
        elif hasattr(self, "scale"):
            del self.scale
        self.diagnostics = []
        self._plain: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self._training_rounds: dict[int, int] = {}
        self._count = 0

    def configure(self, config) -> None:
        """K from the federation's client sampling (max(⌊q·N⌋, 1)), then the integer encoding for it."""
        expected = federation_clients(config.clients_per_round, self.context.num_clients)
        if self.config.expected_clients is not None and int(self.config.expected_clients) != expected:
            raise InvalidParameterError(f"distributed DP was configured for K = {self.config.expected_clients} clients per round, "
                                        f"but the federation samples {expected}")
        self.config = replace(self.config, expected_clients=expected)
        self.scale = ddp_scale(self.config, self.dimension)

    @property
    def aggregate_clients(self) -> float:
        """The decoded sum is divided by the number of clients that contributed to it."""
        return float(self._count)

    def _signs(self, training_round: int) -> torch.Tensor:
        return random_signs(self.scale.padded, self.context.seeds.torch("ddp-rotation", training_round))

    def client_release(self, global_state: State, client: ClientContext, result: ClientResult) -> ClientResult:
        if result.info.get("excluded"):
            return result
        if not hasattr(self, "scale"):
            raise InvalidParameterError("distributed DP without expected_clients takes K from the federation: run it through run_federation")
        self._training_rounds[client.round] = client.training_round
        names = self.aggregated_names
        update = torch.cat([(result.state[n] - global_state[n]).reshape(-1).to(torch.float64) for n in names])
        encoded, signed, tries = encode_update(
            update, self.scale, self.config, self._signs(client.training_round),
            client.generator("ddp-rounding"), client.generator("ddp-noise"))
        # Simulation bookkeeping only (never used by the server's decoding): the clipped update and the
        # unreduced integer vector, to measure decoding error and detect modular overflow.
        self._plain.setdefault(client.round, []).append((clip_vector(update, self.config.clip_norm), signed))
        return replace(
            result,
            state=P.clone(global_state),
            extras={**result.extras, SECURE_AGGREGATION: {"encoded": encoded}},
            info={**result.info, "rounding_tries": tries},
        )

    def release(self, round: int, global_state: State, results: Sequence[ClientResult]) -> tuple[State | None, tuple[PrivacyEvent, ...]]:
        if not results:  # no client sent a share: nothing is released
            return None, ()
        signs = self._signs(self._training_rounds.pop(round))
        modular = secure_sum([r.extras[SECURE_AGGREGATION]["encoded"] for r in results], self.config.bits)
        total = decode_sum(modular, self.scale, self.config.bits, signs)
        count = len(results)
        self._count = count
        mean = total / count
        names = self.aggregated_names
        new = P.clone(global_state)
        offset = 0
        for n in names:
            size = global_state[n].numel()
            new[n] = global_state[n] + mean[offset : offset + size].reshape(global_state[n].shape).to(global_state[n].dtype)
            offset += size
        self._record_diagnostics(round, modular, mean)
        variance = count * self.scale.client_variance
        event = PrivacyEvent(
            client_id=SERVER,
            round=round,
            mechanism=Skellam(variance, self.scale.l2_sensitivity, self.scale.l1_sensitivity),
            count=1,
            assumptions=(
                f"Skellam mechanism (Agarwal, Kairouz & Liu 2021): {count} clients' shares Sk(μ/K) with μ = s²z²C², "
                f"z = {self.config.noise_multiplier:.6g}, C = {self.config.clip_norm:g}, s = {self.scale.scale:.6g}, K = {self.config.expected_clients}; "
                f"realised variance {variance:.6g} per coordinate in integer units",
                f"conditional rounding bounds a client's integer vector by ‖ỹ‖₂² ≤ M = {self.scale.norm_bound_sq:.6g}",
                "secure aggregation (simulated): the server sees only the sum modulo 2^b; no overflow of the modular range assumed",
                "client-level zero-out neighbours: one client's update replaced by zero while its noise share stays; no amplification by client sampling",
                *self.config.assumptions,
            ),
        )
        return new, (event,)

    def _record_diagnostics(self, round: int, modular: torch.Tensor, mean: torch.Tensor) -> None:
        plain = self._plain.pop(round, [])
        if not plain:
            return
        unreduced = torch.stack([s for _, s in plain]).sum(dim=0)
        half = 2 ** (int(self.config.bits) - 1)
        overflow = int(((unreduced < -half) | (unreduced >= half)).sum())
        target = torch.stack([c for c, _ in plain]).mean(dim=0)
        self.diagnostics.append({
            "round": round,
            "clients": len(plain),
            "overflow_coordinates": overflow,
            "decoding_error": float((mean - target).norm()),
            "mean_update_norm": float(target.norm()),
            "expected_noise_norm": math.sqrt(len(plain) * self.scale.client_variance * self.scale.dimension) / self.scale.scale / len(plain),
        })

    def hyperparameters(self) -> dict[str, Any]:
        out = {**self.config.to_dict()}
        if hasattr(self, "scale"):
            out["encoding"] = asdict(self.scale)
        out["diagnostics"] = list(self.diagnostics)
        return out

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "privacy": {"mechanism": "distributed-dp-skellam", **self.hyperparameters()}, "wraps": self.inner.describe()}
