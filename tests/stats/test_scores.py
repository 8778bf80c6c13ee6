import numpy as np
import pytest

from privaudit.errors import InvalidParameterError
from privaudit.stats.scores import AuditScores, check_delta, check_positive_delta, check_significance


def test_scores_are_validated_copied_and_read_only():
    raw_in = [1.0, 2.0, 3.0]
    scores = AuditScores.of(raw_in, np.array([0.0, 1.0]))
    assert scores.n_in == 3 and scores.n_out == 2
    assert scores.in_scores.dtype == np.float64
    with pytest.raises(ValueError):
        scores.in_scores[0] = 5.0
    raw_in[0] = 99.0
    assert scores.in_scores[0] == 1.0


def test_column_vectors_are_accepted_as_one_dimensional():
    scores = AuditScores.of(np.ones((4, 1)), np.zeros((1, 3)))
    assert scores.n_in == 4 and scores.n_out == 3


@pytest.mark.parametrize(
    ("in_scores", "out_scores", "message"),
    [
        ([], [0.0], "in_scores is empty"),
        ([1.0], [], "out_scores is empty"),
        ([1.0, np.nan], [0.0], "non-finite"),
        ([1.0], [np.inf], "non-finite"),
        (np.ones((2, 2)), [0.0], "one-dimensional"),
        (3.0, [0.0], "scalar"),
        (["a"], [0.0], "sequence of numbers"),
    ],
)
def test_bad_scores_raise_one_clear_error(in_scores, out_scores, message):
    with pytest.raises(InvalidParameterError, match=message):
        AuditScores.of(in_scores, out_scores)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan"), "x"])
def test_significance_must_lie_in_open_unit_interval(alpha):
    with pytest.raises(InvalidParameterError, match="significance"):
        check_significance(alpha)


@pytest.mark.parametrize("delta", [-1e-9, 1.0, 2.0, float("nan"), None])
def test_delta_must_lie_in_half_open_unit_interval(delta):
    with pytest.raises(InvalidParameterError, match="delta"):
        check_delta(delta)


def test_gaussian_routes_need_positive_delta():
    assert check_delta(0.0) == 0.0
    with pytest.raises(InvalidParameterError, match="delta > 0"):
        check_positive_delta(0.0, "gdp")


def test_negation_reverses_the_score_convention():
    scores = AuditScores.of([1.0, 2.0], [3.0])
    flipped = scores.negated()
    np.testing.assert_array_equal(flipped.in_scores, [-1.0, -2.0])
    np.testing.assert_array_equal(flipped.out_scores, [-3.0])


def test_attack_scores_are_audit_scores_validated_once(tmp_path):
    """One score type: an attack's MembershipScores is an AuditScores (the same validation, a side may be empty),
    and the membership-scores.npz an attack writes is read by ``audit --scores`` as it is."""
    from attacks.membership.scores import MembershipScores
    from privaudit.audit.score_files import read_scores

    scores = MembershipScores([3.0, 2.0], [1.0, 0.5], {"attack": "loss"})
    assert isinstance(scores, AuditScores) and scores.n_in == 2 and scores.meta == {"attack": "loss"}
    assert not MembershipScores([], [1.0]).is_complete()
    with pytest.raises(InvalidParameterError, match="member scores contains 1 non-finite"):
        MembershipScores([np.nan], [0.0])
    read = read_scores(scores.save_npz(tmp_path / "membership-scores.npz"))
    assert read.in_scores.tolist() == [3.0, 2.0] and read.out_scores.tolist() == [1.0, 0.5]
