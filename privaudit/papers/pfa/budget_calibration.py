"""Per-client DP-SGD noise σ_m for heterogeneous budgets ε_m, and the ε each client really spends.

PFA (004 §4.2, "heterogeneous budgets"; Theorem 1) sets each client's noise from its own budget so "all
clients' privacy budgets will run out roughly at the same time", over the client's planned local steps
T* = K·T/M (T = R·τ SGD iterations in total, K of M clients per round). Calibrations:

* ``rdp`` / ``prv`` (default ``rdp``) — σ_m is the smallest noise multiplier whose composition of
  T*_m Poisson-subsampled Gaussian steps at rate q_m = B/N_m meets (ε_m, δ) under that accountant
  (:func:`privaudit.accounting.calibrate.calibrate_noise`), as the paper states it should be ("we apply the
  moments accountant ... and terminate before the loss exceeds the target budget");
* ``reference`` — the reference code's closed form σ = 10·q·sqrt(T·log₁₀(1/δ))/ε
  (``compute_noise_multiplier``, :func:`privaudit.papers.pfa.closed_forms.pfa_reference_noise`, audit point F1), with
  T = K·R·τ/M. It is not derived from any accountant; :func:`client_privacy` shows the ε it really gives.

Planned steps (``planned="expected"``, the paper's T*): a client is planned to train in ⌊K·R/M⌋ rounds of
τ_m steps (for the reference closed form T is the unrounded K·R·τ_m/M, as that code passes it). T* is an
*expectation* under uniform client sampling (audit point F2): without the ledger's pre-check a client sampled more
often than ⌊K·R/M⌋ times would exceed ε_m. ``planned="every-round"`` calibrates for all R rounds (no
client can exceed its budget, at the cost of more noise).

Torch-free (numpy and :mod:`privaudit.accounting` only).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.calibrate import calibrate_noise
from privaudit.accounting.mechanisms import Composition, SubsampledGaussian
from privaudit.checks import parse_enum
from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.closed_forms import pfa_reference_epsilon, pfa_reference_noise


class CalibrationMethod(str, Enum):
    RDP = "rdp"
    PRV = "prv"
    REFERENCE = "reference"

    @classmethod
    def parse(cls, value: str | CalibrationMethod) -> CalibrationMethod:
        if isinstance(value, CalibrationMethod):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown calibration {value!r}; use 'rdp', 'prv' or 'reference'")

    @property
    def accountant(self) -> str | None:
        """The accountant that calibrates (and pre-checks) this method; ``None`` for the closed form."""
        return None if self is CalibrationMethod.REFERENCE else self.value


class PlannedSteps(str, Enum):
    EXPECTED = "expected"  # the paper's T* = K·R·τ/M
    EVERY_ROUND = "every-round"  # R·τ: the client may be sampled in every round

    @classmethod
    def parse(cls, value: str | PlannedSteps) -> PlannedSteps:
        return parse_enum(cls, value, "planned steps")


def planned_rounds(policy: str | PlannedSteps, clients_per_round: int, rounds: int, num_clients: int) -> float:
    """Rounds a client is planned to train in: K·R/M (``expected``, unrounded) or R (``every-round``)."""
    policy = PlannedSteps.parse(policy)
    if policy is PlannedSteps.EVERY_ROUND:
        return float(rounds)
    return clients_per_round * rounds / num_clients


@dataclass(frozen=True)
class ClientCalibration:
    """One client's calibrated noise: target ε_m (the budget it trains at), q_m, steps per round, T*_m, σ_m."""

    client_id: int
    epsilon: float
    delta: float
    sample_rate: float
    steps_per_round: int
    planned_rounds: int
    planned_steps: float
    noise_multiplier: float
    method: str

    @property
    def mechanism(self) -> SubsampledGaussian:
        return SubsampledGaussian(self.noise_multiplier, self.sample_rate)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def poisson_steps_per_epoch(sample_rate: float) -> int:
    """⌈1/q⌉: the Poisson DP-SGD steps of one local epoch (as :func:`privaudit.fl.privacy.dpsgd.steps_per_epoch`, torch-free)."""
    return max(1, math.ceil(1.0 / float(sample_rate) - 1e-9))


class LocalStepRule(str, Enum):
    """How τ local steps per round are realised."""

    EPOCHS = "epochs"  # whole Poisson epochs: E_m = max(1, round(τ/⌈1/q⌉)) epochs of ⌈1/q⌉ steps (privaudit's default)
    #: exactly τ DP-SGD steps per round, as the reference code's ``local_update`` loops ``for it in range(loc_steps)``
    #: (Emory-AIMS/PFA@72b3f89:modules/client.py); the batches stay Poisson at q = B/|D_m| (the reference draws fixed-size
    #: ones, audit point F3)
    EXACT = "exact"

    @classmethod
    def parse(cls, value: str | LocalStepRule) -> LocalStepRule:
        return parse_enum(cls, value, "local-step rule")


