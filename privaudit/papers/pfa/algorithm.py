"""PFA, PFA+, WeiAvg and FedAvg under heterogeneous per-client DP, with the paper's baselines (004 Alg. 1–5, 7).

One round (Alg. 2 / Alg. 4) as :class:`HeterogeneousDP` runs it inside the federation's loop:

1. *Pre-check and sampling* (``select_clients``, :mod:`privaudit.papers.pfa.budget_participation`): K of the M
   clients, uniformly among those whose next round stays within their budget; training stops when fewer
   than K remain (the reference code's rule; the paper's T* = KT/M is only an expectation, spec F2).
2. *Client division* (:mod:`privaudit.papers.pfa.public_private`): the sampled clients S_t into S^pub and S^pri
   (Alg. 2 line 5; GMM, k-means or top-K over all clients' budgets, or re-clustered per sample).
3. *Local DP-SGD* (Alg. 7): every sampled client runs DP-SGD with its own σ_m
   (:mod:`privaudit.papers.pfa.budget_calibration`) through :class:`privaudit.fl.privacy.local_dp.LocalDP`, which records one
   ``SubsampledGaussian(σ_m, q_m)`` event per client and round with the steps taken. The update is
   Δx^m = x − x_τ^m.
4. *Aggregation* (the server), one of:

   * ``fedavg-hdp`` — FedAvg of the noisy updates (example-weighted; equal client sizes: the mean);
   * ``weiavg`` — Alg. 1: Δx̄ = Σ_m W(ε_m)Δx^m, W_S(ε_m) = ε_m/Σ_{S} ε;
   * ``pfa`` — Alg. 3: Δx̄^pub = Σ_pub W(ε)Δx, V_k ← top-k eigenvectors of Δx̄^pub(Δx̄^pub)ᵀ
     (:mod:`privaudit.papers.pfa.projection`, never forming the p×p matrix), Δx̂^pri = V_kV_kᵀ Σ_pri W(ε)Δx,
     Δx̄ = (Σ_pub ε/Σ ε)·Δx̄^pub + (Σ_pri ε/Σ ε)·Δx̂^pri. ``projection="reference"`` runs the reference
     code's centred variant (spec F4);
   * ``pfa-plus`` — Alg. 4/5: a private client uploads only V_k[t−1]ᵀΔx^m (k numbers per block) against the
     subspace the server computed from the *previous* round's public updates; the server reconstructs
     V_k[t−1]·Σ_pri W(ε)·(coefficients); public clients upload in full and define V_k[t] for the next round.
     The warm-up round (no previous subspace yet) is a PFA round with every client uploading in full;
   * ``public-only`` — FedAvg over the public clients of each sample only (private clients do not train and
     spend nothing): the audit's baseline for what PFA's aggregate collapses to (spec F4).

Baselines (§5.1): ``minimum`` / ``maximum`` are ``fedavg-hdp`` with every client calibrated at min ε_m /
max ε_m (the ledger keeps each client's own ε_m, so Maximum shows as over budget for the private clients);
``np-fedavg`` trains without DP.

Blocks: the paper's Alg. 3 is printed for the flattened update (``projection_scope="model"``); its PFA+
communication analysis projects "the original parameters in a given layer" (2kF bits per round for a
logistic regression's two tensors), and the reference code projects every tensor separately. The default is
``projection_scope="tensor"`` for both PFA and PFA+, so they share one subspace definition.

Local steps: :class:`~privaudit.fl.privacy.dpsgd.DPSGD` runs whole epochs of ⌈1/q⌉ Poisson steps, so τ local steps
are realised as E_m = max(1, round(τ/⌈1/q_m⌉)) epochs, i.e. E_m·⌈1/q_m⌉ steps per round (87 for τ = 100,
|D_m| = 225, B = 8); the realised τ_m is what the calibration plans for and what the ledger records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

import torch

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.accounting.mechanisms import Neighbouring
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine import params as P
from privaudit.fl.engine.config import ClientSampling, FederationConfig
from privaudit.fl.engine.local_training import SGD, LocalObjective
from privaudit.fl.engine.params import State
from privaudit.papers.pfa.budget_calibration import (
    CalibrationMethod,
    ClientCalibration,
    PlannedSteps,
    calibrate_clients,
    local_schedule,
)
from privaudit.papers.pfa.budget_participation import BudgetedSampler, BudgetGate, PrecheckPolicy
from privaudit.papers.pfa.budgets import NonPositiveBudgets, PrivacyBudgets, resolve_budgets
from privaudit.papers.pfa.projection import EigenSolver, ProjectionForm, Subspace, public_subspace
from privaudit.papers.pfa.public_private import Split, SplitMethod, SplitScope, split_clients
from privaudit.papers.pfa.uplink import UplinkLedger, full_update_bytes, projected_update_bytes


class Rule(str, Enum):
    """The server's aggregation rule."""

    FEDAVG_HDP = "fedavg-hdp"
    WEIAVG = "weiavg"
    PFA = "pfa"
    PFA_PLUS = "pfa-plus"
    PUBLIC_ONLY = "public-only"

    @property
    def projects(self) -> bool:
        return self in (Rule.PFA, Rule.PFA_PLUS)


