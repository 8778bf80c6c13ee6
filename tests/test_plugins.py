"""The paper registry (privaudit.plugins): discovery by entry points, references imported only when used."""

from importlib import metadata

import pytest

from privaudit import plugins
from privaudit.errors import InvalidParameterError
from privaudit.plugins import EvidencePageRef, Paper, Ref

ALPHA = Paper("alpha", "Alpha (2024)", models={"alpha-net": Ref("json:dumps")},
              evidence_pages=(EvidencePageRef("alpha-evidence", "alpha", Ref("json:loads")),))
BETA = Paper("beta", "Beta (2025)", models={"beta-net": Ref("json:loads")}, defaults={"rounds": 3})


def _entry(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name, value, plugins.ENTRY_POINT_GROUP)


@pytest.fixture
def registered(monkeypatch):
    """Install a fake set of entry points (module attributes of this test module) for one test."""

    def install(**values):
        entries = [_entry(name, f"{__name__}:{attribute}") for name, attribute in values.items()]
        monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: entries if group == plugins.ENTRY_POINT_GROUP else [])
        plugins.papers.cache_clear()

    yield install
    plugins.papers.cache_clear()


def test_papers_are_discovered_in_key_order_and_parts_merge(registered):
    registered(b="BETA", a="ALPHA")
    assert [p.key for p in plugins.papers()] == ["alpha", "beta"]
    assert plugins.paper("beta").defaults["rounds"] == 3
    models = plugins.collected("models")
    assert set(models) == {"alpha-net", "beta-net"} and models["beta-net"][0] is BETA
    import json

    assert models["alpha-net"][1].load() is json.dumps


def test_a_name_registered_twice_or_a_wrong_value_is_one_clear_error(registered):
    registered(a="ALPHA", c="CLASH")
    with pytest.raises(InvalidParameterError, match="registered by both alpha and clash"):
        plugins.collected("models")
    registered(a="ALPHA", x="NOT_A_PAPER")
    with pytest.raises(InvalidParameterError, match=r"is not a privaudit\.plugins\.Paper"):
        plugins.papers()
    registered()
    with pytest.raises(InvalidParameterError, match="no paper is registered"):
        plugins.papers()


def test_unknown_paper_and_bad_references(registered):
    registered(a="ALPHA")
    with pytest.raises(InvalidParameterError, match="unknown paper 'gamma'; registered: alpha"):
        plugins.paper("gamma")
    with pytest.raises(InvalidParameterError, match=r"package\.module:attribute"):
        Ref("json.dumps")
    with pytest.raises(InvalidParameterError, match="has no 'nothing_here'"):
        Ref("json:nothing_here").load()
    with pytest.raises(InvalidParameterError, match="short name"):
        Paper("two words", "x")


NOT_A_PAPER = object()
CLASH = Paper("clash", "Clash", models={"alpha-net": Ref("json:dumps")})


# ------------------------------------------------------------------------------------------------
# the installed papers, and a fifth one plugged in by its PAPER value alone
# ------------------------------------------------------------------------------------------------
def test_the_four_papers_are_registered_and_every_part_loads():
    import importlib

    from privaudit.accounting.closed_form import ClosedFormSpec
    from privaudit.fl.algorithms.spec_types import WrapperSpec
    from privaudit.fl.privacy.registry import PrivacySpec
    from privaudit.models import ModelSpec

    plugins.papers.cache_clear()
    assert [p.key for p in plugins.papers()] == ["fedreg", "pfa", "privatefl", "upcycled"]
    kinds = {"algorithm_wrappers": WrapperSpec, "privacy": PrivacySpec, "models": ModelSpec, "closed_forms": ClosedFormSpec}
    for part, kind in kinds.items():
        for name, (_, ref) in plugins.collected(part).items():
            assert isinstance(ref.load(), kind), (part, name)
    for paper in plugins.papers():
        assert all(importlib.import_module(m).SPECS for m in paper.algorithm_specs)
        assert all(importlib.import_module(m).CLAIMS for m in paper.claim_modules)
        assert all(callable(page.renderer.load()) for page in paper.evidence_pages)
    assert set(plugins.collected("models")) >= {"logreg", "upcycled-mlp", "privatefl-dnn-in", "pfa-cnn", "fedreg-cnn"}


def test_reading_the_registry_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys; from privaudit import plugins; plugins.papers(); plugins.collected('models'); "
            "print('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split() == ["False"]


def _registry_caches():
    from privaudit.accounting import closed_form
    from privaudit.fl.algorithms import registry
    from privaudit.fl.privacy import registry as privacy
    from privaudit.models import default_models, model_specs

    return (plugins.papers, registry._base_specs, registry.wrapper_specs, privacy.privacy_specs, model_specs,
            default_models, closed_form.closed_forms)


def test_a_fifth_paper_is_its_paper_value_plus_one_entry_point(monkeypatch):
    """Algorithms, wrappers, privacy mechanisms, models and closed forms of a new paper appear everywhere by name."""
    from privaudit.accounting.closed_form import closed_form
    from privaudit.fl.algorithms.registry import algorithm_specs, make_algorithm
    from privaudit.fl.privacy.registry import privatize
    from privaudit.models import build_model, describe_models

    installed = list(metadata.entry_points(group=plugins.ENTRY_POINT_GROUP))
    entries = [*installed, _entry("gamma", "tests.fifth_paper:PAPER")]
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: entries if group == plugins.ENTRY_POINT_GROUP else [])
    for cache in _registry_caches():
        cache.cache_clear()
    try:
        specs = algorithm_specs()
        assert "gamma-avg" in specs and "upcycled-gamma-avg" in specs and "twice-fedprox" in specs
        assert specs["twice-fedavg"].summary == "fedavg, twice"
        assert make_algorithm("twice-gamma-avg") == ("twice", "gamma-avg built")
        assert privatize("fedavg-stand-in", "gamma-noise") == ("noised", "fedavg-stand-in")
        assert "gamma-net" in describe_models() and build_model("gamma-net", (4,), 3).linear.out_features == 3
        assert closed_form("gamma-bound")(k=3).value == 6.0
    finally:
        for cache in _registry_caches():
            cache.cache_clear()
