"""Typed exceptions for bad input and known numerical failures.

Every error a user can cause is a :class:`PrivauditError`. The CLI prints its message as one line on
stderr and exits with code 2; the API raises it unchanged. Messages are single sentences that say what
was wrong and, where possible, what to do instead.
"""

from __future__ import annotations


class PrivauditError(ValueError):
    """Base class of every user-facing privaudit error (bad input, unsupported request)."""


class InvalidParameterError(PrivauditError):
    """A parameter is out of its domain (e.g. a non-positive noise multiplier, δ outside (0, 1))."""


class UnsupportedMechanismError(PrivauditError):
    """An accountant was asked about a mechanism or neighbouring relation it cannot account for."""


class NumericalFailure(PrivauditError):
    """A numerical routine failed in a known way (e.g. prv-accountant's mean check, PRV memory)."""


class DataUnavailableError(PrivauditError):
    """A dataset or optional dependency needed for the request is not on this machine."""


class CheckpointError(PrivauditError):
    """A trained-federation directory is missing, malformed, truncated or tampered with."""


class RouteNotApplicable(InvalidParameterError):
    """An ε lower-bound route was asked about scores it cannot bound validly (wrong mechanism family or design).

    The message says which assumption the route needs and which was declared, e.g. "gdp converts through the
    Gaussian trade-off curve, valid only for Gaussian-shaped mechanisms; the audited mechanism is 'any'".
    """