def local_schedule(client_size: int, batch_size: int, local_steps: int,
                   rule: LocalStepRule | str = LocalStepRule.EPOCHS) -> tuple[float, int, int]:
    """(q_m, epochs E_m, steps per round) realising τ = ``local_steps``: E_m·⌈1/q_m⌉ with whole Poisson epochs, or τ.

    DP-SGD (:mod:`privaudit.fl.privacy.dpsgd`) runs whole epochs of ⌈1/q⌉ steps, q = B/|D_m|; E_m = max(1, round(τ/⌈1/q⌉)).
    With ``rule="exact"`` it runs τ steps (E_m is then the epochs non-private clients run, ⌈τ/⌈1/q⌉⌉).
    """
    rate = min(1.0, batch_size / max(int(client_size), 1))
    per_epoch = poisson_steps_per_epoch(rate)
    if LocalStepRule.parse(rule) is LocalStepRule.EXACT:
        return rate, max(1, math.ceil(int(local_steps) / per_epoch)), int(local_steps)
    epochs = max(1, round(int(local_steps) / per_epoch))
    return rate, epochs, epochs * per_epoch


def _check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def calibrate_clients(
    epsilons: Sequence[float],
    sample_rates: Sequence[float],
    steps_per_round: Sequence[int],
    *,
    delta: float,
    clients_per_round: int,
    rounds: int,
    method: str | CalibrationMethod = CalibrationMethod.RDP,
    planned: str | PlannedSteps = PlannedSteps.EXPECTED,
    num_clients: int | None = None,
) -> list[ClientCalibration]:
    """σ_m for every client given (clients with equal (ε, q, τ) share one calibration).

    ``num_clients`` is the population M of T* = K·R·τ/M (default: the number of budgets given).
    """
    method = CalibrationMethod.parse(method)
    planned = PlannedSteps.parse(planned)
    if not (len(sample_rates) == len(steps_per_round) == len(epsilons)):
        raise InvalidParameterError("calibration needs one ε, one sampling rate and one step count per client")
    num_clients = len(epsilons) if num_clients is None else _check_positive_int("number of clients", num_clients)
    clients_per_round = _check_positive_int("clients per round", clients_per_round)
    rounds = _check_positive_int("rounds", rounds)
    if clients_per_round > num_clients:
        raise InvalidParameterError(f"cannot sample {clients_per_round} of {num_clients} clients per round")
    expected_rounds = planned_rounds(planned, clients_per_round, rounds, num_clients)
    whole_rounds = max(1, math.floor(expected_rounds + 1e-9))
    memo: dict[tuple[float, float, int], float] = {}
    out = []
    for client, (eps, q, tau) in enumerate(zip(epsilons, sample_rates, steps_per_round, strict=True)):
        tau = _check_positive_int("local steps per round", tau)
        if method is CalibrationMethod.REFERENCE:
            steps: float = expected_rounds * tau
            sigma = pfa_reference_noise(q, steps, delta, eps)
        else:
            steps = whole_rounds * tau
            key = (float(eps), float(q), int(steps))
            if key not in memo:
                memo[key] = calibrate_noise(
                    lambda s, q=float(q), n=int(steps): Composition.of(SubsampledGaussian(s, q), n), float(eps), delta,
                    accountant=method.value,
                ).noise_multiplier
            sigma = memo[key]
        out.append(ClientCalibration(client, float(eps), float(delta), float(q), tau, whole_rounds, float(steps), float(sigma), method.value))
    return out


def spent_epsilon(calibration: ClientCalibration, steps: int, accountant: str | Any = "rdp") -> float:
    """ε after ``steps`` DP-SGD steps at the client's (σ_m, q_m) by a numerical accountant."""
    if steps <= 0:
        return 0.0
    composition = Composition.of(calibration.mechanism, int(steps))
    return float(get_accountant(accountant).epsilon(composition, calibration.delta).epsilon)


def reference_spent_epsilon(calibration: ClientCalibration, steps: int) -> float:
    """The reference code's "budget accountant": the closed form inverted at ``steps`` (audit point F1)."""
    if steps <= 0:
        return 0.0
    return pfa_reference_epsilon(calibration.sample_rate, steps, calibration.delta, calibration.noise_multiplier)


