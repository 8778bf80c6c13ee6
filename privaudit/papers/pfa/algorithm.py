"""PFA, PFA+, WeiAvg and FedAvg under heterogeneous per-client DP, with the paper's baselines (004 Alg. 1–5, 7).

Each algorithm of the family is a small subclass of :class:`HeterogeneousDP` (:data:`FAMILY`): the base runs what
they share, a subclass chooses its server rule (:mod:`privaudit.papers.pfa.server_rules`), its participation
(every sampled client, or only the public ones) and the budget its clients' noise is calibrated for. One round
(Alg. 2 / Alg. 4) as :class:`HeterogeneousDP` runs it inside the federation's loop:

1. *Pre-check and sampling* (``select_clients``, :mod:`privaudit.papers.pfa.budget_participation`): K of the M
   clients, uniformly among those whose next round stays within their budget; training stops when fewer
   than K remain (the reference code's rule; the paper's T* = KT/M is only an expectation, audit point F2).
2. *Client division* (:mod:`privaudit.papers.pfa.public_private`): the sampled clients S_t into S^pub and S^pri
   (Alg. 2 line 5; GMM, k-means or top-K over all clients' budgets, or re-clustered per sample).
3. *Local DP-SGD* (Alg. 7): every sampled client runs DP-SGD with its own σ_m
   (:mod:`privaudit.papers.pfa.budget_calibration`) through :class:`privaudit.fl.privacy.local_dp.LocalDP`, which records one
   ``SubsampledGaussian(σ_m, q_m)`` event per client and round with the steps taken. The update is
   Δx^m = x − x_τ^m.
4. *Aggregation* (the server rule of the subclass), one of:

   * ``fedavg-hdp`` — FedAvg of the noisy updates (example-weighted; equal client sizes: the mean);
   * ``weiavg`` — Alg. 1: Δx̄ = Σ_m W(ε_m)Δx^m, W_S(ε_m) = ε_m/Σ_{S} ε;
   * ``pfa`` — Alg. 3: Δx̄^pub = Σ_pub W(ε)Δx, V_k ← top-k eigenvectors of Δx̄^pub(Δx̄^pub)ᵀ
     (:mod:`privaudit.papers.pfa.projection`, never forming the p×p matrix), Δx̂^pri = V_kV_kᵀ Σ_pri W(ε)Δx,
     Δx̄ = (Σ_pub ε/Σ ε)·Δx̄^pub + (Σ_pri ε/Σ ε)·Δx̂^pri. ``projection="reference"`` runs the reference
     code's centred variant (audit point F4);
   * ``pfa-plus`` — Alg. 4/5: a private client uploads only V_k[t−1]ᵀΔx^m (k numbers per block) against the
     subspace the server computed from the *previous* round's public updates; the server reconstructs
     V_k[t−1]·Σ_pri W(ε)·(coefficients); public clients upload in full and define V_k[t] for the next round.
     The warm-up round (no previous subspace yet) is a PFA round with every client uploading in full;
   * ``public-only`` — FedAvg over the public clients of each sample only (private clients do not train and
     spend nothing): the audit's baseline for what PFA's aggregate collapses to (audit point F4).

Baselines (§5.1): ``minimum`` / ``maximum`` are ``fedavg-hdp`` with every client calibrated at min ε_m /
max ε_m (the ledger keeps each client's own ε_m, so Maximum shows as over budget for the private clients);
``np-fedavg`` trains without DP (uniform K-of-M sampling, no pre-check).

Before round 1 (``start_federation``) the run is planned (:mod:`privaudit.papers.pfa.planning`): budgets, τ schedule,
σ_m calibration, the public/private division. Options are grouped in :class:`~privaudit.papers.pfa.settings.PFASettings`.

Local steps: :class:`~privaudit.fl.privacy.dpsgd.DPSGD` runs whole epochs of ⌈1/q⌉ Poisson steps, so τ local steps
are realised as E_m = max(1, round(τ/⌈1/q_m⌉)) epochs, i.e. E_m·⌈1/q_m⌉ steps per round (87 for τ = 100,
|D_m| = 225, B = 8); the realised τ_m is what the calibration plans for and what the ledger records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.accounting.mechanisms import Neighbouring, Sampling
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.base import AlgorithmWrapper
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult, SetupContext
from privaudit.fl.engine.capabilities import (
    ClientSelection,
    ModelChoice,
    NeighbouringRelation,
    OwnPrivacyAccounting,
    RunPlanning,
    RunReport,
)
from privaudit.fl.engine.config import FederationConfig
from privaudit.fl.engine.local_solver import ClientSolver
from privaudit.fl.engine.local_training import SGD, LocalObjective
from privaudit.fl.engine.params import State
from privaudit.fl.privacy.local_dp import LocalDP, LocalDPConfig
from privaudit.papers.pfa.budget_calibration import ClientCalibration, LocalStepRule
from privaudit.papers.pfa.budget_participation import BudgetedSampler, BudgetGate
from privaudit.papers.pfa.model_init import model_builder
from privaudit.papers.pfa.planning import FederationPlan, plan_federation
from privaudit.papers.pfa.public_private import split_clients
from privaudit.papers.pfa.run_report import summary_rows
from privaudit.papers.pfa.server_rules import (
    Blocks,
    EpsilonWeighted,
    ExampleWeighted,
    Projected,
    ProjectedUploads,
    RoundRecord,
    ServerRule,
)
from privaudit.papers.pfa.settings import NoPublic, PFASettings
from privaudit.papers.pfa.uplink import UplinkLedger, full_update_bytes


@dataclass(frozen=True)
class FixedEpochs(ClientSolver):
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
        return trainer.train_one(global_state, task, training_round)  # the inner solver, whichever kind it is


class FamilyRound(Algorithm):
    """The family's round without DP, which LocalDP wraps for private runs: τ local steps, the client's upload
    (:meth:`HeterogeneousDP.release`), the server rule (:meth:`HeterogeneousDP.server_aggregate`)."""

    def __init__(self, owner: HeterogeneousDP) -> None:
        self.owner = owner
        self.name = owner.name

    def setup(self, context: SetupContext) -> None:
        self.context = context

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return LocalObjective(solver=FixedEpochs(SGD(), self.owner.federation_plan.epochs[client.client_id]))

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        result = super().finish(global_state, client, outcome)
        return self.owner.release(global_state, client, result)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        return self.owner.server_aggregate(round, global_state, results)


class HeterogeneousDP(Algorithm, NeighbouringRelation, OwnPrivacyAccounting, ModelChoice, RunPlanning, ClientSelection,
                      RunReport):
    """What the family shares: per-client budgets, local DP-SGD with calibrated σ_m, the budget pre-check, the
    public/private division, uplink accounting. Subclasses set :attr:`name`, :meth:`server_rule` and, for the
    baselines, :attr:`public_only`, :attr:`private` and :meth:`operating_budgets`.

    Needs the federation's ``start_federation`` and ``select_clients`` hooks (it plans from the run's
    configuration, keeps the budgets in the run's ledger and chooses each round's clients).
    """

    name = "fedavg-hdp"
    #: The server rule's name in the reported settings (the baselines share FedAvg-HDP's).
    rule = "fedavg-hdp"
    neighbouring = Neighbouring.ADD_REMOVE
    #: Whether clients train with local DP-SGD (NP-FedAvg: no; then sampling is uniform, without pre-check).
    private = True
    #: Whether only the public clients of a sample train (the public-only baseline: private clients spend nothing).
    public_only = False
    #: The budget every client's noise is calibrated for: ``own`` ε_m (the paper), or ``minimum``/``maximum``.
    operating = "own"

    def __init__(self, settings: PFASettings | None = None) -> None:
        settings = PFASettings() if settings is None else settings
        if not isinstance(settings, PFASettings):
            raise InvalidParameterError(f"{type(self).__name__} needs PFASettings")
        self.settings = settings
        self.round_core = FamilyRound(self)
        self.dp = None
        self.federation_plan: FederationPlan | None = None

    # -- what a family member chooses ----------------------------------------------------------------
    def server_rule(self, context: SetupContext) -> ServerRule:
        """The server's aggregation rule for a run with ``context`` (default: FedAvg of the noisy updates)."""
        return ExampleWeighted()

    def operating_budgets(self, preferences: list[float]) -> list[float]:
        """The budget each client's noise is calibrated for, from the clients' own budgets (default: their own)."""
        return preferences

    def model_for(self, name: str):
        """``name``, or ``name`` with the reference's Keras initialisation (``model_init="keras"``)."""
        return model_builder(name, self.settings.model_init)

    # -- set-up --------------------------------------------------------------------------------------
    def setup(self, context: SetupContext) -> None:
        self.context = context
        self.round_core.setup(context)
        self.dp = None
        self.federation_plan = None
        self.server = self.server_rule(context)
        self.sampler: BudgetedSampler | None = None
        self.uplink = UplinkLedger()
        self.records: list[RoundRecord] = []
        self._round = 0

    def start_federation(self, config: FederationConfig, ledger: PrivacyLedger) -> None:
        """Plan the run (budgets, σ_m, division), set the budgets in ``ledger`` and build the sampler."""
        self._check_federation(config)
        context = self.context
        plan = plan_federation(self.settings, rounds=config.rounds, rate=config.clients_per_round, seed=config.seed,
                               client_sizes=context.client_sizes, batch_size=context.trainer.local.batch_size,
                               split_seed=context.seeds.integer("pfa-split"), operating=self.operating_budgets, private=self.private)
        gate = None
        if self.private:
            for m, eps in enumerate(plan.preferences.epsilons):
                ledger.set_budget(m, eps, self.settings.budget.delta)
            gate = BudgetGate(plan.calibrations, ledger)
            self.dp = self._local_dp(plan.calibrations)
            self.dp.setup(context)
        no_public = self.settings.projection.no_public
        require_public = self.server.needs_public and no_public in (NoPublic.RESAMPLE, NoPublic.STOP)
        self.sampler = BudgetedSampler(context.num_clients, plan.clients_per_round, gate, self._divide,
                                       policy=self.settings.local_dp.budget_policy, require_public=require_public,
                                       public_only=self.public_only, stop_without_public=require_public and no_public is NoPublic.STOP)
        self.federation_plan = plan

    def _check_federation(self, config: FederationConfig) -> None:
        if config.sampling is not Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT:
            raise InvalidParameterError("PFA samples K of M clients uniformly per round; use fixed-size client sampling")
        if config.stragglers > 0:
            raise InvalidParameterError("PFA's clients all run τ local steps; stragglers are not part of it (use --stragglers 0)")
        if self.context.trainer is None:
            raise InvalidParameterError("PFA needs the federation's trainer (run it through run_federation)")

    def _local_dp(self, calibrations: Sequence[ClientCalibration]):
        """LocalDP around the family's round, with each client's calibrated σ_m and Poisson rate q_m."""
        dp = self.settings.local_dp
        assumptions = (f"σ_m calibrated by {dp.calibration.value} for ε_m over T*_m planned steps ({dp.planned.value})",)
        return LocalDP(self.round_core, LocalDPConfig(
            noise_multiplier={c.client_id: c.noise_multiplier for c in calibrations},
            clip_norm=dp.clip_norm,
            sample_rate={c.client_id: c.sample_rate for c in calibrations},
            accountant=dp.calibration.accountant or "rdp",
            assumptions=assumptions,
            steps=({c.client_id: c.steps_per_round for c in calibrations}
                   if self.settings.local_step_rule is LocalStepRule.EXACT else None),
        ))

    def _divide(self, clients: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        population = self.federation_plan.population_split
        if population is not None:
            public = set(population.public)
            return tuple(c for c in clients if c in public), tuple(c for c in clients if c not in public)
        split = split_clients([self.operating_eps[c] for c in clients], self.settings.split.split,
                              public_clients=self.settings.split.public_clients,
                              seed=self.context.seeds.integer("pfa-split", self._round))
        return tuple(clients[i] for i in split.public), tuple(clients[i] for i in split.private)

    # -- the plan, once the run has started ------------------------------------------------------------
    @property
    def epochs(self) -> dict[int, int]:
        """E_m: the local epochs realising τ steps for each client."""
        return dict(enumerate(self._plan().epochs))

    @property
    def operating_eps(self) -> list[float]:
        return [] if self.federation_plan is None else list(self.federation_plan.operating_eps)

    @property
    def calibrations(self) -> list[ClientCalibration]:
        return [] if self.federation_plan is None else list(self.federation_plan.calibrations)

    @property
    def plan(self) -> dict[str, Any]:
        return {} if self.federation_plan is None else self.federation_plan.to_dict()

    def _plan(self) -> FederationPlan:
        if self.federation_plan is None:
            raise InvalidParameterError(f"{self.name} needs the federation's start_federation hook before the first round")
        return self.federation_plan

    # -- rounds ----------------------------------------------------------------------------------------
    def trains_clients(self, round: int) -> bool:
        self._plan()
        self._round = int(round)
        return self.sampler.can_train(int(round))

    def select_clients(self, training_round: int, rng) -> list[int]:
        self._plan()
        return self.sampler.sample(self._round, rng)

    def server_update(self, round: int, global_state: State) -> State:
        return P.clone(global_state)

    def _client(self, client: ClientContext) -> ClientContext:
        return replace(client, epochs=self._plan().epochs[client.client_id])

    def _round_algorithm(self) -> Algorithm:
        return self.dp if self.dp is not None else self.round_core

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        return self._round_algorithm().local_objective(global_state, self._client(client))

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        return self._round_algorithm().finish(global_state, self._client(client), outcome)

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        return self._round_algorithm().aggregate(round, global_state, results)

    # -- client side -----------------------------------------------------------------------------------
    def release(self, global_state: State, client: ClientContext, result: ClientResult) -> ClientResult:
        """What the client uploads: its full update, or what the server rule has private clients upload (PFA+)."""
        public, private = self.sampler.roles(client.round)
        role = "public" if client.client_id in public else "private" if client.client_id in private else "all"
        full = full_update_bytes(sum(self.context.initial_state[n].numel() for n in self.context.trainable))
        projected = self.server.upload(global_state, result) if role == "private" else None
        if projected is None:
            self.uplink.record(client.round, client.client_id, role, "full", full, full)
            return result
        released, nbytes = projected
        self.uplink.record(client.round, client.client_id, role, "projected", nbytes, full)
        return released

    # -- server side -----------------------------------------------------------------------------------
    def server_aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        """The server rule on the round's results, with the sample's public and private clients and operating ε."""
        if not results:
            return P.clone(global_state)
        public, private = self.sampler.roles(round)
        present = {r.client_id for r in results}
        public = [c for c in public if c in present]
        private = [c for c in private if c in present]
        operating = self.federation_plan.operating_eps
        eps = {r.client_id: operating[r.client_id] for r in results}
        state, record = self.server.aggregate(round, global_state, results, public, private, eps)
        self.records.append(record)
        return state

    # -- reporting ---------------------------------------------------------------------------------------
    def hyperparameters(self) -> dict[str, Any]:
        return {"rule": self.rule, "operating": self.operating, "private": self.private, **self.settings.to_dict()}

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "hyperparameters": self.hyperparameters(), "plan": self.plan}
        if self.dp is not None:
            out["privacy"] = self.dp.describe().get("privacy", {})
        return out

    def report(self) -> dict[str, Any]:
        """Participation (incl. when and why training stopped), communication and per-round aggregation."""
        return {
            "algorithm": self.name,
            "settings": self.hyperparameters(),
            "plan": self.plan,
            "participation": self.sampler.report() if self.sampler is not None else None,
            "communication": self.uplink.summary(),
            "rounds": [r.to_dict() for r in self.records],
        }

    def manifest_sections(self) -> dict[str, Any]:
        return {"pfa": self.report()}

    def summary_rows(self, result) -> dict[str, Any]:
        return summary_rows(self.report(), self.calibrations, result.ledger)

    @property
    def stop_reason(self) -> str | None:
        return None if self.sampler is None or self.sampler.stopped is None else self.sampler.stopped.reason


