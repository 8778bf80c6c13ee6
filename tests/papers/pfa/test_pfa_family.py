"""The family as classes: each name is a small subclass with its server rule, participation and operating budgets."""

from __future__ import annotations

import pytest

from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.algorithm import (
    FAMILY,
    PFA,
    FedAvgHDP,
    Maximum,
    Minimum,
    NPFedAvg,
    PFAPlus,
    PublicOnly,
    WeiAvg,
    build,
)
from privaudit.papers.pfa.server_rules import EpsilonWeighted, ExampleWeighted, Projected, ProjectedUploads
from privaudit.papers.pfa.settings import OPTION_GROUPS, PFASettings
from privaudit.papers.pfa.specs import NAMES
from tests.papers.pfa.test_pfa_aggregation import started


def test_every_name_is_its_own_class_with_its_rule():
    assert tuple(FAMILY) == NAMES
    expected = {"pfa": (PFA, Projected), "pfa-plus": (PFAPlus, ProjectedUploads), "weiavg": (WeiAvg, EpsilonWeighted),
                "fedavg-hdp": (FedAvgHDP, ExampleWeighted), "public-only": (PublicOnly, ExampleWeighted),
                "minimum": (Minimum, ExampleWeighted), "maximum": (Maximum, ExampleWeighted), "np-fedavg": (NPFedAvg, ExampleWeighted)}
    for name, (cls, rule) in expected.items():
        algorithm = build(name)
        assert type(algorithm) is cls and algorithm.name == name
        assert type(algorithm.server_rule(_Context())) is rule
    assert [n for n in NAMES if not FAMILY[n].private] == ["np-fedavg"]
    assert [n for n in NAMES if FAMILY[n].public_only] == ["public-only"]
    assert Minimum().operating_budgets([0.5, 2.0, 1.0]) == [0.5] * 3 and Maximum().operating_budgets([0.5, 2.0]) == [2.0] * 2
    assert PFA().operating_budgets([0.5, 2.0]) == [0.5, 2.0]


class _Context:
    trainable = ("w",)
    seeds = None


def test_options_are_grouped_and_come_back_flat():
    options = {"budgets": "uniform", "delta": 1e-6, "calibration": "reference", "local_steps": 7, "split": "topk",
               "public_clients": 3, "projection_dims": 2, "no_public": "resample"}
    settings = PFASettings.from_options(**options)
    assert settings.budget.delta == 1e-6 and settings.local_dp.calibration.value == "reference" and settings.local_steps == 7
    assert settings.split.public_clients == 3 and settings.projection.projection_dims == 2
    flat = settings.to_dict()
    assert list(flat) == list(OPTION_GROUPS) and {k: flat[k] for k in options} == options
    assert PFASettings.from_options(**flat) == settings
    hyper = build("minimum", **options).hyperparameters()
    assert {k: hyper[k] for k in ("rule", "operating", "private")} == {"rule": "fedavg-hdp", "operating": "minimum", "private": True}


def test_bad_options_are_one_clear_error():
    with pytest.raises(InvalidParameterError, match="unknown PFA option 'projection_dim'"):
        build("pfa", projection_dim=2)
    with pytest.raises(InvalidParameterError, match="minimum fixes operating"):
        build("minimum", operating="own")
    with pytest.raises(InvalidParameterError, match="unknown PFA-family algorithm 'pfa-minus'"):
        build("pfa-minus")


def test_a_round_needs_the_start_hook(tmp_path):
    with pytest.raises(InvalidParameterError, match="needs the federation's start_federation hook"):
        build("weiavg").trains_clients(1)
    algorithm, _, _, _ = started("pfa-plus", tmp_path)
    assert algorithm.previous is None and algorithm.plan["clients_per_round"] == 6
