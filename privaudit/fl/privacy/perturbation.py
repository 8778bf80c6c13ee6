"""Privatizers as wrappers around any algorithm (Flower's ``dp_fixed_clipping`` pattern), with their events.

* :class:`OutputPerturbation` — output perturbation (Upcycled-FL's, 000 §5, 003 §6; Thm 6.2): each training client
  clips its local model to norm τ and adds N(0, s²I). Default s = σ (the paper); ``noise_std="sigma-squared"`` draws
  s = σ² as the reference code does (``torch.normal(0, sigma**2)``, audit point U1). The event states the sensitivity
  of :class:`Sensitivity` and cites the result it comes from (``sensitivity_source``, given by the paper's package
  that builds the mechanism: :attr:`privaudit.plugins.Paper.privacy`).
* ``rng="clock-ms"`` seeds each draw from the clock's milliseconds as the reference code does (≤ 1000
  distinct noise draws, audit point U5). By default the clock is the simulated one of
  :mod:`privaudit.fl.privacy.clock_seed`: one read per client in the reference's processing order, about 35 ms
  apart, drawn from the run's seed (reproducible), and, as the reference's ``manual_seed(clock)`` reseeds the
  global generator, the next client's straggler draw and mini-batch order follow from the same millisecond seed
  (:meth:`client_draws`; :class:`ClockSeeds` serves every privatizer that draws this way). An injected ``clock``
  callable is read once per release instead (no coupling), so audits can fix the seeds. The default ``rng`` draws
  from the run's seeded stream ("output-noise", training round, client).
* :class:`NoPrivacy` — ``--privacy none``: every release recorded as non-private.

Wrapped around X and inside an algorithm wrapper (Upcycled-X: :class:`~privaudit.papers.upcycled.algorithm.Upcycled`),
a privatizer acts only in the rounds that train clients. Each release records a
:class:`~privaudit.accounting.ledger.PrivacyEvent` with the assumptions its accounting rests on; an event
whose assumptions are known to fail is recorded with ``valid=False`` and a note. ε is never computed here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.accounting.mechanisms import Gaussian
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientDraws, ClientResult
from privaudit.fl.engine.capabilities import (
    ClientSchedules,
    OwnPrivacyAccounting,
    ReleaseBound,
)
from privaudit.fl.engine.params import State
from privaudit.fl.privacy import clock_seed, noise

Clock = Callable[[], float]


class ClockSeeds:
    """The reference code's clock seeds for a privatizer (audit point U5): the simulated clock of
    :mod:`~privaudit.fl.privacy.clock_seed` (default) or an injected clock read once per release."""

    def __init__(self, clock: Clock | None) -> None:
        self.clock = clock
        self.simulated: clock_seed.ReferenceClock | None = None
        self.rounds: dict[int, clock_seed.RoundClock] = {}

    @property
    def emulated(self) -> bool:
        return self.clock is None

    def setup(self, seeds) -> None:
        self.simulated = clock_seed.ReferenceClock(seeds)
        self.rounds = {}

    def plan(self, training_round: int, sampled: Sequence[int]) -> clock_seed.RoundClock:
        planned = self.simulated.round(training_round, sampled)
        self.rounds = {training_round: planned}  # one round at a time
        return planned

    def seed(self, client: ClientContext) -> int:
        if self.clock is not None:
            return noise.clock_ms_seed(self.clock())
        planned = self.rounds.get(client.training_round)
        if planned is None or client.client_id not in planned.order:  # a release outside the round loop
            planned = self.simulated.round(client.training_round, [client.client_id])
        return planned.seed_of(client.client_id)

    def describe(self) -> dict[str, Any]:
        if self.clock is not None:
            return {"clock": "injected"}
        return {"clock": f"simulated: reference processing order, reads {clock_seed.MEAN_GAP_MS:g} ms apart on average"}


class NoiseStd(str, Enum):
    SIGMA = "sigma"  # the paper: n ~ N(0, σ²I)
    SIGMA_SQUARED = "sigma-squared"  # the reference code: std σ² (audit point U1)


class NoiseRng(str, Enum):
    SEEDED = "seeded"  # the run's seeded streams
    CLOCK_MS = "clock-ms"  # the reference code: seed = milliseconds of the clock (audit point U5)


class Sensitivity(str, Enum):
    PAPER = "paper"  # τ/|D_i| (Thm 6.2's proof, add-one neighbours)
    CLIP_DIAMETER = "clip-diameter"  # 2τ: any two clipped models lie in the τ-ball (no assumption on training)


def clock_note(rng: NoiseRng) -> tuple[str, str | None]:
    if rng is NoiseRng.CLOCK_MS:
        return (
            "noise seeded from the clock's milliseconds: at most 1000 distinct noise draws (audit point U5)",
            "clock-seeded noise is one of ≤ 1000 enumerable draws, so the release is not differentially private (audit point U5)",
        )
    return "noise from the run's seeded generator", None


@dataclass(frozen=True)
class OutputPerturbationConfig:
    clip: float
    sigma: float
    noise_std: NoiseStd = NoiseStd.SIGMA
    rng: NoiseRng = NoiseRng.SEEDED
    sensitivity: Sensitivity = Sensitivity.PAPER

    def __post_init__(self) -> None:
        for name in ("clip", "sigma"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value > 0 or math.isinf(value):
                raise InvalidParameterError(f"output perturbation needs a finite positive {name}, got {value!r}")
        object.__setattr__(self, "noise_std", parse_enum(NoiseStd, self.noise_std, "noise std convention"))
        object.__setattr__(self, "rng", parse_enum(NoiseRng, self.rng, "noise RNG"))
        object.__setattr__(self, "sensitivity", parse_enum(Sensitivity, self.sensitivity, "sensitivity model"))

    @property
    def std(self) -> float:
        """The standard deviation actually drawn: σ, or σ² (reference code)."""
        return self.sigma if self.noise_std is NoiseStd.SIGMA else self.sigma**2

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(self).items()}


class OutputPerturbation(AlgorithmWrapper, ClientSchedules, ReleaseBound):
    """Clip each training client's released model to norm τ and add Gaussian noise (Thm 6.2's mechanism).

    ``sensitivity_source`` names the result that states the sensitivity τ/|D_i| of :attr:`Sensitivity.PAPER`; each
    event cites it (empty: uncited). The paper's package that registers the mechanism passes its theorem.
    """

    mechanism_name = "output-perturbation"

    def __init__(self, inner: Algorithm, config: OutputPerturbationConfig, *, clock: Clock | None = None,
                 sensitivity_source: str = "") -> None:
        super().__init__(inner)
        self.config = config
        self.clock = clock
        self.sensitivity_source = str(sensitivity_source)
        self._clock_seeds = ClockSeeds(clock)

    def setup(self, context) -> None:
        super().setup(context)
        self._clock_seeds.setup(context.seeds)

    def client_draws(self, training_round: int, sampled: Sequence[int], epochs: Sequence[int], config) -> ClientDraws | None:
        """With the simulated clock: client k+1 (in the reference's order) draws its straggler status and shuffles
        from the generator that client k's release seeded, after its noise (:mod:`~privaudit.fl.privacy.clock_seed`)."""
        if self.config.rng is not NoiseRng.CLOCK_MS or not self._clock_seeds.emulated:
            return ClientSchedules.of(self.inner).client_draws(training_round, sampled, epochs, config)
        planned = self._clock_seeds.plan(training_round, sampled)
        like = self.context.initial_state
        drawn: dict[int, tuple[int, Any]] = {}
        for previous, client in zip(planned.seeds, planned.order[1:], strict=False):
            generator = clock_seed.after_output_noise(previous, like, self.config.std)
            drawn[client] = clock_seed.coupled_draws(generator, num_examples=self.context.client_sizes[client],
                                                     epochs=config.local.epochs, batch_size=config.local.batch_size,
                                                     straggler=config.stragglers)
        return ClientDraws(
            epochs=tuple(drawn[c][0] if c in drawn else int(e) for c, e in zip(sampled, epochs, strict=True)),
            schedules=tuple(drawn[c][1] if c in drawn else None for c in sampled),
        )

    def clock_seed_of(self, client: ClientContext) -> int:
        """The millisecond seed of ``client``'s release (simulated or read from the injected clock)."""
        return self._clock_seeds.seed(client)

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.inner.name}+{self.mechanism_name}"

    @property
    def release_clip(self) -> float:
        """τ: every released local model is clipped to this norm."""
        return float(self.config.clip)

    def _generator(self, client: ClientContext):
        import torch

        if self.config.rng is NoiseRng.CLOCK_MS:
            return torch.Generator().manual_seed(self.clock_seed_of(client))
        return client.generator("output-noise")

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        result = self.inner.finish(global_state, client, outcome)
        clipped, norm = noise.clip_to_norm(result.state, self.config.clip)
        drawn = noise.gaussian_noise(clipped, self.config.std, self._generator(client))
        released = {k: clipped[k] + drawn[k] for k in clipped}
        event = self._event(client, sorted(result.extras))
        return replace(result, state=released, events=(*result.events, event), info={**result.info, "norm_before_clip": norm})

    def _event(self, client: ClientContext, unprivatised: Sequence[str]) -> PrivacyEvent:
        cfg, size = self.config, client.num_examples
        assumptions = []
        if cfg.sensitivity is Sensitivity.PAPER:
            sensitivity = cfg.clip / size
            cited = f" per {self.sensitivity_source}" if self.sensitivity_source else ""
            assumptions.append(
                f"sensitivity τ/|D_i| = {cfg.clip:g}/{size}{cited}: the clipped model is treated "
                "as an average of per-example terms bounded by τ, add-one neighbours (unverified for SGD-trained models, audit point U2)"
            )
        else:
            sensitivity = 2 * cfg.clip
            assumptions.append(f"sensitivity 2τ = {2 * cfg.clip:g}: any two clipped models lie in the τ-ball")
        if cfg.noise_std is NoiseStd.SIGMA:
            assumptions.append(f"noise std σ = {cfg.sigma:g} as the paper states")
        else:
            assumptions.append(f"noise std σ² = {cfg.std:g} (σ = {cfg.sigma:g}) as the reference code draws it (audit point U1)")
        rng_assumption, rng_failure = clock_note(cfg.rng)
        assumptions.append(rng_assumption)
        failures = [rng_failure] if rng_failure else []
        if unprivatised:
            failures.append(f"the client also releases {', '.join(unprivatised)} without noise")
        return PrivacyEvent(
            client_id=str(client.client_id),
            round=client.round,
            mechanism=Gaussian(noise_multiplier=cfg.std, sensitivity=sensitivity),
            count=1,
            assumptions=tuple(assumptions),
            valid=not failures,
            note="; ".join(failures),
        )

    def hyperparameters(self) -> dict:
        return self.config.to_dict()

    def describe(self) -> dict:
        clock = self._clock_seeds.describe() if self.config.rng is NoiseRng.CLOCK_MS else {}
        return {"name": self.name, "privacy": {"mechanism": self.mechanism_name, **self.config.to_dict(), **clock},
                "wraps": self.inner.describe()}


class NoPrivacy(AlgorithmWrapper):
    """``--privacy none``: releases exactly what ``inner`` releases, and records each release without a privacy
    event as a non-private one (:meth:`PrivacyEvent.no_guarantee`, ε = ∞), so ledgers, JSON and tables say
    "no DP guarantee (ε = ∞)" — never ε = 0.

    Releases that already carry events (FedReg's and FedCurv's own no-guarantee events) are left alone, as are
    algorithms that keep their own privacy accounting (:class:`~privaudit.fl.engine.capabilities.OwnPrivacyAccounting`,
    e.g. PFA, whose public clients release by design). Name and description are the inner algorithm's: nothing else
    changes.
    """

    def __init__(self, inner: Algorithm) -> None:
        super().__init__(inner)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        result = self.inner.finish(global_state, client, outcome)
        if result.events or self.inner.capability(OwnPrivacyAccounting) is not None:
            return result
        event = PrivacyEvent.no_guarantee(client.client_id, client.round,
                                          f"{self.inner.name} releases the client's update without noise (--privacy none)")
        return replace(result, events=(event,))

    def hyperparameters(self) -> dict:
        return self.inner.hyperparameters()

    def describe(self) -> dict:
        return self.inner.describe()
