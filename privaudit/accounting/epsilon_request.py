"""What ``privaudit compute-epsilon`` asks, as one checked value, and the library function that answers it.

An :class:`EpsilonRequest` names exactly one source — a mechanism by name (:mod:`privaudit.accounting.epsilon_mechanisms`),
a schedule file (:mod:`privaudit.accounting.schedule`) or a trained federation's checkpoint — with δ, the accountant,
the neighbouring relation and the mechanism's parameters. Making it checks every field (one
:class:`~privaudit.errors.InvalidParameterError` naming the flag, before any accountant runs, ``--out`` included);
:func:`answer` then accounts a mechanism or a schedule, or calibrates σ (:func:`privaudit.accounting.calibrate.calibrate_noise`).
A checkpoint's ledger (read by :mod:`privaudit.fl.engine.checkpoint`) is accounted by :func:`ledger_answer`. Torch-free;
run the work inside :meth:`AccountingLimits.applied`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from privaudit.accounting import query
from privaudit.accounting.accountants import accountant_names, accountant_options, get_accountant
from privaudit.accounting.base import NO_GUARANTEE
from privaudit.accounting.calibrate import calibrate_noise
from privaudit.accounting.epsilon_mechanisms import flag, mechanism_specs, positive
from privaudit.accounting.ledger import LedgerSummary, PrivacyLedger
from privaudit.accounting.limits import set_default_limits
from privaudit.accounting.mechanisms import Neighbouring, Sampling
from privaudit.accounting.reported import assess_all
from privaudit.accounting.schedule import load_schedule
from privaudit.errors import InvalidParameterError
from privaudit.request_checks import check_out_folder

#: The ``--out`` file of a checkpoint's ledger result and of its ε curve, for the hint of a folder given instead.
LEDGER_FILE, CURVE_FILE = "ledger.json", "epsilon-curve.json"


@dataclass(frozen=True)
class AccountingLimits:
    """The numerics of one answer: the discretisation interval h of ctd and pld (``vdi``), the ε error bound of prv
    (``eps_error``) and the work units the accountants may use (:mod:`privaudit.accounting.limits`)."""

    vdi: float | None = None
    eps_error: float | None = None
    work_limit: float = 30.0

    def __post_init__(self) -> None:
        for name, value in (("vdi", self.vdi), ("eps_error", self.eps_error), ("work_limit", self.work_limit)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise InvalidParameterError(f"{flag(name)} must be a positive number, got {value}")

    @contextmanager
    def applied(self) -> Iterator[None]:
        """Within the block every accountant uses these limits. Extreme inputs (σ → 0) overflow intermediate arrays on
        purpose: the accountants check their results, so numpy's warnings are silenced."""
        previous = set_default_limits(work=self.work_limit)
        try:
            with accountant_options(value_discretization_interval=self.vdi, eps_error=self.eps_error), np.errstate(all="ignore"):
                yield
        finally:
            set_default_limits(previous.work, previous.memory_bytes)


@dataclass(frozen=True)
class CheckpointOutput:
    """A checkpoint's answer as a result file: ``out`` (a ``ledger`` result, or with ``curve`` an ``epsilon-curve``
    result evaluated at up to ``curve_points`` rounds)."""

    out: Path | None = None
    curve: bool = False
    curve_points: int | None = None

    def flags(self) -> list[str]:
        return [name for name, used in (("--out", self.out is not None), ("--curve", self.curve),
                                        ("--curve-points", self.curve_points is not None)) if used]


