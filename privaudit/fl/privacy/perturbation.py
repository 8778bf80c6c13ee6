"""Privatizers as wrappers around any algorithm (Flower's ``dp_fixed_clipping`` pattern), with their events.

* :class:`OutputPerturbation` — Upcycled-FL's output perturbation (000 §5, 003 §6; Thm 6.2): each
  training client clips its local model to norm τ and adds N(0, s²I). Default s = σ (the paper);
  ``noise_std="sigma-squared"`` draws s = σ² as the reference code does (``torch.normal(0, sigma**2)``, audit point U1).
* :class:`ObjectivePerturbation` — Upcycled-FL's objective perturbation (Thm 6.3): the client minimises
  F_i(ω) + (μ/2)‖ω − ω̄‖² + ⟨n, ω⟩ with n of density ∝ exp(−α‖n‖). ``noise_law="reference"`` draws the
  reference code's noise (audit point U6a/b); ``solver="exact"`` runs the theorem's own setting (exact minimiser,
  :mod:`privaudit.fl.engine.glm`).
* ``rng="clock-ms"`` seeds each draw from the clock's milliseconds as the reference code does (≤ 1000
  distinct noise draws, audit point U5). By default the clock is the simulated one of
  :mod:`privaudit.fl.privacy.clock_seed`: one read per client in the reference's processing order, about 35 ms
  apart, drawn from the run's seed (reproducible), and, as the reference's ``manual_seed(clock)`` reseeds the
  global generator, the next client's straggler draw and mini-batch order (output perturbation) or the client's
  own (objective perturbation) follow from the same millisecond seed (:meth:`client_draws`). An injected
  ``clock`` callable is read once per release instead (no coupling), so audits can fix the seeds. The default
  ``rng`` draws from the run's seeded stream ("output-noise"/"objective-noise", training round, client).

Wrapped around X and inside :class:`~privaudit.fl.algorithms.upcycled.Upcycled`, a privatizer acts only in
the rounds that train clients (Upcycled-FL's odd rounds). Each release records a
:class:`~privaudit.accounting.ledger.PrivacyEvent` with the assumptions its accounting rests on; an event
whose assumptions are known to fail is recorded with ``valid=False`` and a note. ε is never computed here,
except that Thm 6.3's per-round ε, a closed form of the mechanism's parameters, is what the theorem's
:class:`~privaudit.accounting.mechanisms.PureDP` event states.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.accounting.mechanisms import Gaussian, Neighbouring, PureDP
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientDraws, ClientResult
from privaudit.fl.engine.capabilities import (
    ClientSchedules,
    NeighbouringRelation,
    OwnPrivacyAccounting,
    ReleaseBound,
)
from privaudit.fl.engine.glm import ExactMinimiser, glm_feature_norms
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State, num_scalars
from privaudit.fl.privacy import clock_seed, noise

Clock = Callable[[], float]


class _ClockSeeds:
    """The reference code's clock seeds for a privatizer: the simulated clock of
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


class ObjectiveNoiseLaw(str, Enum):
    PAPER = "paper"  # density ∝ exp(−α‖n‖) in d = #parameters
    REFERENCE = "reference"  # Gamma(feature_len, α) norm, cube direction (audit point U6a/b)


class ObjectiveSolver(str, Enum):
    SGD = "sgd"  # the local SGD of the federation (the reference code)
    EXACT = "exact"  # L-BFGS to a gradient tolerance (the theorem's setting)


def _clock_note(rng: NoiseRng) -> tuple[str, str | None]:
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
    """Clip each training client's released model to norm τ and add Gaussian noise (Thm 6.2's mechanism)."""

    mechanism_name = "output-perturbation"

    def __init__(self, inner: Algorithm, config: OutputPerturbationConfig, *, clock: Clock | None = None) -> None:
        super().__init__(inner)
        self.config = config
        self.clock = clock
        self._clock_seeds = _ClockSeeds(clock)

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
            assumptions.append(
                f"sensitivity τ/|D_i| = {cfg.clip:g}/{size} per Upcycled-FL Thm 6.2 (000 Thm 5.2): the clipped model is treated "
                "as an average of per-example terms bounded by τ, add-one neighbours (unverified for SGD-trained models, audit point U2)"
            )
        else:
            sensitivity = 2 * cfg.clip
            assumptions.append(f"sensitivity 2τ = {2 * cfg.clip:g}: any two clipped models lie in the τ-ball")
        if cfg.noise_std is NoiseStd.SIGMA:
            assumptions.append(f"noise std σ = {cfg.sigma:g} as the paper states")
        else:
            assumptions.append(f"noise std σ² = {cfg.std:g} (σ = {cfg.sigma:g}) as the reference code draws it (audit point U1)")
        rng_assumption, rng_failure = _clock_note(cfg.rng)
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