class Operating(str, Enum):
    """The budget each client's noise is calibrated for."""

    OWN = "own"  # ε_m (the paper's heterogeneous DP)
    MINIMUM = "minimum"  # min_m ε_m for every client (baseline "Minimum")
    MAXIMUM = "maximum"  # max_m ε_m for every client (baseline "Maximum")


class NoPublic(str, Enum):
    """A PFA round whose sample holds no public client."""

    WEIAVG = "weiavg"  # aggregate that round by WeiAvg (the paper does not say; PFA+ reuses its last subspace)
    RESAMPLE = "resample"  # redraw the sample up to 50 times until it holds a public client (reference code)


class ProjectionScope(str, Enum):
    TENSOR = "tensor"
    MODEL = "model"


def _parse(enum: type[Enum], value: Any, what: str) -> Any:
    if isinstance(value, enum):
        return value
    key = str(value).strip().lower().replace("_", "-")
    for member in enum:
        if member.value == key:
            return member
    raise InvalidParameterError(f"unknown {what} {value!r}; use {', '.join(repr(m.value) for m in enum)}")


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if int(value) < 1:
        raise InvalidParameterError(f"{name} must be at least 1, got {int(value)}")
    return int(value)


@dataclass(frozen=True)
class PFASettings:
    """Everything the PFA family adds to a federation's configuration (validated here, once).

    Defaults are the paper's behaviour; reference-code behaviour is a named value: ``calibration="reference"``,
    ``projection="reference"``, ``split="topk"`` with ``public_clients=⌊0.1·M⌋``, ``no_public="resample"``,
    ``reference-*`` budget distributions.
    """

    rule: Rule = Rule.PFA
    operating: Operating = Operating.OWN
    private: bool = True
    budgets: str = "mixgauss1"
    budget_seed: int | None = None
    nonpositive: NonPositiveBudgets = NonPositiveBudgets.REDRAW
    second_parameter: str | None = None
    delta: float = 1e-5
    clip_norm: float = 1.0
    calibration: CalibrationMethod = CalibrationMethod.RDP
    planned: PlannedSteps = PlannedSteps.EXPECTED
    local_steps: int = 100
    budget_policy: PrecheckPolicy = PrecheckPolicy.EXCLUDE
    split: SplitMethod = SplitMethod.GMM
    public_clients: int | None = None
    split_scope: SplitScope = SplitScope.POPULATION
    projection: ProjectionForm = ProjectionForm.PAPER
    projection_dims: int = 1
    projection_scope: ProjectionScope = ProjectionScope.TENSOR
    eigensolver: EigenSolver = EigenSolver.LANCZOS
    lanczos_iterations: int = 256
    no_public: NoPublic = NoPublic.WEIAVG

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "rule", _parse(Rule, self.rule, "aggregation rule"))
        set_(self, "operating", _parse(Operating, self.operating, "operating budget"))
        set_(self, "nonpositive", NonPositiveBudgets.parse(self.nonpositive))
        set_(self, "calibration", CalibrationMethod.parse(self.calibration))
        set_(self, "planned", PlannedSteps.parse(self.planned))
        set_(self, "budget_policy", PrecheckPolicy.parse(self.budget_policy))
        set_(self, "split", SplitMethod.parse(self.split))
        set_(self, "split_scope", SplitScope.parse(self.split_scope))
        set_(self, "projection", ProjectionForm.parse(self.projection))
        set_(self, "projection_scope", _parse(ProjectionScope, self.projection_scope, "projection scope"))
        set_(self, "eigensolver", EigenSolver.parse(self.eigensolver))
        set_(self, "no_public", _parse(NoPublic, self.no_public, "no-public policy"))
        set_(self, "projection_dims", _positive_int("projection dims k", self.projection_dims))
        set_(self, "local_steps", _positive_int("local steps", self.local_steps))
        set_(self, "lanczos_iterations", _positive_int("Lanczos iterations", self.lanczos_iterations))
        if self.public_clients is not None:
            set_(self, "public_clients", _positive_int("public clients", self.public_clients))
        if self.split is SplitMethod.TOPK and self.public_clients is None:
            raise InvalidParameterError("the top-K public/private split needs the number of public clients (--public-clients)")
        if self.split is not SplitMethod.TOPK and self.public_clients is not None:
            raise InvalidParameterError("--public-clients applies to the top-K split only (--split topk)")
        if not 0 < float(self.delta) < 1:
            raise InvalidParameterError(f"δ must lie in (0, 1), got {self.delta}")
        clip = float(self.clip_norm)
        if not clip > 0 or math.isinf(clip):
            raise InvalidParameterError(f"the DP-SGD clipping norm must be a positive finite number, got {self.clip_norm}")
        if self.second_parameter not in (None, "variance", "std"):
            raise InvalidParameterError(f"the budget distributions' second parameter is 'variance' or 'std', got {self.second_parameter!r}")
        if self.budget_seed is not None and (isinstance(self.budget_seed, bool) or int(self.budget_seed) < 0):
            raise InvalidParameterError(f"the budget seed must be a non-negative integer, got {self.budget_seed!r}")
        from privaudit.papers.pfa.budgets import check_budget_spec

        set_(self, "budgets", check_budget_spec(self.budgets))
        set_(self, "delta", float(self.delta))
        set_(self, "clip_norm", clip)

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(self).items()}


