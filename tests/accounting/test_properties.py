"""Property tests: monotonicity of ε, interval ordering, calibration round trip."""

from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.accounting import Composition, SubsampledGaussian
from privaudit.accounting.accountants import get_accountant

RDP = get_accountant("rdp")
sigmas = st.floats(0.5, 10.0)
rates = st.floats(1e-3, 1.0)
steps = st.integers(1, 5000)


def eps(sigma, q, t, delta=1e-5):
    return RDP.epsilon(Composition.of(SubsampledGaussian(sigma, q), t), delta).epsilon


@settings(max_examples=40, deadline=None)
@given(sigma=sigmas, q=rates, t=steps, factor=st.floats(1.01, 3.0))
def test_epsilon_non_increasing_in_noise(sigma, q, t, factor):
    assert eps(sigma * factor, q, t) <= eps(sigma, q, t) + 1e-9


@settings(max_examples=40, deadline=None)
@given(sigma=sigmas, q=rates, t=steps, extra=st.integers(1, 2000))
def test_epsilon_non_decreasing_in_steps(sigma, q, t, extra):
    assert eps(sigma, q, t + extra) >= eps(sigma, q, t) - 1e-9


@settings(max_examples=40, deadline=None)
@given(sigma=sigmas, q=st.floats(1e-3, 0.5), t=steps, factor=st.floats(1.01, 2.0))
def test_epsilon_non_decreasing_in_sample_rate(sigma, q, t, factor):
    assert eps(sigma, min(1.0, q * factor), t) >= eps(sigma, q, t) - 1e-9


@settings(max_examples=40, deadline=None)
@given(sigma=sigmas, q=rates, t=steps, d=st.floats(1e-9, 1e-2))
def test_epsilon_non_increasing_in_delta(sigma, q, t, d):
    assert eps(sigma, q, t, d * 10) <= eps(sigma, q, t, d) + 1e-9


@settings(max_examples=6, deadline=None)
@given(sigma=st.floats(0.9, 3.0), q=st.floats(0.005, 0.05), t=st.integers(10, 500))
def test_prv_interval_is_ordered_and_below_rdp(sigma, q, t):
    comp = Composition.of(SubsampledGaussian(sigma, q), t)
    res = get_accountant("prv").epsilon(comp, 1e-5)
    assert res.lower <= res.estimate <= res.epsilon
    assert res.lower <= RDP.epsilon(comp, 1e-5).epsilon