# -- the family ----------------------------------------------------------------------------------------------
class FedAvgHDP(HeterogeneousDP):
    """FedAvg of local DP-SGD updates with heterogeneous per-client budgets (PFA's baseline)."""

    name = rule = "fedavg-hdp"


class WeiAvg(HeterogeneousDP):
    """WeiAvg (Alg. 1): the ε-weighted average of heterogeneously private updates."""

    name = rule = "weiavg"

    def server_rule(self, context: SetupContext) -> ServerRule:
        return EpsilonWeighted()


class PFA(HeterogeneousDP):
    """PFA (Alg. 2/3): private updates projected on the top-k subspace of the public updates."""

    name = rule = "pfa"

    def server_rule(self, context: SetupContext) -> ServerRule:
        return Projected(self.settings.projection, self._blocks(context), context.seeds)

    def _blocks(self, context: SetupContext) -> Blocks:
        return Blocks(tuple(context.trainable), self.settings.projection.projection_scope)


class PFAPlus(PFA):
    """PFA+ (Alg. 4/5): private clients upload k numbers per block against the previous round's subspace."""

    name = rule = "pfa-plus"

    def server_rule(self, context: SetupContext) -> ServerRule:
        return ProjectedUploads(self.settings.projection, self._blocks(context), context.seeds)

    @property
    def previous(self):
        """V_k[t−1] per block (``None`` before the first round with public clients)."""
        return self.server.previous


