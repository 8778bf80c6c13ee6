"""Partitioners and the partition-string grammar."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.data.partition import (
    PartitionSpec,
    classes_per_client,
    dirichlet,
    iid,
    label_shards,
    parse_partition,
    partition_indices,
    powerlaw,
)
from privaudit.errors import InvalidParameterError

LABELS = np.repeat(np.arange(10), 100)  # 1,000 samples, 100 per class, sorted by label


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _assert_disjoint(parts: list[np.ndarray]) -> np.ndarray:
    joined = np.concatenate(parts)
    assert len(joined) == len(np.unique(joined)), "a sample went to two clients"
    for part in parts:
        assert part.dtype == np.int64 and np.all(np.diff(part) > 0)
    return joined


def _assert_cover(parts: list[np.ndarray], n: int) -> None:
    joined = _assert_disjoint(parts)
    assert np.array_equal(np.sort(joined), np.arange(n))


@pytest.mark.parametrize(
    "make",
    [
        lambda rng: iid(len(LABELS), 7, rng),
        lambda rng: label_shards(LABELS, 10, 2, rng),
        lambda rng: classes_per_client(LABELS, 20, 2, rng, shares="equal"),
        lambda rng: classes_per_client(LABELS, 20, 2, rng, shares="paper", class_choice="balanced"),
        lambda rng: dirichlet(LABELS, 8, 0.5, rng),
        lambda rng: powerlaw(len(LABELS), 12, rng),
    ],
    ids=["iid", "shards", "classes-equal", "classes-paper-balanced", "dirichlet", "powerlaw"],
)
def test_partitions_are_disjoint_covers(make):
    _assert_cover(make(_rng()), len(LABELS))


def test_partitions_are_seeded():
    for spec in ("iid", "shards:2", "classes:2", "dirichlet:0.3", "powerlaw"):
        a = partition_indices(spec, LABELS, 10, _rng(3))
        b = partition_indices(spec, LABELS, 10, _rng(3))
        c = partition_indices(spec, LABELS, 10, _rng(4))
        assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True)), spec
        assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True)), spec


def test_iid_sizes_differ_by_at_most_one():
    sizes = [len(p) for p in iid(1003, 10, _rng())]
    assert max(sizes) - min(sizes) <= 1


def test_shards_give_at_most_s_labels_when_shards_align_with_classes():
    parts = label_shards(LABELS, 10, 2, _rng(1))  # 20 shards of 50: each shard is half a class
    for part in parts:
        assert len(part) == 100
        assert len(np.unique(LABELS[part])) <= 2


@pytest.mark.parametrize("shares", ["equal", "paper"])
def test_classes_per_client_gives_exactly_n_classes(shares):
    parts = classes_per_client(LABELS, 20, 2, _rng(2), shares=shares)
    _assert_disjoint(parts)
    for part in parts:
        assert len(np.unique(LABELS[part])) == 2


def test_equal_shares_balance_classes_and_split_them_evenly():
    parts = classes_per_client(LABELS, 20, 2, _rng(5), shares="equal")  # 4 holders per class
    holders = np.zeros(10, dtype=int)
    for part in parts:
        for c, count in zip(*np.unique(LABELS[part], return_counts=True), strict=True):
            holders[c] += 1
            assert count == 25
    assert np.all(holders == 4)


def test_paper_shares_are_p_over_sum_p_with_p_in_04_06():
    # With 2 holders per class the smaller share is p1/(p1+p2) ≥ 0.4/(0.4+0.6) = 0.4 and ≤ 0.5;
    # equal shares would always give exactly 0.5.
    labels = np.repeat(np.arange(10), 1000)
    parts = classes_per_client(labels, 10, 2, _rng(6), shares="paper", class_choice="balanced")
    fractions = []
    for c in range(10):
        counts = [np.sum(labels[p] == c) for p in parts if np.any(labels[p] == c)]
        assert len(counts) == 2
        fractions.append(min(counts) / sum(counts))
    fractions = np.array(fractions)
    assert np.all(fractions >= 0.4 - 1e-3) and np.all(fractions <= 0.5)
    assert fractions.min() < 0.48  # the draws are not all equal


def test_paper_shares_between_holders_stay_within_p_ratio_bounds():
    # Holder k gets p_k / Σ p of the class with p_k ∈ (0.4, 0.6): any two holders' counts differ by a
    # ratio inside (0.4/0.6, 0.6/0.4). With 5 holders per class the largest/smallest ratio is well above 1.
    labels = np.repeat(np.arange(4), 5000)
    parts = classes_per_client(labels, 10, 2, _rng(7), shares="paper", class_choice="balanced")
    ratios = []
    for c in range(4):
        counts = np.array([np.sum(labels[p] == c) for p in parts if np.any(labels[p] == c)])
        assert len(counts) == 5 and counts.sum() == 5000
        ratios.append(counts.max() / counts.min())
    assert max(ratios) < 1.5 + 1e-3
    assert max(ratios) > 1.1


def test_paper_class_choice_is_uniform_and_may_leave_classes_unused():
    unused = 0
    for seed in range(20):
        parts = classes_per_client(LABELS, 3, 2, _rng(seed), shares="paper")
        used = set(np.unique(LABELS[np.concatenate(parts)]))
        unused += 10 - len(used)
        for part in parts:
            assert len(np.unique(LABELS[part])) == 2
    assert unused > 0


def test_classes_per_client_errors():
    with pytest.raises(InvalidParameterError, match="11 classes"):
        classes_per_client(LABELS, 5, 11, _rng())
    tiny = np.array([0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2])  # every client needs class 0, which has 2 samples
    with pytest.raises(InvalidParameterError, match="class 0 has 2 samples but 5 clients"):
        classes_per_client(tiny, 5, 3, _rng(), shares="equal")


def test_dirichlet_skew_grows_as_alpha_shrinks():
    def mean_top_class_fraction(alpha: float) -> float:
        parts = dirichlet(LABELS, 10, alpha, _rng(8))
        return float(np.mean([np.bincount(LABELS[p], minlength=10).max() / len(p) for p in parts]))

    skewed, mild, flat = mean_top_class_fraction(0.1), mean_top_class_fraction(1.0), mean_top_class_fraction(100.0)
    assert skewed > mild > flat
    assert flat < 0.2 and skewed > 0.5


def test_dirichlet_respects_min_size_or_fails_clearly():
    parts = dirichlet(LABELS, 10, 0.05, _rng(9), min_size=5)
    assert min(len(p) for p in parts) >= 5
    with pytest.raises(InvalidParameterError, match="fewer than"):
        dirichlet(np.zeros(40, dtype=int), 20, 0.01, _rng(), min_size=2, max_draws=3)


def test_powerlaw_sizes_are_skewed_and_at_least_min_size():
    sizes = np.sort([len(p) for p in powerlaw(10_000, 50, _rng(10), min_size=3)])
    assert sizes.min() >= 3 and sizes.sum() == 10_000
    assert sizes[-5:].sum() > 0.2 * 10_000  # the 10 % largest clients hold > 2× their equal share


def test_impossible_splits_raise():
    with pytest.raises(InvalidParameterError, match="at least one sample"):
        iid(5, 6, _rng())
    with pytest.raises(InvalidParameterError, match="shards"):
        label_shards(LABELS[:10], 6, 2, _rng())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("iid", PartitionSpec("iid")),
        ("shards:2", PartitionSpec("shards", shards_per_client=2)),
        ("classes:2", PartitionSpec("classes", classes_per_client=2, shares="paper")),
        ("classes:2:equal", PartitionSpec("classes", classes_per_client=2, shares="equal")),
        ("classes:3:paper:balanced", PartitionSpec("classes", classes_per_client=3, shares="paper", class_choice="balanced")),
        ("dirichlet:0.5", PartitionSpec("dirichlet", alpha=0.5)),
        ("powerlaw", PartitionSpec("powerlaw", exponent=1.5)),
        ("powerlaw:2", PartitionSpec("powerlaw", exponent=2.0)),
    ],
)
def test_parse_partition(text, expected):
    spec = parse_partition(text)
    assert spec == expected
    assert parse_partition(str(spec)) == spec


@pytest.mark.parametrize("text", ["", "iid:3", "shards", "shards:0", "shards:x", "classes:2:weird", "dirichlet:-1", "dirichlet", "zipf"])
def test_bad_partition_strings(text):
    with pytest.raises(InvalidParameterError, match="grammar"):
        parse_partition(text)
