"""Resource limits for the numerical accountants: count the work first, then run or decline in one line.

Every numerical accountant (``ctd``, ``pld``, ``prv``) computes the size of its grid, the memory it will hold and
the *work* it will do (:meth:`Limits.charge`) from its inputs alone, before it does it, and declines with
:class:`ResourceRefusal` (a :class:`~privaudit.errors.NumericalFailure`, so ``auto`` falls back to the next
accountant) when that exceeds the limits. Nothing here reads a clock: the same inputs and limits give the same
decision on a quiet machine and on one beside eight busy processes, so one command always prints one answer.

**The work unit.** One unit is 10⁹ operations of privaudit's cost model (:data:`OPERATIONS_PER_UNIT`): each
accountant counts the elementary steps its grids need — 20 per discretised cell of ``ctd``, 2 per point and
log₂ N of a forward FFT, 10⁴ per prv-accountant grid point and mechanism, … (constants beside each accountant).
The constants were fitted to wall-clock times on a 2-core machine, where a unit takes of the order of a second
(``ctd`` on 2,000 distinct subsampled Gaussians × 300 steps: 14.6 units in 7.8 s); elsewhere a unit takes what it
takes, but the decision does not change. The default, 30 units, accepts what the former 30-second *estimate*
accepted (the same constants, read as seconds); the former guard also added the measured elapsed time, which is
what made it decline under load.

**One budget per question.** Within :func:`shared_work` every charge is deducted from one budget, so a chain of
accountants (``auto``), a calibration's many evaluations, or the two directions of one ``ctd`` composition together
stay within the limit (the work an accountant did before it declined counts too). Outside it each charge stands
alone. The defaults (30 units, 1 GB) are changed for a process with :func:`set_default_limits`
(``compute-epsilon --work-limit``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from privaudit.errors import InvalidParameterError, NumericalFailure

#: Operations of the cost model in one work unit.
OPERATIONS_PER_UNIT = 1e9
#: Work units one question (an accountant call, the ``auto`` chain, a calibration) may use by default.
DEFAULT_WORK_UNITS = 30.0
#: Bytes of working memory one accountant call may hold by default.
DEFAULT_MEMORY_BYTES = 1e9


class ResourceRefusal(NumericalFailure):
    """An accountant declined before running (or before its next phase) because it would exceed a work or memory limit."""


@dataclass(frozen=True)
class Limits:
    """Work units (10⁹ cost-model operations each) and bytes of working memory one question may use."""

    work: float = DEFAULT_WORK_UNITS
    memory_bytes: float = DEFAULT_MEMORY_BYTES

    def __post_init__(self) -> None:
        for name in ("work", "memory_bytes"):
            value = float(getattr(self, name))
            if not value > 0 or math.isnan(value):
                raise InvalidParameterError(f"limit {name} must be positive, got {value}")

    def check_memory(self, what: str, nbytes: float) -> None:
        if not nbytes <= self.memory_bytes:  # NaN (an estimate that overflowed) is refused too
            raise ResourceRefusal(f"{what} would need about {_gb(nbytes)} of memory (limit {_gb(self.memory_bytes)})")

    def charge(self, what: str, operations: float) -> None:
        """Count ``operations`` against this limit (less what the open :func:`shared_work` budget has spent), or refuse.

        A refused charge is not counted; an accepted one is deducted from the shared budget when one is open."""
        units = float(operations) / OPERATIONS_PER_UNIT
        spent = _SPENT[-1] if _SPENT else 0.0
        left = self.work - spent
        if not units <= left:  # NaN (an estimate that overflowed) is refused too
            already = f"; {spent:.3g} already spent on this question" if spent > 0 else ""
            raise ResourceRefusal(f"{what} would need about {units:.3g} work units (limit {self.work:g}{already}; "
                                  "one unit = 1e9 operations of privaudit's cost model)")
        if _SPENT:
            _SPENT[-1] = spent + units


_DEFAULT = Limits()
#: Work units spent within the open :func:`shared_work` block (empty: none is open).
_SPENT: list[float] = []


def default_limits() -> Limits:
    return _DEFAULT


@contextmanager
def shared_work() -> Iterator[None]:
    """Within the block every :meth:`Limits.charge` is deducted from one budget; a block opened inside another joins it."""
    if _SPENT:
        yield
        return
    _SPENT.append(0.0)
    try:
        yield
    finally:
        _SPENT.clear()


def work_spent() -> float:
    """Work units charged so far in the open :func:`shared_work` block (0 outside one)."""
    return _SPENT[-1] if _SPENT else 0.0


def set_default_limits(work: float | None = None, memory_bytes: float | None = None) -> Limits:
    """Change the process-wide defaults (``None`` keeps a value); returns the previous limits."""
    global _DEFAULT
    previous = _DEFAULT
    _DEFAULT = Limits(previous.work if work is None else work,
                      previous.memory_bytes if memory_bytes is None else memory_bytes)
    return previous


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.3g} GB"
