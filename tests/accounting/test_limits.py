"""Resource limits count work, never time: one question gets one answer on a quiet or a loaded machine (issue 24)."""

from __future__ import annotations

import ast
import time
from pathlib import Path

import numpy as np
import pytest

from privaudit.accounting import Composition, SubsampledGaussian
from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.calibrate import calibrate_noise
from privaudit.accounting.ctd import CtdAccountant
from privaudit.accounting.limits import Limits, ResourceRefusal, set_default_limits, shared_work, work_spent
from privaudit.errors import InvalidParameterError

ACCOUNTING = Path(__file__).resolve().parents[2] / "privaudit" / "accounting"


def test_no_accounting_module_reads_a_clock():
    """A decision that reads a clock changes with the machine's load; accounting may not import time or datetime."""
    offenders = []
    for path in sorted(ACCOUNTING.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("time", "datetime")]
    assert offenders == []


def test_a_slow_clock_changes_nothing(monkeypatch):
    """The same ε and accountant when every clock read says an hour has passed (a machine under heavy load)."""
    composition = Composition([(SubsampledGaussian(1 / s, 0.01), 1) for s in np.linspace(0.8, 2.0, 300)])
    quiet = get_accountant("auto").epsilon(composition, 1e-5)
    hours = iter(range(0, 10**9, 3600))
    for name in ("perf_counter", "monotonic", "time", "process_time"):
        monkeypatch.setattr(time, name, lambda: float(next(hours)))
    loaded = get_accountant("auto").epsilon(composition, 1e-5)
    assert (loaded.accountant, loaded.epsilon) == (quiet.accountant, quiet.epsilon) == ("ctd", quiet.epsilon)


def test_work_is_refused_before_it_is_done_and_named_in_units():
    with pytest.raises(ResourceRefusal, match=r"work units \(limit 1e-09; one unit = 1e9 operations"):
        CtdAccountant(limits=Limits(work=1e-9)).epsilon(Composition.of(SubsampledGaussian(1.0, 0.01), 1000), 1e-5)
    with pytest.raises(InvalidParameterError, match="work must be positive"):
        Limits(work=0)


def test_a_shared_budget_counts_every_charge_and_a_refused_one_costs_nothing():
    limits = Limits(work=1.0)
    limits.charge("alone", 0.9e9)
    limits.charge("alone again", 0.9e9)  # outside shared_work each charge stands alone
    with shared_work():
        limits.charge("first", 0.6e9)
        with shared_work():  # an inner block joins the outer budget
            assert work_spent() == pytest.approx(0.6)
            with pytest.raises(ResourceRefusal, match=r"0\.6 already spent"):
                limits.charge("second", 0.6e9)
        assert work_spent() == pytest.approx(0.6)
        limits.charge("third", 0.4e9)
    assert work_spent() == 0.0


def test_auto_falls_back_by_work_not_by_time():
    """ctd declines a composition whose transforms exceed the budget; rdp answers — on every machine alike."""
    composition = Composition([(SubsampledGaussian(1 / s, 0.01), 1) for s in np.linspace(0.8, 2.0, 300)])
    previous = set_default_limits(work=1e-4)
    try:
        result = get_accountant("auto").epsilon(composition, 1e-5)
    finally:
        set_default_limits(previous.work, previous.memory_bytes)
    assert result.accountant == "rdp" and "work units" in result.details["declined"]["ctd"]


def test_a_calibration_shares_one_budget():
    make = lambda s: Composition.of(SubsampledGaussian(s, 0.01), 1000)  # noqa: E731
    with shared_work():  # the calibration joins this block's budget, so the whole search's work is read here
        generous = calibrate_noise(make, 2.0, 1e-5, accountant="ctd")
        total = work_spent()
    assert generous.evaluations > 3 and total > 0
    previous = set_default_limits(work=total / 2)  # enough for the first probes, not for the whole search
    try:
        with pytest.raises(ResourceRefusal, match="already spent"):
            calibrate_noise(make, 2.0, 1e-5, accountant="ctd")
    finally:
        set_default_limits(previous.work, previous.memory_bytes)
