"""Record-level DP for every client's local training: DP-SGD in each objective, one privacy event per client and round.

:class:`LocalDP` wraps any algorithm (Flower's client-side DP wrapper pattern): it replaces the solver of
each training client's local objective by :class:`~privaudit.fl.privacy.dpsgd.DPSGD` with that client's noise
multiplier σ_i and Poisson rate q_i, and records ``PrivacyEvent(client, round, SubsampledGaussian(σ_i, q_i),
count=steps)`` for the steps the client actually took. This is the "LDP" of PrivateFL (001 Alg. 2, audit point P7:
record-level DP of each client's data against the server, not local DP in the classical sense) and the
local DP-SGD of PFA (004 Alg. 7).

Per-client budgets (ε_i, δ) are checked *before* a client trains (ledger pre-check: would this round's
steps take it over its budget?). ``budget_policy``:

* ``exclude`` (default) — the client sits the round out (it trains nothing and releases nothing);
* ``stop`` — the run stops: no client trains in this round or later (the remaining rounds keep the global
  model unchanged), like the reference PrivateFL code's ``break`` but *before* the overrun;
* ``record`` — the client trains anyway and the overrun is recorded (the event's note says so); what the
  reference code does in its last round (audit point P4).

:func:`calibrate_client_noise` calibrates σ_i from (ε, δ) (a :class:`CalibrationTarget`) for each client's planned steps under a named
participation policy: ``every-round`` (the client trains in all R rounds — conservative) or ``expected``
(E·R·sr epochs, the expected participation under client sampling at rate sr; what the newest reference
PrivateFL code passes to opacus' ``make_private_with_epsilon``, audit point P4).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from privaudit.accounting.calibrate import calibrate_noise
from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Composition, Neighbouring, SubsampledGaussian
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult
from privaudit.fl.engine.capabilities import NeighbouringRelation
from privaudit.fl.engine.local_solver import ClientSolver, LocalOutcome, LocalTask, TrainerView
from privaudit.fl.engine.local_training import LocalObjective
from privaudit.fl.engine.params import State
from privaudit.fl.privacy.dpsgd import DPSGD, steps_per_epoch


class BudgetPolicy(str, Enum):
    EXCLUDE = "exclude"
    STOP = "stop"
    RECORD = "record"

    @classmethod
    def parse(cls, value: str | BudgetPolicy) -> BudgetPolicy:
        if isinstance(value, BudgetPolicy):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown budget policy {value!r}; use 'exclude', 'stop' or 'record'")


class Participation(str, Enum):
    EVERY_ROUND = "every-round"  # the client may train in every one of the R rounds (conservative)
    EXPECTED = "expected"  # E·R·sr epochs: the reference code's calibration (audit point P4)

    @classmethod
    def parse(cls, value: str | Participation) -> Participation:
        return parse_enum(cls, value, "participation policy")


PerClient = float | Mapping[int, float]


def _per_client(value: Any, client: int, what: str) -> Any:
    if isinstance(value, Mapping):
        if client not in value:
            raise InvalidParameterError(f"no {what} was given for client {client}")
        return value[client]
    return value


@dataclass(frozen=True)
class LocalDPConfig:
    """σ (one for all, or per client), clip C, Poisson rate (None: batch/|D_i|), budgets and their policy."""

    noise_multiplier: PerClient
    clip_norm: float
    sample_rate: PerClient | None = None
    budget: tuple[float, float] | Mapping[int, tuple[float, float]] | None = None
    budget_policy: BudgetPolicy = BudgetPolicy.EXCLUDE
    accountant: str = "rdp"
    lr_scales: tuple[tuple[str, float], ...] = ()
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    #: DP-SGD steps per round (one for all, or per client); ``None``: the client's epochs × ⌈1/q⌉ (whole Poisson epochs)
    steps: PerClient | None = None

    def __post_init__(self) -> None:
        sigmas = self.noise_multiplier.values() if isinstance(self.noise_multiplier, Mapping) else [self.noise_multiplier]
        for sigma in sigmas:
            if not float(sigma) > 0 or math.isinf(float(sigma)):
                raise InvalidParameterError(f"local DP needs finite noise multipliers σ > 0, got {sigma}")
        if not float(self.clip_norm) > 0 or math.isinf(float(self.clip_norm)):
            raise InvalidParameterError(f"local DP needs a finite clipping norm C > 0, got {self.clip_norm}")
        rates = [] if self.sample_rate is None else (self.sample_rate.values() if isinstance(self.sample_rate, Mapping) else [self.sample_rate])
        for q in rates:
            if not 0 < float(q) <= 1:
                raise InvalidParameterError(f"a DP-SGD sampling rate must lie in (0, 1], got {q}")
        object.__setattr__(self, "budget_policy", BudgetPolicy.parse(self.budget_policy))
        counts = [] if self.steps is None else (self.steps.values() if isinstance(self.steps, Mapping) else [self.steps])
        for count in counts:
            if isinstance(count, bool) or int(count) != count or int(count) < 1:
                raise InvalidParameterError(f"DP-SGD steps per round must be positive integers, got {count!r}")

    def sigma(self, client: int) -> float:
        return float(_per_client(self.noise_multiplier, client, "noise multiplier"))

    def rate(self, client: int, num_examples: int, batch_size: int) -> float:
        if self.sample_rate is None:
            return min(1.0, batch_size / max(num_examples, 1))
        return float(_per_client(self.sample_rate, client, "sampling rate"))

    def budget_for(self, client: int) -> tuple[float, float] | None:
        if self.budget is None:
            return None
        if isinstance(self.budget, Mapping):
            return self.budget.get(client)
        return self.budget

    def to_dict(self) -> dict[str, Any]:
        def plain(value: Any) -> Any:
            return {str(k): v for k, v in value.items()} if isinstance(value, Mapping) else value

        budget = self.budget
        if isinstance(budget, Mapping):
            budget = {str(k): list(v) for k, v in budget.items()}
        return {
            "noise_multiplier": plain(self.noise_multiplier),
            "clip_norm": float(self.clip_norm),
            "sample_rate": plain(self.sample_rate),
            "budget": list(budget) if isinstance(budget, tuple) else budget,
            "budget_policy": self.budget_policy.value,
            "accountant": self.accountant,
            **({} if self.steps is None else {"steps": plain(self.steps)}),
        }


@dataclass
class _Plan:
    """What LocalDP decided for one client in one round."""

    sigma: float
    rate: float
    steps: int
    trains: bool
    overrun: bool = False


class LocalDP(AlgorithmWrapper, NeighbouringRelation):
    """DP-SGD in every training client's objective, with per-client σ_i, events and budget pre-checks."""

    prefix = "ldp"
    neighbouring = Neighbouring.ADD_REMOVE  # Poisson sampling of records: add/remove-one neighbours

    def __init__(self, inner: Algorithm, config: LocalDPConfig) -> None:
        super().__init__(inner)
        if not isinstance(config, LocalDPConfig):
            raise InvalidParameterError("LocalDP needs a LocalDPConfig")
        self.config = config
        self.ledger = PrivacyLedger(neighbouring=Neighbouring.ADD_REMOVE)
        self.excluded: dict[int, list[int]] = {}
        self.overruns: dict[int, list[int]] = {}
        self.stopped_at: int | None = None
        self._plans: dict[tuple[int, int], _Plan] = {}

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.inner.name}+ldp"

    def setup(self, context) -> None:
        super().setup(context)
        self.ledger = PrivacyLedger(neighbouring=Neighbouring.ADD_REMOVE)
        self.excluded, self.overruns, self.stopped_at, self._plans = {}, {}, None, {}
        for client in range(context.num_clients):
            budget = self.config.budget_for(client)
            if budget is not None:
                self.ledger.set_budget(client, *budget)

    @property
    def budgets(self) -> dict[str, tuple[float, float]]:
        """Per-client (ε, δ) budgets, for the federation's ledger."""
        return {cid: (b.epsilon, b.delta) for cid, b in self.ledger.budgets.items()}

    # -- rounds ------------------------------------------------------------------------------------
    def trains_clients(self, round: int) -> bool:
        return self.stopped_at is None and self.inner.trains_clients(round)

    def server_update(self, round: int, global_state: State) -> State:
        if self.stopped_at is not None:
            return P.clone(global_state)
        return self.inner.server_update(round, global_state)

    def _plan(self, client: ClientContext) -> _Plan:
        batch_size = self.context.trainer.local.batch_size if self.context.trainer is not None else 64
        sigma = self.config.sigma(client.client_id)
        rate = self.config.rate(client.client_id, client.num_examples, batch_size)
        if self.config.steps is None:
            steps = client.epochs * steps_per_epoch(rate)
        else:
            steps = int(_per_client(self.config.steps, client.client_id, "step count"))
        plan = _Plan(sigma, rate, steps, trains=True)
        if self.stopped_at is not None:
            plan.trains = False
            return plan
        mechanism = SubsampledGaussian(sigma, rate)
        within = self.ledger.can_participate(client.client_id, mechanism, steps, accountant=self.config.accountant)
        if within:
            return plan
        policy = self.config.budget_policy
        if policy is BudgetPolicy.RECORD:
            plan.overrun = True
            self.overruns.setdefault(client.round, []).append(client.client_id)
        elif policy is BudgetPolicy.EXCLUDE:
            plan.trains = False
            self.excluded.setdefault(client.round, []).append(client.client_id)
        else:
            plan.trains = False
            self.stopped_at = client.round
        return plan

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        plan = self._plan(client)
        self._plans[(client.training_round, client.client_id)] = plan
        objective = self.inner.local_objective(global_state, client)
        if not plan.trains:
            return replace(objective, solver=objective.solver.with_solver(SkipTraining()))
        solver = DPSGD(plan.sigma, self.config.clip_norm, plan.rate, lr_scales=self.config.lr_scales,
                       steps=None if self.config.steps is None else plan.steps)
        return replace(objective, solver=objective.solver.with_solver(solver))

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        plan = self._plans.pop((client.training_round, client.client_id))
        stopped_now = self.stopped_at is not None and self.stopped_at == client.round
        if not plan.trains or stopped_now:
            return ClientResult(client.client_id, 0, P.clone(global_state), 0.0, 0, 0, info={"excluded": True})
        result = self.inner.finish(global_state, client, outcome)
        mechanism = SubsampledGaussian(plan.sigma, plan.rate)
        note = "over budget: the client trained although this round takes it past its ε (budget policy 'record')" if plan.overrun else ""
        event = PrivacyEvent(
            client_id=str(client.client_id),
            round=client.round,
            mechanism=mechanism,
            count=outcome.steps,
            assumptions=(
                f"DP-SGD (Abadi et al. 2016) on client {client.client_id}: Poisson sampling at rate q = {plan.rate:.6g}, "
                f"per-example clip C = {self.config.clip_norm:g}, noise N(0, σ²C²) with σ = {plan.sigma:.6g} added once to the "
                "clipped sum, divided by the expected batch size",
                "record-level add/remove neighbours within the client's local data",
                *self.config.assumptions,
            ),
            valid=True,
            note=note,
        )
        self.ledger.record(event)
        return replace(result, events=(*result.events, event), info={**result.info, **outcome.info})

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        kept = [r for r in results if not r.info.get("excluded")]
        if not kept:
            return P.clone(global_state)
        return self.inner.aggregate(round, global_state, kept)

    def hyperparameters(self) -> dict[str, Any]:
        return {
            **self.config.to_dict(),
            "excluded": {str(k): v for k, v in self.excluded.items()},
            "overruns": {str(k): v for k, v in self.overruns.items()},
            "stopped_at": self.stopped_at,
        }

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "privacy": {"mechanism": "local-dp-sgd", **self.hyperparameters()}, "wraps": self.inner.describe()}


