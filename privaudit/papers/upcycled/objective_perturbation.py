"""Upcycled-FL's objective perturbation (003 Thm 6.3 = 000 Thm 5.3), as a privatizer around any algorithm.

The client minimises F_i(ω) + (μ/2)‖ω − ω̄‖² + ⟨n, ω⟩ with n of density ∝ exp(−α‖n‖) (the paper's Alg. 2 with its
noise). ``noise_law="reference"`` draws the reference code's noise instead (osu-srml/Upcycled-FL@4dd7400:client/avg.py,
audit point U6a/b); ``solver="exact"`` runs the theorem's own setting (the exact minimiser,
:mod:`privaudit.fl.engine.glm`); ``rng="clock-ms"`` seeds each draw from the clock as the reference does (audit point
U5, :class:`~privaudit.fl.privacy.perturbation.ClockSeeds`). Each release records Thm 6.3's per-round ε, a closed
form of the mechanism's parameters, as a :class:`~privaudit.accounting.mechanisms.PureDP` event with the theorem's
assumptions, each marked as holding or failing. Registered as ``--privacy objective-perturbation`` by
:mod:`privaudit.papers.upcycled.specs`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any

from privaudit.accounting.ledger import PrivacyEvent
from privaudit.accounting.mechanisms import Neighbouring, PureDP
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientDraws, ClientResult
from privaudit.fl.engine.capabilities import ClientSchedules, NeighbouringRelation
from privaudit.fl.engine.glm import ExactMinimiser, glm_feature_norms
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State, num_scalars
from privaudit.fl.privacy import clock_seed, noise
from privaudit.fl.privacy.perturbation import Clock, ClockSeeds, NoiseRng, clock_note


class ObjectiveNoiseLaw(str, Enum):
    PAPER = "paper"  # density ∝ exp(−α‖n‖) in d = #parameters
    REFERENCE = "reference"  # Gamma(feature_len, α) norm, cube direction (audit point U6a/b)


class ObjectiveSolver(str, Enum):
    SGD = "sgd"  # the local SGD of the federation (the reference code)
    EXACT = "exact"  # L-BFGS to a gradient tolerance (the theorem's setting)


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
        self._clock_seeds = ClockSeeds(clock)
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
        """The release's event: Thm 6.3's per-round ε (003; 000 Thm 5.3) with each of its assumptions checked on this
        client — μ > 0, u₂ ≤ 0.5|D|μ, a GLM loss with ‖v‖ ≤ 1, the noise law, the exact minimiser, the RNG."""
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
        rng_assumption, rng_failure = clock_note(cfg.rng)
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
