import numpy as np
import pytest

from privaudit.stats.scores import AuditScores
from privaudit.stats.strategies import OrderStatistics, QuantileGrid, ThresholdGrid
from privaudit.stats.threshold_tests import counts_at, explicit_tests, family_tests, pareto_cuts, split_scores


def _all_cuts(scores: AuditScores):
    values = np.unique(np.concatenate([scores.in_scores, scores.out_scores]))
    fp = np.array([np.sum(scores.out_scores >= v) for v in values])
    fn = np.array([np.sum(scores.in_scores < v) for v in values])
    return values, fp, fn


def test_counts_by_hand():
    scores = AuditScores.of([1.5, 2.5, 0.5, 3.5], [0.0, 3.0, 2.0, 1.0])
    fp, fn = counts_at(scores, np.array([2.0, 2.5]))
    np.testing.assert_array_equal(fp, [2, 1])  # out ≥ 2: {3, 2}; out ≥ 2.5: {3}
    np.testing.assert_array_equal(fn, [2, 2])  # in < 2: {1.5, 0.5}
    fp, fn = counts_at(scores, np.array([2.0]), strict=True)
    np.testing.assert_array_equal(fp, [1])  # out > 2: {3}
    np.testing.assert_array_equal(fn, [2])  # in ≤ 2


@pytest.mark.parametrize("seed", range(5))
def test_pareto_cuts_keep_every_undominated_cut(seed):
    rng = np.random.default_rng(seed)
    scores = AuditScores.of(rng.integers(0, 8, 30).astype(float), rng.integers(0, 8, 25).astype(float))
    values, fp, fn = _all_cuts(scores)
    kept, kept_fp, kept_fn = pareto_cuts(scores)
    for v, a, b in zip(values, fp, fn, strict=True):
        dominated_or_kept = np.any((kept_fp <= a) & (kept_fn <= b))
        assert dominated_or_kept, (v, a, b)
    for a, b in zip(kept_fp, kept_fn, strict=True):  # no kept cut is strictly dominated by any cut
        assert not np.any((fp <= a) & (fn <= b) & ((fp < a) | (fn < b)))
    np.testing.assert_array_equal(counts_at(scores, kept), (kept_fp, kept_fn))


def test_order_statistics_family_size_is_the_smaller_sample():
    scores = AuditScores.of(np.arange(7.0), np.arange(3.0) + 0.5)
    tests = family_tests(scores, OrderStatistics())
    assert tests.family_size == 3
    np.testing.assert_allclose(tests.weights, 1 / 3)


def test_quantile_grid_puts_floor_level_n_out_scores_above_the_cut():
    rng = np.random.default_rng(3)
    scores = AuditScores.of(rng.normal(1, 1, 50), rng.normal(0, 1, 200))
    levels = (0.0, 0.001, 0.01, 0.2, 0.5, 0.999)
    tests = family_tests(scores, QuantileGrid(levels))
    np.testing.assert_array_equal(tests.fp, np.floor(np.array(levels) * 200).astype(int))
    assert tests.strict.all()
    assert tests.rule(0).startswith("score > ")


def test_threshold_grid_and_explicit_use_score_at_least_threshold():
    scores = AuditScores.of([1.0, 2.0, 3.0], [0.0, 2.0])
    grid = family_tests(scores, ThresholdGrid((2.0, 5.0), weights=(3.0, 1.0)))
    np.testing.assert_array_equal(grid.fp, [1, 0])
    np.testing.assert_array_equal(grid.fn, [1, 3])
    np.testing.assert_allclose(grid.weights, [0.75, 0.25])
    single = explicit_tests(scores, 2.0)
    assert (single.fp[0], single.fn[0], single.weights[0], single.family_size) == (1, 1, 1.0, 1)


def test_split_is_seeded_disjoint_and_keeps_both_parts_non_empty():
    scores = AuditScores.of(np.arange(10.0), np.arange(5.0) + 100)
    a_sel, a_hold = split_scores(scores, 0.5, np.random.default_rng(4))
    b_sel, _b_hold = split_scores(scores, 0.5, np.random.default_rng(4))
    np.testing.assert_array_equal(a_sel.in_scores, b_sel.in_scores)
    assert (a_sel.n_in, a_hold.n_in, a_sel.n_out, a_hold.n_out) == (5, 5, 2, 3)
    assert set(a_sel.in_scores) | set(a_hold.in_scores) == set(scores.in_scores)
    assert not set(a_sel.in_scores) & set(a_hold.in_scores)
    tiny_sel, tiny_hold = split_scores(AuditScores.of([1.0, 2.0], [0.0, 0.5]), 0.01, np.random.default_rng(0))
    assert tiny_sel.n_in == tiny_hold.n_in == 1