@dataclass(frozen=True)
class SkipTraining(ClientSolver):
    """A client that sits the round out: no training, nothing released (LocalDP's excluded clients)."""

    kind: str = "skip"

    def train_client(self, trainer: TrainerView, global_state: State, task: LocalTask, training_round: int) -> LocalOutcome:
        return LocalOutcome(task.client_id, P.clone(global_state), steps=0, epochs=0, mean_loss=0.0, info={"excluded": True})


# -- calibration ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClientNoise:
    """One client's calibrated DP-SGD noise: σ, its Poisson rate and the steps it was calibrated for."""

    noise_multiplier: float
    sample_rate: float
    planned_steps: int


def planned_steps(participation: Participation | str, rounds: int, epochs: int, rate: float, client_rate: float) -> int:
    """Steps σ is calibrated for: R·E·⌈1/q⌉ (``every-round``) or ⌊E·R·sr·⌈1/q⌉⌋ (``expected``, audit point P4)."""
    policy = Participation.parse(participation)
    per_epoch = steps_per_epoch(rate)
    if policy is Participation.EVERY_ROUND:
        return rounds * epochs * per_epoch
    return max(1, math.floor(epochs * rounds * client_rate * per_epoch + 1e-9))


class RateRule(str, Enum):
    """How a client's Poisson rate q_i follows from its data when no rate is given."""

    BATCH = "batch"  # q = B/|D_i| (expected batch B; privaudit's default)
    #: q = 1/⌈|D_i|/B⌉ = 1/len(DataLoader): what opacus' ``make_private_with_epsilon`` uses for a DataLoader of batch B
    #: (its DPDataLoader samples at 1/len(data_loader)); the PrivateFL reference code's LDP clients
    LOADER = "loader"

    @classmethod
    def parse(cls, value: str | RateRule) -> RateRule:
        return parse_enum(cls, value, "sampling-rate rule")


