"""Shared test configuration: deterministic, single-threaded torch where torch is used."""

import os

import pytest

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


@pytest.fixture
def papers(monkeypatch, request):
    """Register the given attributes of the requesting test module as the only papers (privaudit.plugins), for one
    test: ``papers("ALPHA", "BETA")``."""
    from importlib import metadata

    from privaudit import plugins

    module = request.module.__name__

    def install(*attributes):
        entries = [metadata.EntryPoint(a.lower(), f"{module}:{a}", plugins.ENTRY_POINT_GROUP) for a in attributes]
        monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: entries if group == plugins.ENTRY_POINT_GROUP else [])
        plugins.papers.cache_clear()

    yield install
    plugins.papers.cache_clear()
