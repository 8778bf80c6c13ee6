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