@dataclass(frozen=True)
class ObjectivePerturbationConfig:
    """α of the noise density, its law and RNG, the local solver, and the loss constants of Thm 6.3.

    u₁ = 1 and u₂ = 1/4 are the log-loss constants 000 App. F.2 uses (valid when ‖v‖ ≤ 1).
    """

    alpha: float
    noise_law: ObjectiveNoiseLaw = ObjectiveNoiseLaw.PAPER
    rng: NoiseRng = NoiseRng.SEEDED
    solver: ObjectiveSolver = ObjectiveSolver.SGD
    grad_tol: float = 1e-6
    max_iter: int = 1000
    u1: float = 1.0
    u2: float = 0.25

    def __post_init__(self) -> None:
        if not isinstance(self.alpha, int | float) or not self.alpha > 0 or math.isinf(self.alpha):
            raise InvalidParameterError(f"objective perturbation needs a finite positive α, got {self.alpha!r}")
        object.__setattr__(self, "noise_law", parse_enum(ObjectiveNoiseLaw, self.noise_law, "objective noise law"))
        object.__setattr__(self, "rng", parse_enum(NoiseRng, self.rng, "noise RNG"))
        object.__setattr__(self, "solver", parse_enum(ObjectiveSolver, self.solver, "objective-perturbation solver"))
        if not self.grad_tol > 0 or int(self.max_iter) < 1 or not self.u1 > 0 or not self.u2 > 0:
            raise InvalidParameterError("objective perturbation needs grad_tol > 0, max_iter ≥ 1, u₁ > 0 and u₂ > 0")

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(self).items()}


def objective_round_epsilon(alpha: float, u1: float, u2: float, mu: float, num_examples: int) -> float:
    """One odd round's term of Upcycled-FL Thm 6.3 (000 Thm 5.3): (2α u₁ μ + 2.8 u₂) / (|D_i| μ); ∞ when μ = 0."""
    if mu <= 0:
        return math.inf
    return (2 * alpha * u1 * mu + 2.8 * u2) / (num_examples * mu)


