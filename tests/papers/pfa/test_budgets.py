"""Privacy-preference distributions (PFA Table 1 and the reference files), seeding, ε ≤ 0 handling, budget files."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.budgets import (
    DISTRIBUTIONS,
    PAPER_DISTRIBUTIONS,
    check_budget_spec,
    draw_budgets,
    read_budget_file,
    resolve_budgets,
)

N = 20_000


def _components(values: np.ndarray, cut: float) -> tuple[np.ndarray, np.ndarray]:
    return values[values < cut], values[values >= cut]


def test_paper_table1_names_and_parameters():
    assert PAPER_DISTRIBUTIONS == ("uniform", "gauss", "pareto", "mixgauss1", "mixgauss2", "mixgauss3", "mixgauss4")
    m1 = DISTRIBUTIONS["mixgauss1"].components
    assert [(c.weight, c.mean, c.second) for c in m1] == [(0.9, 0.1, 0.01), (0.1, 10.0, 0.1)]
    m4 = DISTRIBUTIONS["mixgauss4"].components
    assert [(c.weight, c.mean, c.second) for c in m4] == [(0.5, 0.1, 0.01), (0.4, 1.0, 0.1), (0.1, 10.0, 1.0)]
    # audit point F5: the reference file "mixgauss1" is the paper's MixGauss2 (private mean 0.5), read with std
    ref = DISTRIBUTIONS["reference-mixgauss1"]
    assert [(c.mean, c.second) for c in ref.components] == [(0.5, 0.01), (10.0, 0.1)] and ref.second_is == "std"
    assert [(c.mean, c.second) for c in DISTRIBUTIONS["reference-mixgauss3"].components] == [(0.1, 0.01), (10.0, 0.1)]


def test_mixture_weights_means_and_variance_reading():
    values = draw_budgets("mixgauss3", N, seed=1).as_array()  # 0.9·N(1, 0.1) + 0.1·N(10, 0.1)
    low, high = _components(values, 5.0)
    assert abs(high.size / N - 0.1) < 0.01
    assert abs(low.mean() - 1.0) < 0.01 and abs(high.mean() - 10.0) < 0.03
    assert abs(low.std() - math.sqrt(0.1)) < 0.01  # the paper's N(μ, σ²): variance 0.1
    as_std = draw_budgets("mixgauss3", N, seed=1, second_parameter="std").as_array()
    assert abs(_components(as_std, 5.0)[0].std() - 0.1) < 0.005  # the reference code's reading


def test_three_component_mixture_and_simple_distributions():
    values = draw_budgets("mixgauss4", N, seed=2, second_parameter="std").as_array()
    assert abs(np.mean(values < 0.5) - 0.5) < 0.015 and abs(np.mean(values > 5) - 0.1) < 0.01
    uniform = draw_budgets("uniform", N, seed=3).as_array()
    assert uniform.min() >= 1.0 and uniform.max() <= 10.0 and abs(uniform.mean() - 5.5) < 0.05
    gauss = draw_budgets("gauss", N, seed=4).as_array()
    assert abs(gauss.mean() - 3.0) < 0.03 and abs(gauss.std() - 1.0) < 0.03
    pareto = draw_budgets("pareto", N, seed=5).as_array()  # shape 1, scale 0.5: minimum 0.5, median 1.0
    assert pareto.min() >= 0.5 and abs(np.median(pareto) - 1.0) < 0.05


def test_seeded_draws_repeat_and_differ_between_seeds():
    a = draw_budgets("mixgauss1", 30, seed=7)
    b = draw_budgets("mixgauss1", 30, seed=7)
    c = draw_budgets("mixgauss1", 30, seed=8)
    assert a.epsilons == b.epsilons and a.epsilons != c.epsilons
    assert a.num_clients == 30 and a.delta == 1e-5


def test_nonpositive_budgets_are_redrawn_or_rejected():
    # MixGauss1's private component N(0.1, variance 0.01) puts ~16 % of its mass at ε ≤ 0
    drawn = draw_budgets("mixgauss1", 200, seed=0)
    assert drawn.redrawn and min(drawn.epsilons) > 0
    with pytest.raises(InvalidParameterError, match=r"drew ε ≤ 0 for \d+ client"):
        draw_budgets("mixgauss1", 200, seed=0, nonpositive="reject")
    with pytest.raises(InvalidParameterError, match="redraw' or 'reject"):
        draw_budgets("mixgauss1", 5, seed=0, nonpositive="clip")


def test_reference_mixtures_are_redrawn_until_a_public_budget_appears():
    for seed in range(20):  # with 2 clients a 0.1-weight public component is missing 81 % of the time
        values = draw_budgets("reference-mixgauss1", 2, seed=seed).as_array()
        assert values.max() > 1.0


def test_constants_unknown_names_and_bad_counts():
    assert draw_budgets("constant:0.5", 3, seed=0).epsilons == (0.5, 0.5, 0.5)
    assert draw_budgets("reference-max1", 2, seed=0).epsilons == (10.0, 10.0)
    with pytest.raises(InvalidParameterError, match="unknown budget distribution 'mixgauss9'"):
        draw_budgets("mixgauss9", 3, seed=0)
    with pytest.raises(InvalidParameterError, match="not positive"):
        draw_budgets("constant:-1", 3, seed=0)
    with pytest.raises(InvalidParameterError, match="positive integer"):
        draw_budgets("uniform", 0, seed=0)


def test_budget_file_parsing(tmp_path):
    good = tmp_path / "eps.txt"
    good.write_text("# one ε per client\n0.5\n\n1.0, 2.5\n10  # public\n")
    budgets = read_budget_file(good, 4)
    assert budgets.epsilons == (0.5, 1.0, 2.5, 10.0) and budgets.source.startswith("file:")
    assert resolve_budgets(str(good), 4, seed=0).epsilons == budgets.epsilons
    assert resolve_budgets(f"file:{good}", 4, seed=0).epsilons == budgets.epsilons
    with pytest.raises(InvalidParameterError, match="has 4 budgets for 5 clients"):
        read_budget_file(good, 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0.5\nabc\n", r"line 2: ε 'abc' is not a number"),
        ("0.5\n-1\n", r"line 2: ε -1 is not positive"),
        ("0\n", r"line 1: ε 0 is not positive"),
        ("0.5\nnan\n", "not a finite number"),
        ("# nothing\n\n", "holds no budgets"),
    ],
)
def test_budget_file_errors(tmp_path, text, message):
    path = tmp_path / "eps.txt"
    path.write_text(text)
    with pytest.raises(InvalidParameterError, match=message):
        read_budget_file(path)
    with pytest.raises(InvalidParameterError, match=message):
        check_budget_spec(f"file:{path}")


def test_missing_budget_file(tmp_path):
    with pytest.raises(InvalidParameterError, match="does not exist"):
        check_budget_spec(f"file:{tmp_path / 'none.txt'}")
    with pytest.raises(InvalidParameterError, match="cannot read budget file"):
        read_budget_file(tmp_path / "none.txt")