def client_sample_rate(size: int, batch_size: int, rule: RateRule | str = RateRule.BATCH) -> float:
    """q_i of a client with ``size`` records and batch ``batch_size`` under ``rule`` (:class:`RateRule`)."""
    size = max(int(size), 1)
    if RateRule.parse(rule) is RateRule.LOADER:
        return 1.0 / math.ceil(size / int(batch_size))
    return min(1.0, batch_size / size)


@dataclass(frozen=True)
class CalibrationTarget:
    """What every client's σ_i is calibrated for: (ε, δ) over the DP-SGD steps of ``rounds`` rounds of ``epochs`` local
    epochs under a ``participation`` policy (client sampling rate ``client_rate``, :func:`planned_steps`), with the
    accountant ``accountant``. The Poisson rate q_i is ``sample_rate``, or follows from the client's size and
    ``batch_size`` by ``rate_rule`` (batch_size/|D_i|, or opacus' 1/⌈|D_i|/B⌉)."""

    epsilon: float
    delta: float
    rounds: int
    epochs: int
    batch_size: int
    participation: Participation | str = Participation.EVERY_ROUND
    client_rate: float = 1.0
    sample_rate: float | None = None
    accountant: str = "rdp"
    rate_rule: RateRule | str = RateRule.BATCH

    def __post_init__(self) -> None:
        if not float(self.epsilon) > 0 or math.isinf(float(self.epsilon)):
            raise InvalidParameterError(f"the target ε must be a positive finite number, got {self.epsilon}")

    def rate(self, size: int) -> float:
        """q_i of a client with ``size`` records."""
        return float(self.sample_rate) if self.sample_rate is not None else client_sample_rate(size, self.batch_size, self.rate_rule)


def calibrate_client_noise(client_sizes: Sequence[int], target: CalibrationTarget) -> dict[int, ClientNoise]:
    """σ_i per client: the smallest σ with ε(SubsampledGaussian(σ, q_i)^{steps_i}, δ) ≤ ε (clients of equal q share one),
    for the :class:`CalibrationTarget` ``target``; steps_i from :func:`planned_steps`."""
    if not isinstance(target, CalibrationTarget):
        raise InvalidParameterError("calibrate_client_noise needs a CalibrationTarget")
    out: dict[int, ClientNoise] = {}
    memo: dict[tuple[float, int], float] = {}
    for client, size in enumerate(client_sizes):
        rate = target.rate(size)
        steps = planned_steps(target.participation, target.rounds, target.epochs, rate, target.client_rate)
        key = (rate, steps)
        if key not in memo:
            memo[key] = calibrate_noise(
                lambda sigma, r=rate, s=steps: Composition.of(SubsampledGaussian(sigma, r), s),
                target.epsilon, target.delta, accountant=target.accountant,
            ).noise_multiplier
        out[client] = ClientNoise(memo[key], rate, steps)
    return out
