"""The options of the PFA family (004), grouped by what they decide, each group validated once.

* :class:`BudgetSettings` — which ε_m every client has (004 Table 1 distributions, a file, a constant) and δ;
* :class:`LocalDPSettings` — how each client's DP-SGD noise σ_m is calibrated for ε_m and pre-checked per round;
* :class:`SplitSettings` — how clients are divided into public and private (Alg. 2 line 5);
* :class:`ProjectionSettings` — PFA's and PFA+'s subspace (Alg. 3 / Alg. 5): form, k, blocks, eigensolver, and a
  round without public clients;
* :class:`PFASettings` — the four groups, the local steps τ every member of the family runs, and the CNN's
  initialisation (PyTorch's or the reference's Keras one).

Which algorithm of the family runs (PFA, PFA+, WeiAvg, FedAvg-HDP, ...) is not an option but a class
(:mod:`privaudit.papers.pfa.algorithm`). Defaults are the paper's behaviour; reference-code behaviour is a named
value: ``calibration="reference"``, ``projection="reference"`` (with ``eigensolver="reference-lanczos"``, the reference's
defective solver, audit point F7), ``split="topk"`` with ``public_clients=⌊0.1·M⌋``, ``no_public="stop"``,
``reference-*`` budget distributions.

Options travel by flat names (``budgets``, ``split``, ``projection_dims``, ...; :data:`OPTION_GROUPS`), as the
family's builder receives them from ``privaudit train``; :meth:`PFASettings.from_options` sorts them into groups
and :meth:`PFASettings.to_dict` gives them back flat. Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.budget_calibration import CalibrationMethod, LocalStepRule, PlannedSteps
from privaudit.papers.pfa.budget_participation import PrecheckPolicy
from privaudit.papers.pfa.budgets import NonPositiveBudgets, check_budget_spec
from privaudit.papers.pfa.model_init import ModelInit
from privaudit.papers.pfa.projection import EigenSolver, ProjectionForm
from privaudit.papers.pfa.public_private import SplitMethod, SplitScope


class NoPublic(str, Enum):
    """A PFA round whose sample holds no public client."""

    WEIAVG = "weiavg"  # aggregate that round by WeiAvg (the paper does not say; PFA+ reuses its last subspace)
    #: redraw the sample up to 50 times until it holds a public client; if none does, train that sample anyway and
    #: aggregate it by WeiAvg (privaudit's choice: the reference code stops training instead, which is ``STOP``)
    RESAMPLE = "resample"
    #: the reference code (Emory-AIMS/PFA@72b3f89:modules/server.py ``sample_clients``, main.py's loop): redraw while the
    #: sample holds no public client; when 50 draws held none, training stops for good
    STOP = "stop"


class ProjectionScope(str, Enum):
    TENSOR = "tensor"
    MODEL = "model"


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if int(value) < 1:
        raise InvalidParameterError(f"{name} must be at least 1, got {int(value)}")
    return int(value)


def _flat(settings: Any) -> dict[str, Any]:
    return {k: (v.value if isinstance(v, Enum) else v) for k, v in asdict(settings).items()}


@dataclass(frozen=True)
class BudgetSettings:
    """Per-client budgets ε_m: a distribution name, ``file:<path>`` or ``constant:<ε>`` (:mod:`privaudit.papers.pfa.budgets`).

    ``budget_seed`` seeds the draw (default: the run's seed); ``second_parameter`` reads N(μ, x) as variance or
    std x; ``delta`` is every client's δ.
    """

    budgets: str = "mixgauss1"
    budget_seed: int | None = None
    nonpositive: NonPositiveBudgets = NonPositiveBudgets.REDRAW
    second_parameter: str | None = None
    delta: float = 1e-5

    def __post_init__(self) -> None:
        object.__setattr__(self, "nonpositive", NonPositiveBudgets.parse(self.nonpositive))
        if not 0 < float(self.delta) < 1:
            raise InvalidParameterError(f"δ must lie in (0, 1), got {self.delta}")
        if self.second_parameter not in (None, "variance", "std"):
            raise InvalidParameterError(f"the budget distributions' second parameter is 'variance' or 'std', got {self.second_parameter!r}")
        if self.budget_seed is not None and (isinstance(self.budget_seed, bool) or int(self.budget_seed) < 0):
            raise InvalidParameterError(f"the budget seed must be a non-negative integer, got {self.budget_seed!r}")
        object.__setattr__(self, "budgets", check_budget_spec(self.budgets))
        object.__setattr__(self, "delta", float(self.delta))


@dataclass(frozen=True)
class LocalDPSettings:
    """Each client's DP-SGD: clip norm C, σ_m calibrated by ``calibration`` for the ``planned`` steps, and the
    round's budget pre-check (``budget_policy``, :mod:`privaudit.papers.pfa.budget_participation`)."""

    clip_norm: float = 1.0
    calibration: CalibrationMethod = CalibrationMethod.RDP
    planned: PlannedSteps = PlannedSteps.EXPECTED
    budget_policy: PrecheckPolicy = PrecheckPolicy.EXCLUDE

    def __post_init__(self) -> None:
        object.__setattr__(self, "calibration", CalibrationMethod.parse(self.calibration))
        object.__setattr__(self, "planned", PlannedSteps.parse(self.planned))
        object.__setattr__(self, "budget_policy", PrecheckPolicy.parse(self.budget_policy))
        clip = float(self.clip_norm)
        if not clip > 0 or math.isinf(clip):
            raise InvalidParameterError(f"the DP-SGD clipping norm must be a positive finite number, got {self.clip_norm}")
        object.__setattr__(self, "clip_norm", clip)


@dataclass(frozen=True)
class SplitSettings:
    """The public/private division (:mod:`privaudit.papers.pfa.public_private`): GMM, k-means or top-K
    (``public_clients``), over all clients once (``population``) or per sample (``round``)."""

    split: SplitMethod = SplitMethod.GMM
    public_clients: int | None = None
    split_scope: SplitScope = SplitScope.POPULATION

    def __post_init__(self) -> None:
        object.__setattr__(self, "split", SplitMethod.parse(self.split))
        object.__setattr__(self, "split_scope", SplitScope.parse(self.split_scope))
        if self.public_clients is not None:
            object.__setattr__(self, "public_clients", _positive_int("public clients", self.public_clients))
        if self.split is SplitMethod.TOPK and self.public_clients is None:
            raise InvalidParameterError("the top-K public/private split needs the number of public clients (--public-clients)")
        if self.split is not SplitMethod.TOPK and self.public_clients is not None:
            raise InvalidParameterError("--public-clients applies to the top-K split only (--split topk)")


@dataclass(frozen=True)
class ProjectionSettings:
    """PFA's subspace (:mod:`privaudit.papers.pfa.projection`): form, dimension k, blocks (each tensor or the whole
    model), eigensolver and its iterations, and what a round without public clients does."""

    projection: ProjectionForm = ProjectionForm.PAPER
    projection_dims: int = 1
    projection_scope: ProjectionScope = ProjectionScope.TENSOR
    eigensolver: EigenSolver = EigenSolver.LANCZOS
    lanczos_iterations: int = 256
    no_public: NoPublic = NoPublic.WEIAVG

    def __post_init__(self) -> None:
        object.__setattr__(self, "projection", ProjectionForm.parse(self.projection))
        object.__setattr__(self, "projection_scope", parse_enum(ProjectionScope, self.projection_scope, "projection scope"))
        object.__setattr__(self, "eigensolver", EigenSolver.parse(self.eigensolver))
        object.__setattr__(self, "no_public", parse_enum(NoPublic, self.no_public, "no-public policy"))
        object.__setattr__(self, "projection_dims", _positive_int("projection dims k", self.projection_dims))
        object.__setattr__(self, "lanczos_iterations", _positive_int("Lanczos iterations", self.lanczos_iterations))


#: Flat option name → its group ("" for τ itself), in the order the family's options are listed.
OPTION_GROUPS: dict[str, str] = {
    "budgets": "budget", "budget_seed": "budget", "nonpositive": "budget", "second_parameter": "budget", "delta": "budget",
    "clip_norm": "local_dp", "calibration": "local_dp", "planned": "local_dp", "local_steps": "", "budget_policy": "local_dp",
    "split": "split", "public_clients": "split", "split_scope": "split",
    "projection": "projection", "projection_dims": "projection", "projection_scope": "projection", "eigensolver": "projection",
    "lanczos_iterations": "projection", "no_public": "projection", "model_init": "", "local_step_rule": "",
}


@dataclass(frozen=True)
class PFASettings:
    """Everything the PFA family adds to a federation's configuration: the four option groups and τ, the local
    DP-SGD steps per round (realised as whole Poisson epochs, or exactly with ``local_step_rule="exact"``:
    :func:`~privaudit.papers.pfa.budget_calibration.local_schedule`)."""

    budget: BudgetSettings = field(default_factory=BudgetSettings)
    local_dp: LocalDPSettings = field(default_factory=LocalDPSettings)
    split: SplitSettings = field(default_factory=SplitSettings)
    projection: ProjectionSettings = field(default_factory=ProjectionSettings)
    local_steps: int = 100
    #: the CNN's initialisation: PyTorch's defaults, or the reference's Keras ones (:mod:`privaudit.papers.pfa.model_init`)
    model_init: ModelInit = ModelInit.TORCH
    #: τ as whole Poisson epochs (default) or exactly τ DP-SGD steps per round (the reference code's count)
    local_step_rule: LocalStepRule = LocalStepRule.EPOCHS

    def __post_init__(self) -> None:
        object.__setattr__(self, "local_steps", _positive_int("local steps", self.local_steps))
        object.__setattr__(self, "model_init", ModelInit.parse(self.model_init))
        object.__setattr__(self, "local_step_rule", LocalStepRule.parse(self.local_step_rule))

    @classmethod
    def from_options(cls, **options: Any) -> PFASettings:
        """Settings from flat option names (:data:`OPTION_GROUPS`); an unknown name is one clear error."""
        unknown = sorted(set(options) - set(OPTION_GROUPS))
        if unknown:
            raise InvalidParameterError(f"unknown PFA option {unknown[0]!r}; known: {', '.join(OPTION_GROUPS)}")
        grouped: dict[str, dict[str, Any]] = {"budget": {}, "local_dp": {}, "split": {}, "projection": {}, "": {}}
        for name, value in options.items():
            grouped[OPTION_GROUPS[name]][name] = value
        projection = ProjectionSettings(**grouped["projection"])  # the cheap checks first; the budget file is read last
        split = SplitSettings(**grouped["split"])
        local_dp = LocalDPSettings(**grouped["local_dp"])
        return cls(budget=BudgetSettings(**grouped["budget"]), local_dp=local_dp, split=split, projection=projection, **grouped[""])

    def to_dict(self) -> dict[str, Any]:
        """Every option by its flat name (the order of the CLI's option list)."""
        flat = {**_flat(self.budget), **_flat(self.local_dp), "local_steps": self.local_steps, **_flat(self.split),
                **_flat(self.projection), "model_init": self.model_init.value, "local_step_rule": self.local_step_rule.value}
        return {name: flat[name] for name in OPTION_GROUPS}