@dataclass(frozen=True)
class EpsilonRequest:
    """ε of one source at δ by one accountant (or ``all``), or with ``calibrate`` the smallest σ meeting ``epsilon``.

    ``parameters`` holds the mechanism's own values by parameter name (``noise_multiplier``, ``steps``, a closed
    form's parameters, …; ``None`` or ``False`` = not given), in the order they are reported. ``sampling`` and
    ``neighbouring`` are parsed once, here.
    """

    mechanism: str | None = None
    schedule: Path | None = None
    checkpoint: Path | None = None
    delta: float | None = None
    epsilon: float | None = None
    calibrate: bool = False
    accountant: str = "auto"
    neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE
    parameters: Mapping[str, Any] = field(default_factory=dict)
    limits: AccountingLimits = field(default_factory=AccountingLimits)
    output: CheckpointOutput = field(default_factory=CheckpointOutput)

    def __post_init__(self) -> None:
        self._check_sources()
        object.__setattr__(self, "neighbouring", Neighbouring.parse(self.neighbouring))
        parameters = dict(self.parameters)
        if parameters.get("sampling") is not None:
            parameters["sampling"] = Sampling.parse(parameters["sampling"])
        object.__setattr__(self, "parameters", MappingProxyType(parameters))
        if self.mechanism is None:
            source = "checkpoint" if self.checkpoint is not None else "schedule"
            extra = sorted(self._given() - {"delta"})
            if extra:
                raise InvalidParameterError(f"{', '.join(flag(e) for e in extra)} does not apply to --{source}")
            if self.delta is None:
                raise InvalidParameterError(f"--{source} needs --delta")
            if self.checkpoint is not None:
                self._check_checkpoint_output()
            return
        spec = mechanism_specs().get(self.mechanism_name)
        if spec is None:
            raise InvalidParameterError(f"unknown mechanism {self.mechanism!r}; choose one of: {', '.join(mechanism_specs())}")
        spec.check_given(self._given(), self.calibrate)
        if self.calibrate and self.accountant_name == "all":
            raise InvalidParameterError("--calibrate needs one accountant (or auto), not all")
        if self.calibrate and self.accountant_name == "gdp":
            raise InvalidParameterError("the gdp accountant is an approximation and is never used for calibration")

    def _check_sources(self) -> None:
        """Exactly one source, checkpoint-only outputs only with a checkpoint, and the shared values in range."""
        if self.checkpoint is None and self.output.flags():
            raise InvalidParameterError(f"{', '.join(self.output.flags())} writes a ledger or ε-curve result from a trained "
                                        "federation and needs --checkpoint DIR")
        sources = [n for n, v in (("--mechanism", self.mechanism), ("--schedule", self.schedule),
                                  ("--checkpoint", self.checkpoint)) if v is not None]
        if len(sources) != 1:
            raise InvalidParameterError("give exactly one of --mechanism, --schedule or --checkpoint"
                                        + (f" (got {', '.join(sources)})" if sources else ""))
        if self.accountant_name not in [*accountant_names(), "all", "default"]:
            raise InvalidParameterError(f"unknown accountant {self.accountant!r}; choose one of: "
                                        f"{', '.join([*accountant_names(), 'all'])}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise InvalidParameterError(f"--delta must lie in (0, 1), got {self.delta}")
        if self.epsilon is not None and (self.epsilon < 0 or math.isnan(self.epsilon)):
            raise InvalidParameterError(f"--epsilon must be non-negative, got {self.epsilon}")

    def _check_checkpoint_output(self) -> None:
        out = self.output.out
        if self.accountant_name == "all":
            raise InvalidParameterError("--accountant all is not available with --checkpoint; name one accountant")
        if out is not None and out.is_dir():
            raise InvalidParameterError(f"--out {out} is a directory; give a file name, e.g. "
                                        f"{out / (CURVE_FILE if self.output.curve else LEDGER_FILE)}")
        if out is not None:  # before the ledger is read and accounted, like every command's --out
            check_out_folder(out.parent, (out.name,))
        if self.output.curve_points is not None and self.output.curve_points < 2:
            raise InvalidParameterError(f"--curve-points must be at least 2, got {self.output.curve_points}")

    def _given(self) -> set[str]:
        """The names of the mechanism values given (the shared δ and ε included, when given)."""
        given = {name for name, value in self.parameters.items() if value is not None and value is not False}
        given |= {name for name, value in (("delta", self.delta), ("epsilon", self.epsilon)) if value is not None}
        return given | ({"calibrate"} if self.calibrate and self.mechanism is None else set())

    @property
    def mechanism_name(self) -> str:
        return (self.mechanism or "").strip().lower()

    @property
    def accountant_name(self) -> str:
        return self.accountant.strip().lower()

    def values(self) -> dict[str, Any]:
        """Every mechanism value by name, δ, ε and the neighbouring relation included (what a mechanism is built from)."""
        return {**self.parameters, "delta": self.delta, "epsilon": self.epsilon, "neighbouring": self.neighbouring}

    def inputs(self) -> dict[str, Any]:
        """The request as the answer reports it: every value given, enums by their value, in the command's order (the
        mechanism, its :data:`LEADING` values, the shared ones, then the others)."""
        shared = {"delta": self.delta, "epsilon": self.epsilon, "calibrate": self.calibrate, "accountant": self.accountant,
                  "neighbouring": self.neighbouring}
        leading = {k: v for k, v in self.parameters.items() if k in LEADING}
        rest = {k: v for k, v in self.parameters.items() if k not in LEADING}
        ordered = {"mechanism": self.mechanism, **leading, **shared, **rest}
        return {k: _plain(v) for k, v in ordered.items() if v is not None and v is not False}


#: The mechanism values reported before the shared ones (δ, ε, accountant, …), as the command lists its flags.
LEADING = ("noise_multiplier", "sample_rate", "steps")


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Neighbouring | Sampling) else value