@dataclass(frozen=True)
class FixedEpochs:
    """A solver wrapper that runs its inner solver for ``epochs`` local epochs (PFA's τ local steps).

    :class:`~privaudit.fl.privacy.local_dp.LocalDP` swaps DP-SGD in through :meth:`with_solver`, keeping this wrapper.
    """

    inner: Any
    epochs: int
    kind: str = "fixed-epochs"

    def with_solver(self, solver: Any) -> FixedEpochs:
        return replace(self, inner=solver)

    def train_client(self, trainer, global_state: State, task, training_round: int):
        task = replace(task, epochs=self.epochs, objective=replace(task.objective, solver=self.inner))
        custom = getattr(self.inner, "train_client", None)
        if custom is not None:
            return custom(trainer, global_state, task, training_round)
        return trainer.train_one(global_state, task, training_round)


@dataclass
class RoundRecord:
    """What the server did in one training round (JSON-ready)."""

    round: int
    aggregation: str
    public: list[int]
    private: list[int]
    projected_uploads: int = 0
    dims: list[int] = field(default_factory=list)
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class ServerRule(Algorithm):
    """The inner algorithm LocalDP wraps: local objective (τ steps), client-side PFA+ projection, aggregation."""

    def __init__(self, owner: HeterogeneousDP) -> None:
        self.owner = owner
        self.name = owner.name

    def setup(self, context: SetupContext) -> None:
        self.context = context

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return LocalObjective(solver=FixedEpochs(SGD(), self.owner.epochs[client.client_id]))

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        result = super().finish(global_state, client, outcome)
        return self.owner.release(global_state, client, result)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        return self.owner.server_aggregate(round, global_state, results)


