"""Probing a mechanism in isolation: a correct privatizer passes, an unclipped one fails its sensitivity and is refuted
by the gdp route, σ² for σ fails the noise std; Flower's wrapper probed through its own aggregate passes."""

from __future__ import annotations

import pytest

from privaudit.check import Status
from privaudit.check.probe import ProbeRequest, import_function, run_probe
from privaudit.errors import InvalidParameterError
from tests.check import probe_functions as f
from tests.cli.test_fuzz import run_cli


def _probe(function, **options):
    return run_probe(ProbeRequest(function, clip=f.CLIP, noise_multiplier=f.SIGMA, trials=400, **options))


def _tests(result):
    return {t.name: t for t in result.tests}


def test_a_correct_privatizer_passes():
    result = _probe(f.dp_fedavg)
    assert result.status is Status.PASSED, result.reason
    assert result.bound is not None and not result.bound.refutes and result.bound.claimed > 0


def test_an_unclipped_privatizer_fails_its_sensitivity_and_is_refuted():
    result = _probe(f.unclipped)
    tests = _tests(result)
    assert result.status is Status.FAILED
    assert tests["sensitivity"].rejected and tests["sensitivity"].statistic > 5  # the canary moved it ~10 × C/A
    assert result.bound.refutes and tests["ε lower bound (gdp)"].rejected


def test_sigma_squared_fails_the_noise_std():
    tests = _tests(_probe(f.sigma_squared))
    assert tests["noise std"].rejected and tests["noise std"].statistic == pytest.approx(f.SIGMA, rel=0.05)


def test_flowers_wrapper_probed_through_its_aggregate_passes():
    pytest.importorskip("flwr")
    from privaudit.check.probe_flower import flower_aggregate

    result = run_probe(ProbeRequest(flower_aggregate(f.flower_dp_strategy()), clip=f.CLIP, noise_multiplier=f.SIGMA,
                                    clients=10, dimension=32, trials=200))
    assert result.status is Status.PASSED, result.reason


def test_the_function_is_named_and_its_failures_are_one_line():
    assert import_function("tests.check.probe_functions:dp_fedavg") is f.dp_fedavg
    with pytest.raises(InvalidParameterError, match=r"package\.module:function"):
        import_function("not a name")
    with pytest.raises(InvalidParameterError, match="cannot be imported"):
        import_function("tests.check.probe_functions:missing")
    with pytest.raises(InvalidParameterError, match="out of cheese"):
        _probe(f.broken)


def test_probe_on_the_command_line():
    code, out, err = run_cli("check", "--probe", "tests.check.probe_functions:unclipped", "--clip", "1",
                             "--noise-multiplier", "0.7", "--trials", "200")
    assert code == 1 and "failed" in out and "sensitivity" in out, err
    code, out, err = run_cli("check", "--probe", "tests.check.probe_functions:dp_fedavg", "--clip", "1",
                             "--noise-multiplier", "0.7", "--trials", "200")
    assert code == 0, out + err
    code, _, err = run_cli("check", "--probe", "tests.check.probe_functions:dp_fedavg", "--clip", "1")
    assert code == 2 and "--noise-multiplier" in err
