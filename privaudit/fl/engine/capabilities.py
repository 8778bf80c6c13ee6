"""Optional capabilities of an algorithm, each declared by inheriting it, with a documented default.

The core of an algorithm (:class:`~privaudit.fl.engine.algorithm.Algorithm`) is the round's steps. Anything else the
round loop, the privatizers or a run's record may ask of it is one of the capabilities below. An algorithm declares
one by inheriting its class and overriding what it changes::

    class MyAlgorithm(FedAvg, ClientSelection):
        def select_clients(self, training_round, rng):
            ...

Callers ask ``Kind.of(algorithm)``: the algorithm's declaration of ``Kind`` — found through any stack of wrappers
(:class:`~privaudit.fl.algorithms.base.AlgorithmWrapper` forwards every capability it does not declare itself to the
algorithm it wraps) — or, when none declares it, an instance of ``Kind`` itself, whose defaults change nothing. Whether
an algorithm declares ``Kind`` at all is ``algorithm.capability(Kind) is not None``.

A wrapper that declares a capability stands for the whole stack below it: it calls ``Kind.of(self.inner)`` where the
inner algorithm's answer still matters (a server-side privatizer's :meth:`RunPlanning.start_federation` also starts the
algorithm it wraps).

Asked by the round loop (:mod:`privaudit.fl.engine.round_loop`): :class:`RunPlanning`, :class:`ClientSelection`,
:class:`ClientSchedules`, :class:`RunCompletion`, :class:`PersonalModels`, :class:`NeighbouringRelation`.
Asked by a run described by names and its record (:mod:`privaudit.fl.run`, ``privaudit train``): :class:`ModelChoice`,
:class:`RunReport`. Asked by privatizers and canaries (:mod:`privaudit.fl.privacy`, :mod:`privaudit.fl.canaries`):
:class:`OwnPrivacyAccounting`, :class:`LocalStepForm`, :class:`ServerStepForm`, :class:`SharedParameters`,
:class:`ProximalTerm`, :class:`ReleaseBound`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from privaudit.accounting.mechanisms import Neighbouring

if TYPE_CHECKING:
    import numpy as np
    from torch import nn

    from privaudit.accounting.ledger import PrivacyLedger
    from privaudit.fl.engine.algorithm import ClientDraws
    from privaudit.fl.engine.config import FederationConfig
    from privaudit.fl.engine.params import State
    from privaudit.fl.engine.round_loop import FederationResult

#: What :meth:`ModelChoice.model_for` returns for an architecture no registered name describes:
#: ``build(input_shape, num_classes) -> nn.Module``, called under the run's seeded model initialisation.
ModelBuilder = Callable[[tuple[int, ...], int], "nn.Module"]
K = TypeVar("K", bound="Capability")
#: every subclass of :class:`Capability` defined so far (this module's capabilities, any declared elsewhere, and the
#: algorithm classes that declare them)
_CAPABILITIES: list[type[Capability]] = []


class Capability:
    """Base of every capability: :meth:`of` finds it on an algorithm (or its default)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _CAPABILITIES.append(cls)  # capabilities, and classes that declare one (require_declared tells them apart)

    @classmethod
    def of(cls: type[K], algorithm: Any) -> K:
        """``algorithm``'s declaration of this capability (through its wrappers), or this capability's defaults."""
        declared = algorithm.capability(cls)
        return cls() if declared is None else declared


def require_declared(cls: type, core: type) -> None:
    """Refuse (``TypeError``, when the class is defined) an algorithm class that defines a member of a capability it
    does not declare: undeclared, the member would be silently ignored (callers find capabilities by declaration).
    ``core``: the algorithm base class (its subclasses declare capabilities, they are none)."""
    for kind in _CAPABILITIES:
        if issubclass(cls, kind) or issubclass(kind, core):
            continue
        members = sorted(name for name in vars(kind) if not name.startswith("_") and name in vars(cls))
        if members:
            raise TypeError(f"{cls.__qualname__} defines {', '.join(members)} of capability {kind.__name__} without "
                            f"declaring it: inherit {kind.__module__}.{kind.__name__}")


# -- asked by the round loop ---------------------------------------------------------------------------------
class RunPlanning(Capability):
    """Plans from the run before round 1 (PFA draws the budgets, calibrates every client's σ_m and sets the budgets in
    the ledger; server-side privatizers take the client sampling from the configuration)."""

    def start_federation(self, config: FederationConfig, ledger: PrivacyLedger) -> None:
        """Called once after ``setup`` and before round 1 with the run's configuration and privacy ledger.
        Default: nothing."""


class ClientSelection(Capability):
    """Chooses each training round's clients itself (PFA's budget pre-check)."""

    def select_clients(self, training_round: int, rng: np.random.Generator) -> Sequence[int] | None:
        """The clients of training round ``training_round``, drawn with the round's seeded sampling stream ``rng``;
        ``None`` (default): the federation samples them."""
        return None