class HeterogeneousDP(Algorithm):
    """PFA / PFA+ / WeiAvg / FedAvg-HDP / public-only / Minimum / Maximum / NP-FedAvg (see the module docstring).

    Needs the federation's ``start_federation`` and ``select_clients`` hooks (it plans from the run's
    configuration, keeps the budgets in the run's ledger and chooses each round's clients).
    """

    neighbouring = Neighbouring.ADD_REMOVE
    #: Records its own privacy events (private clients); ``--privacy none`` adds none (public clients release by design).
    accounts_own_privacy = True

    def __init__(self, settings: PFASettings, name: str | None = None) -> None:
        if not isinstance(settings, PFASettings):
            raise InvalidParameterError("HeterogeneousDP needs PFASettings")
        self.settings = settings
        self.name = name or settings.rule.value
        self.rule = ServerRule(self)
        self.dp = None
        self.started = False

    # -- set-up --------------------------------------------------------------------------------------
    def setup(self, context: SetupContext) -> None:
        self.context = context
        self.rule.setup(context)
        self.dp = None
        self.started = False
        self.epochs: dict[int, int] = {}
        self.preferences: PrivacyBudgets | None = None
        self.operating_eps: list[float] = []
        self.calibrations: list[ClientCalibration] = []
        self.sampler: BudgetedSampler | None = None
        self.uplink = UplinkLedger()
        self.records: list[RoundRecord] = []
        self.previous: dict[str, Subspace] | None = None
        self._round = 0
        self._population_split: Split | None = None
        self.plan: dict[str, Any] = {}

    def start_federation(self, config: FederationConfig, ledger: PrivacyLedger) -> None:
        """Draw budgets, calibrate every client's σ_m, set the budgets in ``ledger`` and build the sampler."""
        s = self.settings
        context = self.context
        if config.sampling is not ClientSampling.FIXED_SIZE:
            raise InvalidParameterError("PFA samples K of M clients uniformly per round; use fixed-size client sampling")
        if config.stragglers > 0:
            raise InvalidParameterError("PFA's clients all run τ local steps; stragglers are not part of it (use --stragglers 0)")
        if context.trainer is None:
            raise InvalidParameterError("PFA needs the federation's trainer (run it through run_federation)")
        num_clients = context.num_clients
        per_round = max(math.floor(config.clients_per_round * num_clients + 1e-9), 1)
        seed = config.seed if s.budget_seed is None else int(s.budget_seed)
        self.preferences = resolve_budgets(s.budgets, num_clients, seed, delta=s.delta, nonpositive=s.nonpositive,
                                           second_parameter=s.second_parameter)
        prefs = list(self.preferences.epsilons)
        if s.operating is Operating.MINIMUM:
            self.operating_eps = [min(prefs)] * num_clients
        elif s.operating is Operating.MAXIMUM:
            self.operating_eps = [max(prefs)] * num_clients
        else:
            self.operating_eps = prefs
        self._check_split(per_round, num_clients)

        batch = context.trainer.local.batch_size
        schedules = [local_schedule(n, batch, s.local_steps) for n in context.client_sizes]
        rates = [q for q, _, _ in schedules]
        self.epochs = {m: schedules[m][1] for m in range(num_clients)}
        steps = [schedules[m][2] for m in range(num_clients)]
        gate = None
        if s.private:
            self.calibrations = calibrate_clients(self.operating_eps, rates, steps, delta=s.delta, clients_per_round=per_round,
                                                  rounds=config.rounds, method=s.calibration, planned=s.planned)
            for m, eps in enumerate(prefs):
                ledger.set_budget(m, eps, s.delta)
            gate = BudgetGate(self.calibrations, ledger)
            from privaudit.fl.privacy.local_dp import LocalDP, LocalDPConfig

            assumptions = (f"σ_m calibrated by {s.calibration.value} for ε_m over T*_m planned steps ({s.planned.value})",)
            self.dp = LocalDP(self.rule, LocalDPConfig(
                noise_multiplier={c.client_id: c.noise_multiplier for c in self.calibrations},
                clip_norm=s.clip_norm,
                sample_rate={c.client_id: c.sample_rate for c in self.calibrations},
                accountant=s.calibration.accountant or "rdp",
                assumptions=assumptions,
            ))
            self.dp.setup(context)
        if s.split_scope is SplitScope.POPULATION:
            self._population_split = split_clients(self.operating_eps, s.split, public_clients=s.public_clients,
                                                   seed=context.seeds.integer("pfa-split"))
        self.sampler = BudgetedSampler(
            num_clients, per_round, gate, self._divide, policy=s.budget_policy,
            require_public=s.rule.projects and s.no_public is NoPublic.RESAMPLE, public_only=s.rule is Rule.PUBLIC_ONLY,
        )
        self.plan = {
            "clients_per_round": per_round,
            "rounds": config.rounds,
            "batch_size": batch,
            "local_epochs": [self.epochs[m] for m in range(num_clients)],
            "local_steps_per_round": steps,
            "budgets": self.preferences.to_dict(),
            "operating_epsilons": list(self.operating_eps),
            "calibration": [c.to_dict() for c in self.calibrations],
            "population_split": None if self._population_split is None else self._population_split.to_dict(),
        }
        self.started = True

    def _check_split(self, per_round: int, num_clients: int) -> None:
        s = self.settings
        if s.split is SplitMethod.TOPK and s.public_clients > min(per_round, num_clients):
            raise InvalidParameterError(f"{s.public_clients} public clients is more than the {per_round} sampled per round")

    def _divide(self, clients: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        if self._population_split is not None:
            public = set(self._population_split.public)
            return tuple(c for c in clients if c in public), tuple(c for c in clients if c not in public)
        split = split_clients([self.operating_eps[c] for c in clients], self.settings.split,
                              public_clients=self.settings.public_clients,
                              seed=self.context.seeds.integer("pfa-split", self._round))
        return tuple(clients[i] for i in split.public), tuple(clients[i] for i in split.private)

    # -- rounds ----------------------------------------------------------------------------------------
    def _require_started(self) -> None:
        if not self.started:
            raise InvalidParameterError(f"{self.name} needs the federation's start_federation hook before the first round")

    def trains_clients(self, round: int) -> bool:
        self._require_started()
        self._round = int(round)
        return self.sampler.can_train(int(round))

    def select_clients(self, training_round: int, rng) -> list[int]:
        self._require_started()
        return self.sampler.sample(self._round, rng)

    def server_update(self, round: int, global_state: State) -> State:
        return P.clone(global_state)

    def _client(self, client: ClientContext) -> ClientContext:
        return replace(client, epochs=self.epochs[client.client_id])

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        inner = self.dp if self.dp is not None else self.rule
        return inner.local_objective(global_state, self._client(client))

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        inner = self.dp if self.dp is not None else self.rule
        return inner.finish(global_state, self._client(client), outcome)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        inner = self.dp if self.dp is not None else self.rule
        return inner.aggregate(round, global_state, results)

    # -- blocks ----------------------------------------------------------------------------------------
    def _blocks(self) -> list[tuple[str, tuple[str, ...]]]:
        names = tuple(self.context.trainable)
        if self.settings.projection_scope is ProjectionScope.MODEL:
            return [("model", names)]
        return [(n, (n,)) for n in names]

    @staticmethod
    def _flat(state: State, names: Sequence[str]) -> torch.Tensor:
        return torch.cat([state[n].reshape(-1).to(torch.float64) for n in names])

    def _unflat(self, vector: torch.Tensor, names: Sequence[str], like: State) -> State:
        out, offset = {}, 0
        for n in names:
            size = like[n].numel()
            out[n] = vector[offset : offset + size].reshape(like[n].shape)
            offset += size
        return out

    def _trainable_count(self) -> int:
        return sum(self.context.initial_state[n].numel() for n in self.context.trainable)

    # -- client side -----------------------------------------------------------------------------------
    def release(self, global_state: State, client: ClientContext, result: ClientResult) -> ClientResult:
        """What the client uploads: its full update, or (PFA+, private, after warm-up) Vᵀ(Δx − c) per block."""
        public, private = self.sampler.roles(client.round)
        role = "public" if client.client_id in public else "private" if client.client_id in private else "all"
        full = full_update_bytes(self._trainable_count())
        projected = self.settings.rule is Rule.PFA_PLUS and role == "private" and self.previous is not None
        if not projected:
            self.uplink.record(client.round, client.client_id, role, "full", full, full)
            return result
        coefficients, reconstructed = {}, dict(result.state)
        for block, names in self._blocks():
            update = self._flat(global_state, names) - self._flat(result.state, names)
            subspace = self.previous[block]
            coeff = subspace.coefficients(update)
            coefficients[block] = coeff.to(torch.float32)
            seen = subspace.reconstruct(coeff.to(torch.float32).to(torch.float64))
            for n, value in self._unflat(self._flat(global_state, names) - seen, names, global_state).items():
                reconstructed[n] = value.to(global_state[n].dtype)
        nbytes = projected_update_bytes([c.numel() for c in coefficients.values()])
        self.uplink.record(client.round, client.client_id, role, "projected", nbytes, full)
        extras = {**result.extras, "pfa_coefficients": coefficients}
        return replace(result, state=reconstructed, extras=extras, info={**result.info, "pfa_upload": "projected"})

    # -- server side -----------------------------------------------------------------------------------
    def server_aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        if not results:
            return P.clone(global_state)
        rule = self.settings.rule
        public, private = self.sampler.roles(round)
        present = {r.client_id for r in results}
        public = [c for c in public if c in present]
        private = [c for c in private if c in present]
        eps = {r.client_id: self.operating_eps[r.client_id] for r in results}
        if rule is Rule.FEDAVG_HDP or rule is Rule.PUBLIC_ONLY:
            weights = {r.client_id: float(r.num_examples) for r in results}
            self.records.append(RoundRecord(round, "fedavg", public, private))
            return self._apply(global_state, results, weights)
        if rule is Rule.WEIAVG:
            self.records.append(RoundRecord(round, "weiavg", public, private))
            return self._apply(global_state, results, eps)
        return self._projected(round, global_state, results, public, private, eps)

    def _apply(self, global_state: State, results: Sequence[ClientResult], weights: dict[int, float]) -> State:
        """x − Σ_m w_m Δx^m / Σ w (= Σ w_m x^m / Σ w for every state entry)."""
        return P.weighted_average([r.state for r in results], [weights[r.client_id] for r in results])

    def _projected(self, round: int, global_state: State, results: Sequence[ClientResult], public: list[int], private: list[int],
                   eps: dict[int, float]) -> State:
        s = self.settings
        by_client = {r.client_id: r for r in results}
        plus = s.rule is Rule.PFA_PLUS
        warm = self.previous is None
        if not public and (warm or not plus):
            self.records.append(RoundRecord(round, "weiavg", public, private, note="no public client in the sample: WeiAvg this round"))
            return self._apply(global_state, results, eps)
        eps_pub = sum(eps[c] for c in public)
        eps_pri = sum(eps[c] for c in private)
        total = eps_pub + eps_pri
        new_state = P.clone(global_state)
        current: dict[str, Subspace] = {}
        dims: list[int] = []
        projected_uploads = sum(1 for c in private if "pfa_coefficients" in by_client[c].extras)
        if projected_uploads not in (0, len(private)):  # pragma: no cover - uploads follow one subspace per round
            raise RuntimeError("PFA+ received projected and full private updates in one round")
        for index, (block, names) in enumerate(self._blocks()):
            base = self._flat(global_state, names)
            pub_updates = [base - self._flat(by_client[c].state, names) for c in public]
            pub_weights = [eps[c] for c in public]
            if public:
                current[block] = public_subspace(pub_updates, pub_weights, s.projection_dims, s.projection, s.eigensolver,
                                                 iterations=s.lanczos_iterations,
                                                 seed=self.context.seeds.integer("pfa-eigen", round, index))
            subspace = self.previous[block] if plus and not warm else current[block]
            dims.append(subspace.dims)
            delta = torch.zeros_like(base)
            if public:
                mean_pub = sum(w * u for w, u in zip(pub_weights, pub_updates, strict=True)) / eps_pub
                delta += (eps_pub / total) * mean_pub
            if private:
                if projected_uploads:  # PFA+ (Alg. 5 lines 3–4): V_k[t−1]·Σ_pri W(ε)·(uploaded coefficients)
                    coefficients = sum(eps[c] * by_client[c].extras["pfa_coefficients"][block].to(torch.float64) for c in private)
                    projected_pri = subspace.reconstruct(coefficients / eps_pri)
                else:  # PFA (Alg. 3 lines 6–7): V_k V_kᵀ Σ_pri W(ε)Δx
                    mean_pri = sum(eps[c] * (base - self._flat(by_client[c].state, names)) for c in private) / eps_pri
                    projected_pri = subspace.project(mean_pri)
                delta += (eps_pri / total) * projected_pri
            for n, value in self._unflat(base - delta, names, global_state).items():
                new_state[n] = value.to(global_state[n].dtype)
        self._carry_buffers(new_state, global_state, results, eps)
        if public:
            self.previous = current if plus else self.previous
        note = "warm-up: every client uploaded in full" if plus and warm else ""
        if plus and not public:
            note = "no public client in the sample: the previous subspace is kept"
        self.records.append(RoundRecord(round, s.rule.value, public, private, projected_uploads, dims, note))
        return new_state

    def _carry_buffers(self, new_state: State, global_state: State, results: Sequence[ClientResult], eps: dict[int, float]) -> None:
        """State entries that are not trained (buffers) are ε-weighted averages, never projected."""
        others = [k for k in global_state if k not in set(self.context.trainable)]
        if others:
            total = sum(eps[r.client_id] for r in results)
            for k in others:
                new_state[k] = sum(eps[r.client_id] / total * r.state[k] for r in results)

    # -- reporting ---------------------------------------------------------------------------------------
    def hyperparameters(self) -> dict[str, Any]:
        return self.settings.to_dict()

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "hyperparameters": self.hyperparameters(), "plan": self.plan}
        if self.dp is not None:
            out["privacy"] = self.dp.describe().get("privacy", {})
        return out

    def report(self) -> dict[str, Any]:
        """Participation (incl. when and why training stopped), communication and per-round aggregation."""
        return {
            "algorithm": self.name,
            "settings": self.settings.to_dict(),
            "plan": self.plan,
            "participation": self.sampler.report() if self.sampler is not None else None,
            "communication": self.uplink.summary(),
            "rounds": [r.to_dict() for r in self.records],
        }

    @property
    def stop_reason(self) -> str | None:
        return None if self.sampler is None or self.sampler.stopped is None else self.sampler.stopped.reason