class PublicOnly(FedAvgHDP):
    """FedAvg over the public clients of each sample only; private clients never train (audit baseline, point F4)."""

    name = rule = "public-only"
    public_only = True


class Minimum(FedAvgHDP):
    """FedAvg with every client's noise calibrated at min ε_m (PFA's baseline "Minimum")."""

    name = "minimum"
    operating = "minimum"

    def operating_budgets(self, preferences: list[float]) -> list[float]:
        return [min(preferences)] * len(preferences)


class Maximum(FedAvgHDP):
    """FedAvg with every client's noise calibrated at max ε_m (PFA's baseline "Maximum"; exceeds the private budgets)."""

    name = "maximum"
    operating = "maximum"

    def operating_budgets(self, preferences: list[float]) -> list[float]:
        return [max(preferences)] * len(preferences)


class NPFedAvg(FedAvgHDP):
    """Non-private FedAvg with τ local SGD steps, uniform K-of-M sampling (PFA's baseline "NP-FedAvg")."""

    name = "np-fedavg"
    private = False


#: Algorithm name → its class.
FAMILY: dict[str, type[HeterogeneousDP]] = {
    cls.name: cls for cls in (PFA, PFAPlus, WeiAvg, FedAvgHDP, PublicOnly, Minimum, Maximum, NPFedAvg)
}
#: What a family member fixes (a name of the family, not an option).
_FIXED = ("rule", "operating", "private")


def build(name: str, **options: Any) -> HeterogeneousDP:
    """The algorithm ``name`` of :data:`FAMILY` with ``options`` (flat option names of :class:`PFASettings`)."""
    key = str(name).strip().lower()
    if key not in FAMILY:
        raise InvalidParameterError(f"unknown PFA-family algorithm {name!r}; known: {', '.join(FAMILY)}")
    clash = sorted(set(_FIXED) & set(options))
    if clash:
        raise InvalidParameterError(f"{key} fixes {', '.join(clash)}")
    return FAMILY[key](PFASettings.from_options(**options))


def family_of(algorithm: Algorithm) -> HeterogeneousDP:
    """The PFA-family algorithm inside ``algorithm`` (itself, or the one its wrappers wrap)."""
    current = algorithm
    while isinstance(current, AlgorithmWrapper):
        current = current.inner
    if not isinstance(current, HeterogeneousDP):
        raise InvalidParameterError(f"{algorithm.name} is not a PFA-family algorithm")
    return current