class ClientSchedules(Capability):
    """Draws the sampled clients' local epochs and mini-batch orders itself (the reference code's clock-seeded
    privatizers: the global generator, reseeded from the clock at every release, drives the next client's straggler
    draw and shuffles, :mod:`privaudit.fl.privacy.clock_seed`)."""

    def client_draws(self, training_round: int, sampled: Sequence[int], epochs: Sequence[int],
                     config: FederationConfig) -> ClientDraws | None:
        """Epochs and schedules of the sampled clients (sorted ids); ``epochs`` are what the federation's seeded
        streams ("stragglers", "shuffle") drew. ``None`` (default): the federation's draws."""
        return None


class RunCompletion(Capability):
    """Completes the run's record after the last round (PrivateFL's privacy modes put their budgets in the ledger)."""

    def end_federation(self, result: FederationResult) -> None:
        """After the last round, before any observer (the checkpoint writer among them) sees the end. Default: nothing."""


class PersonalModels(Capability):
    """Keeps a personalised model per client (pFedMe, PrivateFL), evaluated beside the global one."""

    def personal_states(self) -> dict[int, State]:
        """Client id → its personalised model. Default: none."""
        return {}


class NeighbouringRelation(Capability):
    """The neighbouring relation the algorithm's privacy events state their guarantees under; the run's ledger
    records it. Default: add/remove one record (or client)."""

    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE


# -- asked by a run described by names and its record ------------------------------------------------------------
class ModelChoice(Capability):
    """Trains another model than the one the run names (PrivateFL's personalised transformation in front of it)."""

    def model_for(self, name: str) -> str | ModelBuilder:
        """The model trained when the run names model ``name``: ``name`` itself (default), another registered name,
        or a :data:`ModelBuilder` for an architecture no name describes."""
        return name


class RunReport(Capability):
    """Adds sections to a finished run's checkpoint manifest and rows to ``privaudit train``'s summary."""

    def manifest_sections(self) -> dict[str, Any]:
        """Manifest sections by key (PFA's participation, uplink and aggregation report under ``"pfa"``). Default: none."""
        return {}

    def summary_rows(self, result: FederationResult) -> dict[str, Any]:
        """Rows for the summary of the finished run ``result`` (PFA: when and why training stopped, ε spent, uplink
        reduction). Default: none."""
        return {}


# -- asked by privatizers and canaries ---------------------------------------------------------------------------
class OwnPrivacyAccounting(Capability):
    """Records its own privacy events (PFA: its private clients run DP-SGD inside it, its public clients release
    without noise by design), so ``--privacy none`` adds no "no DP guarantee" event. Declaring it is the statement."""


class LocalStepForm(Capability):
    """What form the local step has under record-level DP-SGD (``--privacy dp-sgd`` swaps DP-SGD in for it)."""

    #: whether the local step has a DP-SGD form (pFedMe's Moreau-envelope loop and FedReg's pseudo-data step have none)
    dp_sgd_compatible: bool = True
    #: whether clients take full-batch steps, so DP-SGD samples every record (q = 1) once per epoch (FedSGD)
    full_batch_dp_sgd: bool = False


class ServerStepForm(Capability):
    """Whether the server step is post-processing of the clients' mean update and clients release nothing else, so
    ``--privacy cdp|ddp`` may privatise that mean. Default: not declared sound (refused)."""

    server_dp_compatible: bool = False
    #: why the server step is not post-processing of the mean update (shown when ``--privacy cdp|ddp`` is refused)
    server_dp_reason: str | None = None


class SharedParameters(Capability):
    """Keeps some trainable parameters on the clients (PrivateFL's personal transformation): the server aggregates
    only :attr:`shared_names`. Without this capability the server aggregates every trainable parameter."""

    @property
    def shared_names(self) -> tuple[str, ...]:
        raise NotImplementedError(f"{type(self).__name__} declares SharedParameters without naming them")


def aggregated_names(algorithm: Any, trainable: Sequence[str]) -> tuple[str, ...]:
    """The parameters the server aggregates: ``algorithm``'s :class:`SharedParameters`, else every ``trainable`` one."""
    sharing = algorithm.capability(SharedParameters)
    return tuple(trainable) if sharing is None else sharing.shared_names


class ProximalTerm(Capability):
    """A proximal term (μ/2)‖ω − ω̄‖² in the local objective (FedProx); Upcycled-FL's u = μ/(μ + λ) (000 eq. 4) takes
    μ from it."""

    @property
    def proximal_mu(self) -> float:
        """μ (default 0: no proximal term)."""
        return 0.0


class ReleaseBound(Capability):
    """Every released client model is clipped to a norm τ by a privatizer (output perturbation); canary clients take
    their update norm from it."""

    @property
    def release_clip(self) -> float | None:
        """τ, or ``None`` (default) when nothing bounds the releases."""
        return None
