"""The mechanisms ``compute-epsilon`` accounts by name: which parameters each needs, and how it becomes a composition.

A :class:`MechanismSpec` declares a mechanism's required and optional parameters (by the names of the command's flags,
``noise_multiplier`` ↔ ``--noise-multiplier``) and builds, from the values given, the
:class:`~privaudit.accounting.mechanisms.Composition` the accountants bound — plus, for a closed form, the
:class:`~privaudit.accounting.closed_form.ClosedForm` it states. The generic mechanisms are defined here (the Gaussian
mechanism, Dwork & Roth 2014 App. A; its Poisson- or fixed-size-subsampled form, Abadi et al. 2016; the Laplace
mechanism, Dwork et al. 2006; an ε-DP release composed k times); the closed forms come from the
registered papers through :func:`closed_form_specs` (:func:`privaudit.accounting.closed_form.closed_forms`). Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from privaudit.accounting.closed_form import ClosedForm, ClosedFormSpec, closed_form, closed_forms
from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Laplace,
    Neighbouring,
    PureDP,
    Sampling,
    SubsampledGaussian,
)
from privaudit.errors import InvalidParameterError

#: The parameters every mechanism accepts besides its own (the request's shared fields).
COMMON = frozenset({"delta", "accountant", "neighbouring"})
#: The registered closed form that gives the effective noise multiplier of ``tensors`` separately noised tensors.
EFFECTIVE_MULTIPLIER = "per-tensor-clipping"


def flag(name: str) -> str:
    """The command-line flag of a parameter name (``noise_multiplier`` → ``--noise-multiplier``)."""
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class Built:
    """A mechanism made from its values: the composition to account (``None``: no accountant applies), the closed form
    it states, extra inputs to report (e.g. the effective noise multiplier) and assumptions the accounting rests on."""

    composition: Composition | None
    closed_form: ClosedForm | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class MechanismSpec:
    """One mechanism by name: its required and optional parameters, how it is built, whether σ can be calibrated.

    ``build`` receives the parameters given by name (one left out or ``None``: not given), ``delta`` and ``neighbouring``
    (a :class:`~privaudit.accounting.mechanisms.Neighbouring`) included, and checks the values it uses.
    ``calibrate`` (calibratable mechanisms only) returns σ ↦ the composition at noise multiplier σ.
    """

    name: str
    required: frozenset[str]
    optional: frozenset[str]
    build: Callable[[Mapping[str, Any]], Built]
    calibrate: Callable[[Mapping[str, Any]], Callable[[float], Composition]] | None = None

    def check_given(self, given: set[str], calibrating: bool) -> None:
        """One line for a parameter that does not apply to this mechanism, else for the first missing one."""
        required, allowed = set(self.required), set(self.required | self.optional | COMMON)
        if calibrating:
            if self.calibrate is None:
                raise InvalidParameterError(f"--calibrate works with --mechanism {' or '.join(calibratable())}, not {self.name}")
            required = (required - {"noise_multiplier"}) | {"epsilon"}
            allowed = (allowed - {"noise_multiplier"}) | {"epsilon"}
        extra = sorted(given - allowed)
        if extra:
            raise InvalidParameterError(f"{', '.join(flag(e) for e in extra)} does not apply to --mechanism {self.name}"
                                        + (" with --calibrate" if calibrating else ""))
        missing = sorted(required - given)
        if missing:
            raise InvalidParameterError(f"--mechanism {self.name} needs {', '.join(flag(m) for m in missing)}")


# -- value checks (each names its flag) ---------------------------------------------------------------------------------
def positive(name: str, value: float | None) -> float:
    if value is None or not value > 0 or math.isnan(value) or math.isinf(value):
        raise InvalidParameterError(f"{flag(name)} must be a positive number, got {value}")
    return float(value)


def count(name: str, value: int | None) -> int:
    if value is None or value < 1:
        raise InvalidParameterError(f"{flag(name)} must be a positive integer, got {value}")
    return int(value)


def sample_rate(value: float | None) -> float:
    if value is None or not 0 < value <= 1:
        raise InvalidParameterError(f"--sample-rate must lie in (0, 1], got {value}")
    return float(value)


def sensitivity_number(value: str | None) -> float:
    """``--sensitivity`` of a Gaussian or Laplace mechanism: a positive number (default 1)."""
    if value is None:
        return 1.0
    try:
        number = float(value)
    except ValueError:
        raise InvalidParameterError(f"--sensitivity must be a positive number for this mechanism, got {value!r}") from None
    return positive("sensitivity", number)


def tensors(value: int | None) -> int | None:
    if value is not None and value < 1:
        raise InvalidParameterError(f"--tensors must be a positive integer, got {value}")
    return value


# -- the generic mechanisms ---------------------------------------------------------------------------------------------
def _gaussian(p: Mapping[str, Any], subsampled: bool) -> Built:
    sigma = positive("noise_multiplier", p.get("noise_multiplier"))
    steps = count("steps", p.get("steps"))
    split = tensors(p.get("tensors"))
    per_tensor = None if split is None else closed_form(EFFECTIVE_MULTIPLIER)(noise_multiplier=sigma, num_tensors=split)
    z = sigma if per_tensor is None else per_tensor.value
    if subsampled:
        mech: Gaussian | SubsampledGaussian = SubsampledGaussian(z, sample_rate(p.get("sample_rate")), p.get("sampling") or Sampling.POISSON)
    else:
        mech = Gaussian(z, sensitivity_number(p.get("sensitivity")))
    if per_tensor is None:
        return Built(Composition.of(mech, steps, p.get("neighbouring")))
    return Built(Composition.of(mech, steps, p.get("neighbouring")), inputs={"effective_noise_multiplier": per_tensor.value},
                 assumptions=tuple(per_tensor.assumptions))


def _gaussian_family(p: Mapping[str, Any], subsampled: bool) -> Callable[[float], Composition]:
    """σ ↦ the (subsampled) Gaussian composition at multiplier σ/√L (L separately noised tensors, default 1)."""
    steps = count("steps", p.get("steps"))
    rel = p.get("neighbouring")
    split = tensors(p.get("tensors"))
    root_l = 1.0 if split is None else math.sqrt(split)
    if not subsampled:
        sens = sensitivity_number(p.get("sensitivity"))
        return lambda sigma: Composition.of(Gaussian(sigma / root_l, sens), steps, rel)
    q = sample_rate(p.get("sample_rate"))
    sampling = p.get("sampling") or Sampling.POISSON
    return lambda sigma: Composition.of(SubsampledGaussian(sigma / root_l, q, sampling), steps, rel)


def _laplace(p: Mapping[str, Any]) -> Built:
    mech = Laplace(positive("scale", p.get("scale")), sensitivity_number(p.get("sensitivity")))
    return Built(Composition.of(mech, count("steps", p.get("steps")), p.get("neighbouring")))


def _pure_dp(p: Mapping[str, Any]) -> Built:
    eps = p.get("epsilon")
    if eps is None or eps < 0:
        raise InvalidParameterError(f"--epsilon must be non-negative, got {eps}")
    return Built(Composition.of(PureDP(eps), count("steps", p.get("steps")), p.get("neighbouring")))


GENERIC: tuple[MechanismSpec, ...] = (
    MechanismSpec("gaussian", frozenset({"noise_multiplier", "steps", "delta"}), frozenset({"sensitivity", "tensors"}),
                  lambda p: _gaussian(p, False), lambda p: _gaussian_family(p, False)),
    MechanismSpec("subsampled-gaussian", frozenset({"noise_multiplier", "sample_rate", "steps", "delta"}),
                  frozenset({"sampling", "tensors"}), lambda p: _gaussian(p, True), lambda p: _gaussian_family(p, True)),
    MechanismSpec("laplace", frozenset({"scale", "steps", "delta"}), frozenset({"sensitivity"}), _laplace),
    MechanismSpec("pure-dp", frozenset({"epsilon", "steps", "delta"}), frozenset(), _pure_dp),
)


# -- the closed forms the registered papers print (privaudit.accounting.closed_form) -------------------------------------
def _with_neighbours(closed: ClosedForm, rel: Neighbouring) -> Composition | None:
    return None if closed.composition is None else Composition(closed.composition.entries, rel)


#: The value check each kind of closed-form parameter gets here, with its flag in the message (others: the form's own).
_CHECKS: dict[str, Callable[[str, Any], Any]] = {"count": count, "positive": positive, "rate": lambda _, v: sample_rate(v)}


def _closed_form_build(form: ClosedFormSpec) -> Callable[[Mapping[str, Any]], Built]:
    def build(p: Mapping[str, Any]) -> Built:
        values = {}
        for parameter in form.parameters:
            value, check = p.get(parameter.name), _CHECKS.get(parameter.kind)
            values[parameter.name] = check(parameter.name, value) if check is not None and value is not None else value
        closed = form(**values)
        return Built(_with_neighbours(closed, p.get("neighbouring")), closed, {k: closed.details[k] for k in form.reported})

    return build


def closed_form_specs() -> tuple[MechanismSpec, ...]:
    """The closed forms ``compute-epsilon`` states beside the accountants (the registered papers' forms that give an
    ε, :func:`~privaudit.accounting.closed_form.closed_forms`), with the parameters each needs."""
    return tuple(MechanismSpec(form.name, form.required, form.optional, _closed_form_build(form))
                 for form in closed_forms().values() if form.gives == "epsilon")


def mechanism_specs() -> dict[str, MechanismSpec]:
    """Every mechanism by name, the generic ones first."""
    return {spec.name: spec for spec in (*GENERIC, *closed_form_specs())}


def calibratable() -> tuple[str, ...]:
    return tuple(spec.name for spec in GENERIC if spec.calibrate is not None)