#: Algorithm names of the family and the settings each one fixes.
FAMILY: dict[str, dict[str, Any]] = {
    "pfa": {"rule": Rule.PFA},
    "pfa-plus": {"rule": Rule.PFA_PLUS},
    "weiavg": {"rule": Rule.WEIAVG},
    "fedavg-hdp": {"rule": Rule.FEDAVG_HDP},
    "public-only": {"rule": Rule.PUBLIC_ONLY},
    "minimum": {"rule": Rule.FEDAVG_HDP, "operating": Operating.MINIMUM},
    "maximum": {"rule": Rule.FEDAVG_HDP, "operating": Operating.MAXIMUM},
    "np-fedavg": {"rule": Rule.FEDAVG_HDP, "private": False},
}


def build(name: str, **options: Any) -> HeterogeneousDP:
    """The algorithm ``name`` of :data:`FAMILY` with ``options`` (fields of :class:`PFASettings`)."""
    key = str(name).strip().lower()
    if key not in FAMILY:
        raise InvalidParameterError(f"unknown PFA-family algorithm {name!r}; known: {', '.join(FAMILY)}")
    fixed = FAMILY[key]
    clash = sorted(set(fixed) & set(options))
    if clash:
        raise InvalidParameterError(f"{key} fixes {', '.join(clash)}")
    return HeterogeneousDP(PFASettings(**fixed, **options), name=key)
