"""Resource limits for the numerical accountants: estimate first, then run or decline in one line.

Every numerical accountant (``ctd``, ``pld``, ``prv``) estimates the size of its grid, the memory it will hold
and the time it will take *before* it starts, and declines with :class:`ResourceRefusal` (a
:class:`~privaudit.errors.NumericalFailure`, so ``auto`` falls back to the next accountant) when an estimate
exceeds the limits. Accountants that run in privaudit's own code also check a :class:`Deadline` between
chunks of work. The defaults (30 s, 1 GB) can be changed for a process with :func:`set_default_limits`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace

from privaudit.errors import InvalidParameterError, NumericalFailure


class ResourceRefusal(NumericalFailure):
    """An accountant declined before (or stopped while) running because it would exceed a time or memory limit."""


@dataclass(frozen=True)
class Limits:
    """Wall-clock seconds and bytes of working memory one accountant call may use."""

    seconds: float = 30.0
    memory_bytes: float = 1e9

    def __post_init__(self) -> None:
        for name in ("seconds", "memory_bytes"):
            value = float(getattr(self, name))
            if not value > 0 or math.isnan(value):
                raise InvalidParameterError(f"limit {name} must be positive, got {value}")

    def check_memory(self, what: str, nbytes: float) -> None:
        if not nbytes <= self.memory_bytes:  # NaN (an estimate that overflowed) is refused too
            raise ResourceRefusal(f"{what} would need about {_gb(nbytes)} of memory (limit {_gb(self.memory_bytes)})")

    def check_time(self, what: str, seconds: float) -> None:
        if not seconds <= self.seconds:  # NaN (an estimate that overflowed) is refused too
            raise ResourceRefusal(f"{what} would take about {seconds:.3g} s (limit {self.seconds:g} s)")


_DEFAULT = Limits()


def default_limits() -> Limits:
    return _DEFAULT


@contextmanager
def scoped_limits(seconds: float | None = None, memory_bytes: float | None = None) -> Iterator[Limits]:
    """Within the block, :func:`default_limits` is tightened to ``seconds`` / ``memory_bytes`` (never loosened):
    a chain of accountants shares one budget this way."""
    global _DEFAULT
    previous = _DEFAULT
    seconds = previous.seconds if seconds is None else max(min(seconds, previous.seconds), 1e-3)
    memory = previous.memory_bytes if memory_bytes is None else min(memory_bytes, previous.memory_bytes)
    _DEFAULT = replace(previous, seconds=seconds, memory_bytes=memory)
    try:
        yield _DEFAULT
    finally:
        _DEFAULT = previous


def set_default_limits(seconds: float | None = None, memory_bytes: float | None = None) -> Limits:
    """Change the process-wide defaults (``None`` keeps a value); returns the previous limits."""
    global _DEFAULT
    previous = _DEFAULT
    _DEFAULT = Limits(previous.seconds if seconds is None else seconds,
                      previous.memory_bytes if memory_bytes is None else memory_bytes)
    return previous


class Deadline:
    """A wall-clock budget started at construction; :meth:`check` raises once it is spent."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds = float(seconds)
        self.what = what
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def check(self) -> None:
        if self.elapsed > self.seconds:
            raise ResourceRefusal(f"{self.what} stopped after {self.elapsed:.3g} s (time limit {self.seconds:g} s)")


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB"
