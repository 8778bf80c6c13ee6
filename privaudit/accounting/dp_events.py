"""Import and export of google dp-accounting's ``DpEvent`` vocabulary (when dp-accounting is installed).

:func:`to_dp_event` turns a :class:`~privaudit.accounting.mechanisms.Composition` into one ``DpEvent``
(a ``ComposedDpEvent`` of ``SelfComposedDpEvent``s), :func:`from_dp_event` reads one back. The mapping, per
release (noise in units of the sensitivity, as dp-accounting states it):

=====================================================  ==============================================================
privaudit                                              dp-accounting
=====================================================  ==============================================================
``Gaussian(σ, Δ)``                                     ``GaussianDpEvent(σ/Δ)``
``SubsampledGaussian(σ, q)`` (Poisson)                 ``PoissonSampledDpEvent(q, GaussianDpEvent(σ))``
``SubsampledGaussian(σ, q, fixed-size)``               ``SampledWithoutReplacementDpEvent(n, q·n, GaussianDpEvent(σ))``
                                                       (needs the dataset size n; q·n must be an integer)
``Laplace(b, Δ)``                                      ``LaplaceDpEvent(b/Δ)``
``PureDP(ε, proven for replace-one)``                  ``RandomizedResponseDpEvent(2/(1+e^ε), 2)`` (binary randomised
                                                       response dominates every ε-DP pair; dp-accounting analyses it
                                                       under replace-one only)
``PureDP(∞)`` (no guarantee)                           ``NonPrivateDpEvent()``
=====================================================  ==============================================================

``NoOpDpEvent`` imports as nothing. Anything else (zCDP, Skellam, tree aggregation, truncated sampling, sampling
with replacement, an ε-DP release proven for add/remove, randomised response with more than 2 buckets) is refused
with :class:`~privaudit.errors.UnsupportedMechanismError` naming the event — never mapped to something it is not
(a ρ-zCDP release, for example, is *not* dominated by a Gaussian's privacy-loss distribution). dp-accounting's
events carry no neighbouring relation: the accountant that composes them does; privaudit's composition keeps it.
"""

from __future__ import annotations

import math
from typing import Any

from privaudit.accounting.mechanisms import (
    Composition,
    Gaussian,
    Laplace,
    Mechanism,
    Neighbouring,
    PureDP,
    Sampling,
    SubsampledGaussian,
)
from privaudit.errors import DataUnavailableError, UnsupportedMechanismError


def _dp_accounting() -> Any:
    try:
        import dp_accounting
    except ImportError:  # pragma: no cover - dp-accounting is a declared dependency
        raise DataUnavailableError("dp-accounting is not installed (pip install dp-accounting)") from None
    return dp_accounting


def mechanism_to_dp_event(mechanism: Mechanism, dataset_size: int | None = None) -> Any:
    """One release as a ``DpEvent`` (see the module table)."""
    dp = _dp_accounting()
    if isinstance(mechanism, Gaussian):
        return dp.GaussianDpEvent(mechanism.z)
    if isinstance(mechanism, SubsampledGaussian):
        inner = dp.GaussianDpEvent(mechanism.z)
        if mechanism.sample_rate >= 1.0:
            return inner
        if mechanism.sampling is Sampling.POISSON:
            return dp.PoissonSampledDpEvent(mechanism.sample_rate, inner)
        if dataset_size is None:
            raise UnsupportedMechanismError("fixed-size sampling without replacement needs the dataset size n to become "
                                            "dp-accounting's SampledWithoutReplacementDpEvent(n, q·n, …)")
        sample = mechanism.sample_rate * dataset_size
        if abs(sample - round(sample)) > 1e-9 * dataset_size:
            raise UnsupportedMechanismError(f"q·n = {sample:g} is not an integer batch size")
        return dp.SampledWithoutReplacementDpEvent(int(dataset_size), round(sample), inner)
    if isinstance(mechanism, Laplace):
        return dp.LaplaceDpEvent(mechanism.scale / mechanism.sensitivity)
    if isinstance(mechanism, PureDP):
        if math.isinf(mechanism.epsilon):
            return dp.NonPrivateDpEvent()
        if mechanism.proven_for is not Neighbouring.REPLACE_ONE:
            raise UnsupportedMechanismError(
                f"{mechanism.describe()}: dp-accounting's only ε-DP event (randomised response) is analysed under "
                "replace-one neighbours; a guarantee proven for add/remove has no faithful DpEvent")
        return dp.RandomizedResponseDpEvent(2.0 / (1.0 + math.exp(mechanism.epsilon)), 2)
    raise UnsupportedMechanismError(f"{mechanism.describe()} has no dp-accounting DpEvent")


def to_dp_event(composition: Composition, dataset_size: int | None = None) -> Any:
    """The composition as one ``DpEvent`` (``ComposedDpEvent`` of ``SelfComposedDpEvent`` per distinct release)."""
    dp = _dp_accounting()
    events = []
    for mechanism, count in composition:
        event = mechanism_to_dp_event(mechanism, dataset_size)
        events.append(event if count == 1 else dp.SelfComposedDpEvent(event, int(count)))
    if not events:
        return dp.NoOpDpEvent()
    return events[0] if len(events) == 1 else dp.ComposedDpEvent(events)


def _entries(event: Any, dp: Any, times: int) -> list[tuple[Mechanism, int]]:
    name = type(event).__name__
    if isinstance(event, dp.NoOpDpEvent):
        return []
    if isinstance(event, dp.ComposedDpEvent):
        return [entry for inner in event.events for entry in _entries(inner, dp, times)]
    if isinstance(event, dp.SelfComposedDpEvent):
        return _entries(event.event, dp, times * int(event.count))
    if isinstance(event, dp.NonPrivateDpEvent):
        return [(PureDP(math.inf), times)]
    if isinstance(event, dp.GaussianDpEvent):
        return [(Gaussian(float(event.noise_multiplier)), times)]
    if isinstance(event, dp.LaplaceDpEvent):
        return [(Laplace(float(event.noise_multiplier)), times)]
    if isinstance(event, dp.PoissonSampledDpEvent) and isinstance(event.event, dp.GaussianDpEvent):
        q = float(event.sampling_probability)
        if q <= 0:
            return []
        return [(SubsampledGaussian(float(event.event.noise_multiplier), q), times)]
    if isinstance(event, dp.SampledWithoutReplacementDpEvent) and isinstance(event.event, dp.GaussianDpEvent):
        q = event.sample_size / event.source_dataset_size
        return [(SubsampledGaussian(float(event.event.noise_multiplier), q, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT), times)]
    if isinstance(event, dp.RandomizedResponseDpEvent) and int(event.num_buckets) == 2:
        p = float(event.noise_parameter)
        eps = math.inf if p <= 0 else math.log((1.0 - p / 2.0) / (p / 2.0))
        return [(PureDP(eps, proven_for=Neighbouring.REPLACE_ONE), times)]
    raise UnsupportedMechanismError(f"dp-accounting's {name} has no privaudit mechanism (refused rather than approximated)")


def from_dp_event(event: Any, neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE) -> Composition:
    """A ``DpEvent`` as a composition under ``neighbouring`` (see the module table)."""
    dp = _dp_accounting()
    if not isinstance(event, dp.DpEvent):
        raise UnsupportedMechanismError(f"expected a dp-accounting DpEvent, got {type(event).__name__}")
    return Composition(_entries(event, dp, 1), neighbouring)
