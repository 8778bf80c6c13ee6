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


class DeviceUnavailableError(PrivauditError):
    """The torch device asked for (``cuda``, ``cuda:N``) is not on this machine (:mod:`privaudit.device`)."""


class CheckpointError(PrivauditError):
    """A trained-federation directory is missing, malformed, truncated or tampered with."""


class RouteNotApplicable(InvalidParameterError):
    """An ε lower-bound route was asked about scores it cannot bound validly (wrong mechanism family or design).

    The message says which assumption the route needs and which was declared, e.g. "gdp converts through the
    Gaussian trade-off curve, valid only for Gaussian-shaped mechanisms; the audited mechanism is 'any'".
    """


class Terminated(BaseException):
    """SIGTERM arrived while a process pool ran (:mod:`privaudit.executor` installs the handler that raises it).

    It unwinds like Ctrl-C's :class:`KeyboardInterrupt` (no ``except Exception`` swallows it), so the pool is shut
    down cleanly; being a class of its own, the CLI exits with SIGTERM's code 143 (128 + 15), not Ctrl-C's 130.
    """


class OutputError(PrivauditError):
    """Finished work could not be written: not where the user asked, nor in a temporary folder
    (:mod:`privaudit.output_folder`). The message names the files."""