@dataclass(frozen=True)
class ClientPrivacy:
    """Claimed ε_m, the noise it got, the steps it really took, and the ε a real accountant gives for them."""

    client_id: int
    claimed_epsilon: float
    noise_multiplier: float
    sample_rate: float
    planned_steps: float
    realised_steps: int
    epsilon_realised: float
    epsilon_at_plan: float
    accountant: str
    calibration: str

    @property
    def ratio(self) -> float:
        """Real ε over claimed ε at the realised steps (> 1: the client's budget was exceeded)."""
        return self.epsilon_realised / self.claimed_epsilon

    @property
    def over_budget(self) -> bool:
        return self.epsilon_realised > self.claimed_epsilon * (1 + 1e-9)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "over_budget": self.over_budget}


def client_privacy(
    calibrations: Sequence[ClientCalibration],
    realised_steps: Mapping[int, int] | None = None,
    accountant: str | Any = "rdp",
    claimed: Sequence[float] | None = None,
) -> list[ClientPrivacy]:
    """Per client: (claimed ε_m, σ_m, realised steps, real ε) under the calibration that produced σ_m.

    ``realised_steps`` maps client → DP-SGD steps actually taken (from a run's ledger); without it the planned
    steps are used (rounded down). ``claimed`` overrides the claimed ε (e.g. the client's own preference
    when the run trained at another operating budget, as PFA's Maximum baseline does).
    """
    name = get_accountant(accountant).name
    out = []
    for i, c in enumerate(calibrations):
        planned_int = math.floor(c.planned_steps + 1e-9)
        steps = planned_int if realised_steps is None else int(realised_steps.get(c.client_id, 0))
        eps_plan = spent_epsilon(c, planned_int, accountant)
        eps_real = eps_plan if steps == planned_int else spent_epsilon(c, steps, accountant)
        out.append(ClientPrivacy(
            client_id=c.client_id,
            claimed_epsilon=float(claimed[i]) if claimed is not None else c.epsilon,
            noise_multiplier=c.noise_multiplier,
            sample_rate=c.sample_rate,
            planned_steps=c.planned_steps,
            realised_steps=steps,
            epsilon_realised=eps_real,
            epsilon_at_plan=eps_plan,
            accountant=name,
            calibration=c.method,
        ))
    return out


def summarise_privacy(rows: Sequence[ClientPrivacy]) -> dict[str, Any]:
    """max / mean of the real ε and of real/claimed, and the clients over budget."""
    if not rows:
        return {"clients": 0}
    real = [r.epsilon_realised for r in rows]
    ratios = [r.ratio for r in rows]
    return {
        "clients": len(rows),
        "max_epsilon": max(real),
        "mean_epsilon": sum(real) / len(real),
        "max_claimed": max(r.claimed_epsilon for r in rows),
        "max_ratio": max(ratios),
        "min_ratio": min(ratios),
        "over_budget": [r.client_id for r in rows if r.over_budget],
        "accountant": rows[0].accountant,
        "calibration": rows[0].calibration,
    }


@dataclass(frozen=True)
class ClientPlan:
    """The run a calibration is planned for: batch size B, K clients per round of the population M (``num_clients``,
    default one client per budget), R rounds of τ = ``local_steps`` local steps, δ, and how τ and T*_m are counted."""

    batch_size: int
    clients_per_round: int
    rounds: int
    local_steps: int
    delta: float
    num_clients: int | None = None
    step_rule: LocalStepRule | str = LocalStepRule.EPOCHS
    planned: str | PlannedSteps = PlannedSteps.EXPECTED


def plan_client_privacy(
    epsilons: Sequence[float],
    client_sizes: Sequence[int],
    plan: ClientPlan,
    *,
    calibration: str | CalibrationMethod = CalibrationMethod.RDP,
    accountant: str | Any = "rdp",
    realised_steps: Mapping[int, int] | None = None,
) -> list[ClientPrivacy]:
    """Without training: each client's σ_m under ``calibration`` and the ε ``accountant`` gives for its steps.

    The steps are the plan's T*_m (or ``realised_steps``). This is the claim-level view of PFA's privacy: the reference
    calibration's ε as a real accountant sees it (audit point F1).
    """
    schedules = [local_schedule(n, plan.batch_size, plan.local_steps, plan.step_rule) for n in client_sizes]
    calibrations = calibrate_clients(
        epsilons, [q for q, _, _ in schedules], [s for _, _, s in schedules], delta=plan.delta,
        clients_per_round=plan.clients_per_round, rounds=plan.rounds, method=calibration, planned=plan.planned,
        num_clients=plan.num_clients,
    )
    return client_privacy(calibrations, realised_steps, accountant)
