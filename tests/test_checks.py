"""Range checks at the API boundary: values in range come back converted; the rest raise one clear line."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from privaudit.checks import finite_non_negative, finite_positive, integer_at_least, probability_open
from privaudit.errors import InvalidParameterError


@given(st.floats(min_value=0.0, max_value=1.0, exclude_min=True, exclude_max=True))
def test_probability_open_accepts_the_open_interval(value):
    assert probability_open("alpha", value) == value


@pytest.mark.parametrize("value", [0, 1, 0.0, 1.0, -0.1, 1.5, math.nan, math.inf, "x", None, True])
def test_probability_open_refuses_the_rest_naming_the_parameter(value):
    with pytest.raises(InvalidParameterError, match=r"^alpha must"):
        probability_open("alpha", value)


@pytest.mark.parametrize("value", [0.0, -1.0, math.inf, math.nan, "a"])
def test_finite_positive_refuses(value):
    with pytest.raises(InvalidParameterError, match="clip"):
        finite_positive("clip", value)


def test_finite_non_negative_takes_zero_and_refuses_infinity():
    assert finite_non_negative("ε", 0) == 0.0
    with pytest.raises(InvalidParameterError, match="finite number ≥ 0"):
        finite_non_negative("ε", math.inf)


@given(st.integers(min_value=2, max_value=10**9))
def test_integer_at_least_accepts(value):
    assert integer_at_least("canaries", value, 2) == value


@pytest.mark.parametrize("value", [1, -3, 2.0, True, "2", None])
def test_integer_at_least_refuses_small_values_floats_and_bools(value):
    with pytest.raises(InvalidParameterError, match="canaries must be an integer ≥ 2"):
        integer_at_least("canaries", value, 2)
