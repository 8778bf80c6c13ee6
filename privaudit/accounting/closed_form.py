"""Closed-form privacy bounds: what one states, and the ones the registered papers print.

A :class:`ClosedForm` is one evaluated bound: the value, the formula used, the assumptions (those that hold and those
that fail — failed assumptions are data, never exceptions), and where a numerical accountant can check the same
mechanism, the :class:`~privaudit.accounting.mechanisms.Composition` to check it with.

A :class:`ClosedFormSpec` is a paper's printed bound as a plug-in: its name, what it computes, the theorem (and code)
it states, its :class:`Parameter` list and the function that evaluates it. Each paper declares its own
(:attr:`privaudit.plugins.Paper.closed_forms`, in a torch-free module of the paper's package that imports only
``privaudit.accounting``); :func:`closed_forms` and :func:`closed_form` look them up by name through the paper
registry, so ``compute-epsilon`` states a paper's bound beside the accountants without this module naming a paper.
The value checks (:func:`positive`, :func:`count`, :func:`probability`) are the ones every form applies to its inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from privaudit import plugins
from privaudit.accounting.mechanisms import Composition
from privaudit.errors import InvalidParameterError


@dataclass(frozen=True)
class ClosedForm:
    """A closed-form ε with its provenance."""

    name: str
    value: float
    formula: str
    source: str
    assumptions: tuple[str, ...] = ()
    failed_assumptions: tuple[str, ...] = ()
    composition: Composition | None = field(default=None, compare=False)
    details: dict = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return not self.failed_assumptions


# -- value checks -------------------------------------------------------------------------------------------------------
def positive(name: str, value: float) -> float:
    """``value`` as a finite number > 0, or one clear error naming ``name``."""
    value = float(value)
    if not value > 0 or math.isnan(value) or math.isinf(value):
        raise InvalidParameterError(f"{name} must be a positive number, got {value}")
    return value


def count(name: str, value: int) -> int:
    """``value`` as an integer ≥ 1 (no bool), or one clear error naming ``name``."""
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise InvalidParameterError(f"{name} must be a positive integer, got {value}")
    return int(value)


def probability(name: str, value: float) -> float:
    """``value`` in the open interval (0, 1) (a δ), or one clear error naming ``name``."""
    value = float(value)
    if not 0 < value < 1:
        raise InvalidParameterError(f"{name} must lie in (0, 1), got {value}")
    return value


# -- closed forms as plug-ins -------------------------------------------------------------------------------------------
#: What a :class:`Parameter` holds: ``count`` an integer ≥ 1, ``positive`` a finite number > 0, ``number`` any number
#: (the form checks it), ``delta`` a δ in (0, 1), ``rate`` a sampling rate in (0, 1], ``choice`` one of ``choices``.
PARAMETER_KINDS = ("count", "positive", "number", "delta", "rate", "choice")


@dataclass(frozen=True)
class Parameter:
    """One input of a closed form, named as ``compute-epsilon``'s flag (``dataset_size`` ↔ ``--dataset-size``).

    ``default`` is used when the value is not given; ``None`` makes the parameter required. ``help`` is the flag's one
    line in ``compute-epsilon --help`` (the forms that take it are appended).
    """

    name: str
    kind: str
    default: Any = None
    choices: tuple[str, ...] = ()
    help: str = ""

    def __post_init__(self) -> None:
        if self.kind not in PARAMETER_KINDS:
            raise InvalidParameterError(f"parameter {self.name!r}: kind must be one of {', '.join(PARAMETER_KINDS)}")
        if (self.kind == "choice") != bool(self.choices):
            raise InvalidParameterError(f"parameter {self.name!r}: choices go with kind 'choice' only")

    @property
    def required(self) -> bool:
        return self.default is None


@dataclass(frozen=True)
class ClosedFormSpec:
    """A paper's printed bound, registered by name (see the module docstring).

    ``summary`` says what the form computes and ``reference`` which theorem (and reference code) it states;
    ``evaluate(**values)`` returns the :class:`ClosedForm` for a value of every parameter (call the spec itself to
    have the defaults filled in). ``gives`` is what the :attr:`ClosedForm.value` is: ``epsilon`` (a bound a mechanism
    is accounted against) or ``noise-multiplier`` (an effective multiplier a mechanism is built with). ``reported``
    names entries of the result's ``details`` a caller reports as derived inputs (e.g. a calibrated σ).
    """

    name: str
    summary: str
    reference: str
    parameters: tuple[Parameter, ...]
    evaluate: Callable[..., ClosedForm]
    gives: str = "epsilon"
    reported: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.gives not in ("epsilon", "noise-multiplier"):
            raise InvalidParameterError(f"closed form {self.name}: gives is 'epsilon' or 'noise-multiplier', got {self.gives!r}")

    @property
    def required(self) -> frozenset[str]:
        return frozenset(p.name for p in self.parameters if p.required)

    @property
    def optional(self) -> frozenset[str]:
        return frozenset(p.name for p in self.parameters if not p.required)

    def __call__(self, **given: Any) -> ClosedForm:
        """The bound for the ``given`` values (``None`` = not given: the parameter's default); unknown or missing
        parameters are one clear error."""
        names = {p.name for p in self.parameters}
        unknown = sorted(k for k, v in given.items() if v is not None and k not in names)
        if unknown:
            raise InvalidParameterError(f"closed form {self.name} takes no parameter(s) {', '.join(unknown)}")
        values = {p.name: p.default if given.get(p.name) is None else given[p.name] for p in self.parameters}
        missing = [name for name, value in values.items() if value is None]
        if missing:
            raise InvalidParameterError(f"closed form {self.name} needs {', '.join(missing)}")
        return self.evaluate(**values)


@cache
def closed_forms() -> dict[str, ClosedFormSpec]:
    """Every registered paper's closed forms by name (paper-key order)."""
    out: dict[str, ClosedFormSpec] = {}
    for name, (paper, ref) in plugins.collected("closed_forms").items():
        spec = ref.load()
        if not isinstance(spec, ClosedFormSpec) or spec.name != name:
            raise InvalidParameterError(f"paper {paper.key!r} registers closed form {name!r} ({ref.target}), which is not "
                                        f"a privaudit.accounting.closed_form.ClosedFormSpec named {name!r}")
        out[name] = spec
    return out


def closed_form(name: str) -> ClosedFormSpec:
    """The registered closed form called ``name``, or one clear error listing the known ones."""
    forms = closed_forms()
    if name not in forms:
        raise InvalidParameterError(f"unknown closed form {name!r}; registered: {', '.join(forms) or 'none'}")
    return forms[name]