@dataclass(frozen=True)
class EpsilonAnswer:
    """The answer as data (the ``--json`` object) and a title for its table; ``calibration`` tells the two kinds apart."""

    data: dict[str, Any]
    title: str
    calibration: bool = False


def answer(request: EpsilonRequest) -> EpsilonAnswer:
    """ε of a mechanism or a schedule by the accountant(s) asked, or the calibrated σ (a checkpoint: :func:`ledger_answer`)."""
    if request.checkpoint is not None:
        raise InvalidParameterError("a checkpoint's ε comes from its ledger: use ledger_answer")
    acct = request.accountant_name
    if request.schedule is not None:
        composition = load_schedule(request.schedule)
        if request.neighbouring is not Neighbouring.ADD_REMOVE:
            composition = type(composition)(composition.entries, request.neighbouring)
        report = query.epsilon_report(composition, request.delta, acct, inputs={"schedule": str(request.schedule)})
        return EpsilonAnswer(report.to_dict(), f"ε at δ = {request.delta:g} for {request.schedule}")
    spec = mechanism_specs()[request.mechanism_name]
    if request.calibrate:
        return _calibration(request)
    built = spec.build(request.values())
    report = query.epsilon_report(built.composition, request.delta, acct, inputs={**request.inputs(), **built.inputs},
                                  closed_form=built.closed_form)
    report.extra_assumptions.extend(built.assumptions)
    title = f"ε at δ = {request.delta:g}" if request.delta is not None else "ε (pure DP, δ = 0)"
    return EpsilonAnswer(report.to_dict(), f"{title} — {request.mechanism_name}")


def _calibration(request: EpsilonRequest) -> EpsilonAnswer:
    """The smallest σ meeting ε at δ (calibratable mechanisms), with ε at that σ by the calibrating accountant and RDP."""
    target = positive("epsilon", request.epsilon)
    spec = mechanism_specs()[request.mechanism_name]
    assert spec.calibrate is not None  # checked when the request was made
    make = spec.calibrate(request.values())
    cal = calibrate_noise(make, target, request.delta, accountant=request.accountant_name)
    at_noise = {cal.accountant: cal.epsilon_at_noise.json_value()}
    rdp = get_accountant("rdp")
    if cal.accountant != "rdp" and rdp.supports(make(cal.noise_multiplier)):
        at_noise["rdp"] = rdp.epsilon(make(cal.noise_multiplier), request.delta).epsilon
    split = request.parameters.get("tensors")
    root_l = 1.0 if split is None else math.sqrt(split)
    data = {
        "inputs": request.inputs(),
        "noise_multiplier": cal.noise_multiplier,
        "accountant": cal.accountant,
        "target_epsilon": target,
        "delta": request.delta,
        "epsilon_at_noise": at_noise,
        "notes": list(cal.notes) + ([f"per-tensor clipping: the effective multiplier is σ/√{split} = "
                                     f"{cal.noise_multiplier / root_l:.6g}"] if split else []),
    }
    return EpsilonAnswer(data, "", calibration=True)


@dataclass(frozen=True)
class LedgerAnswer:
    """Per-client ε of a trained federation's ledger: the summary, its data (the ``--json`` object), the training
    framework's own reported ε assessed against the ledger, and whether the run claims nothing (no privacy event)."""

    summary: LedgerSummary
    data: dict[str, Any]
    reported: list[Any]
    claims_nothing: bool


def ledger_answer(ledger: PrivacyLedger, delta: float, accountant: str, reported: Any = None) -> LedgerAnswer:
    """Every client's ε at δ (:meth:`PrivacyLedger.summary`); ``reported`` is the manifest's ``reported_epsilon``.

    A run that recorded no privacy event at all (checkpoints of non-private runs before events existed) claims nothing:
    its ε is ∞ and its statement says so.
    """
    summary = ledger.summary(delta, accountant=accountant)
    data = summary.to_dict()
    claims_nothing = not ledger.events and not ledger.budgets
    if claims_nothing:
        data.update({"max_epsilon": math.inf, "mean_epsilon": math.inf, "guarantee": "none",
                     "statement": f"{NO_GUARANTEE}: the run records no privacy events (no DP claim)"})
    assessed = reported or []
    if assessed:  # what the training framework itself claimed
        data["reported_epsilon"] = assessed = assess_all(assessed if isinstance(assessed, list) else [], ledger, accountant)
    return LedgerAnswer(summary, data, assessed, claims_nothing)