class ObjectivePerturbation(AlgorithmWrapper, NeighbouringRelation, ClientSchedules):
    """Add ⟨n, ω⟩ to each training client's local objective (Thm 6.3's mechanism)."""

    mechanism_name = "objective-perturbation"
    #: Thm 6.3's proof bounds a rank-2 Hessian difference: the two datasets differ by one *replaced* record.
    neighbouring = Neighbouring.REPLACE_ONE

    def __init__(self, inner: Algorithm, config: ObjectivePerturbationConfig, *, clock: Clock | None = None) -> None:
        super().__init__(inner)
        self.config = config
        self.clock = clock
        self._clock_seeds = _ClockSeeds(clock)
        self._pending: dict[int, dict[str, Any]] = {}

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.inner.name}+{self.mechanism_name}"

    def setup(self, context) -> None:
        super().setup(context)
        self._pending = {}
        self._clock_seeds.setup(context.seeds)

    def client_draws(self, training_round: int, sampled: Sequence[int], epochs: Sequence[int], config) -> ClientDraws | None:
        """With the simulated clock: one millisecond seed per client, and — as the reference reseeds the global
        generator at the start of ``update_weights`` — each client's straggler draw and shuffles follow its own noise
        draws under that seed (:mod:`~privaudit.fl.privacy.clock_seed`)."""
        if self.config.rng is not NoiseRng.CLOCK_MS or not self._clock_seeds.emulated:
            return ClientSchedules.of(self.inner).client_draws(training_round, sampled, epochs, config)
        planned = self._clock_seeds.plan(training_round, sampled)
        trainable = {n: self.context.initial_state[n] for n in self.context.trainable}
        feature_len = math.prod(self.context.input_shape) if self.config.noise_law is ObjectiveNoiseLaw.REFERENCE else None
        draw = clock_seed.objective_noise_draws(trainable, self.config.alpha, feature_len=feature_len)
        drawn = {}
        for client, seed in zip(planned.order, planned.seeds, strict=True):
            generator = clock_seed.after_global_draw(seed, draw)
            drawn[client] = clock_seed.coupled_draws(generator, num_examples=self.context.client_sizes[client],
                                                     epochs=config.local.epochs, batch_size=config.local.batch_size,
                                                     straggler=config.stragglers)
        return ClientDraws(epochs=tuple(drawn[c][0] for c in sampled), schedules=tuple(drawn[c][1] for c in sampled))

    def _seed(self, client: ClientContext) -> int:
        if self.config.rng is NoiseRng.CLOCK_MS:
            return self._clock_seeds.seed(client)
        return client.seeds.integer("objective-noise", client.training_round, client.client_id)

    def draw_noise(self, like: State, client: ClientContext) -> State:
        """The noise n for one client's round (trainable parameters only)."""
        seed = self._seed(client)
        if self.config.noise_law is ObjectiveNoiseLaw.PAPER:
            return noise.objective_noise_paper(like, self.config.alpha, seed)
        feature_len = math.prod(self.context.input_shape)  # the reference's ``feature_len``: 20, 784, 256
        return noise.objective_noise_reference(like, self.config.alpha, feature_len, seed)

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        objective = self.inner.local_objective(global_state, client)
        trainable = {n: global_state[n] for n in self.context.trainable}
        drawn = self.draw_noise(trainable, client)
        linear = {k: (drawn[k] if k in drawn else v.new_zeros(v.shape)) for k, v in global_state.items()}
        if self.config.solver is ObjectiveSolver.EXACT:
            objective = replace(objective, solver=ExactMinimiser(self.config.grad_tol, int(self.config.max_iter)))
        self._pending[client.client_id] = {"mu": objective.prox, "dimension": num_scalars(trainable)}
        return objective.plus_linear(linear)

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        result = self.inner.finish(global_state, client, outcome)
        pending = self._pending.pop(client.client_id)
        event = self._event(client, pending["mu"], pending["dimension"], outcome.info, sorted(result.extras))
        return replace(result, events=(*result.events, event))

    def _event(self, client: ClientContext, mu: float, dimension: int, info: dict, unprivatised: Sequence[str]) -> PrivacyEvent:
        cfg, size = self.config, client.num_examples
        checks: list[tuple[bool, str]] = []
        checks.append((mu > 0, f"μ > 0 (proximal coefficient μ = {mu:g})"))
        checks.append((mu > 0 and cfg.u2 <= 0.5 * size * mu, f"u₂ ≤ 0.5|D_i|μ (u₂ = {cfg.u2:g}, 0.5|D_i|μ = {0.5 * size * mu:g})"))
        norms = glm_feature_norms(self.context.model, client.data.x_train)
        if norms is None:
            checks.append((False, "the loss is a scalar GLM F̂(θᵀv, y) (the model is not one linear map to 2 classes)"))
        else:
            largest = float(norms.max())
            checks.append((True, "the loss is a scalar GLM F̂(θᵀv, y) (log loss)"))
            checks.append((largest <= 1.0 + 1e-9, f"‖v‖ ≤ 1 for every local example, so ‖∇F̂‖ < u₁ = {cfg.u1:g} (max ‖v‖ = {largest:.4g})"))
        if cfg.noise_law is ObjectiveNoiseLaw.PAPER:
            checks.append((True, f"noise density ∝ exp(−α‖n‖) in d = {dimension} dimensions: Gamma(d, α) norm, uniform direction"))
        else:
            checks.append((False, "noise as the reference code draws it: Gamma(feature_len, α) norm and a cube direction, not the density ∝ exp(−α‖n‖) (audit point U6a/b)"))
        if cfg.solver is ObjectiveSolver.EXACT:
            reached = float(info.get("grad_norm", math.inf))
            checks.append((reached <= cfg.grad_tol, f"exact minimiser: L-BFGS gradient norm {reached:.3g} ≤ tolerance {cfg.grad_tol:g}"))
        else:
            checks.append((False, "exact minimiser of the perturbed objective (local SGD returns an approximate one, audit point U6c)"))
        rng_assumption, rng_failure = _clock_note(cfg.rng)
        checks.append((rng_failure is None, rng_assumption))
        if unprivatised:
            checks.append((False, f"nothing else is released (the client also releases {', '.join(unprivatised)})"))
        failures = [text for ok, text in checks if not ok]
        epsilon = objective_round_epsilon(cfg.alpha, cfg.u1, cfg.u2, mu, size)
        assumptions = (
            f"ε per odd round = (2α u₁ μ + 2.8 u₂)/(|D_i| μ) per Upcycled-FL Thm 6.3 (000 Thm 5.3) with α = {cfg.alpha:g}, "
            f"u₁ = {cfg.u1:g}, u₂ = {cfg.u2:g}, μ = {mu:g}, |D_i| = {size}; replace-one neighbours",
            *[("holds: " if ok else "fails: ") + text for ok, text in checks],
        )
        return PrivacyEvent(
            client_id=str(client.client_id),
            round=client.round,
            mechanism=PureDP(epsilon=epsilon, proven_for=Neighbouring.REPLACE_ONE),
            count=1,
            assumptions=assumptions,
            valid=not failures,
            note="; ".join("fails: " + f for f in failures),
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
