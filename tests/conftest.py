"""Shared test configuration: deterministic, single-threaded torch where torch is used."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

try:  # hypothesis: no per-example deadline and no "too slow" health check (both depend on machine load), and the
    # same examples on every run (a test's outcome never depends on the machine or on the day)
    from hypothesis import HealthCheck, settings

    settings.register_profile("privaudit", deadline=None, derandomize=True,
                              suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("privaudit")
except ImportError:  # hypothesis comes with the dev extra
    pass
