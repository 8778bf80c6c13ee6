"""The randomness check on the clients' own releases: privaudit's output perturbation with the Upcycled-FL reference's
clock seed is found (the clock-seed test made generic: a small seed space, not a clock, is what it looks for), and the
same run with the run's seeded generator passes."""

from __future__ import annotations

import pytest

from privaudit.check import CheckRequest, Status, run_check
from tests.cli.test_fuzz import run_cli

TRAIN = ("train", "--algorithm", "fedavg", "--privacy", "output-perturbation", "--noise", "0.1", "--clip", "1",
         "--dataset", "digits", "--num-clients", "4", "--local-epochs", "1", "--rounds", "2", "--quiet", "--overwrite",
         "--save-client-updates")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    for rng in ("clock-ms", "seeded"):
        code, _, err = run_cli(*TRAIN, "--noise-rng", rng, "--out", root / rng)
        assert code == 0, err
    return root


def test_clock_seeded_output_perturbation_is_found(runs):
    report = run_check(CheckRequest(runs / "clock-ms", summary=False))
    randomness = next(r for r in report.results if r.name == "randomness")
    assert randomness.status is Status.FAILED and "torch seed" in randomness.reason
    seed = int(randomness.reason.split("torch seed ")[1].split(",")[0])
    assert 0 <= seed < 1000  # a clock's milliseconds
    assert len(randomness.events) == 8  # every client's release in both rounds is one of the enumerated draws
    assert next(r for r in report.results if r.name == "noise").status is Status.NOT_RUN


def test_seeded_output_perturbation_passes(runs):
    report = run_check(CheckRequest(runs / "seeded", summary=False))
    randomness = next(r for r in report.results if r.name == "randomness")
    assert randomness.status is Status.PASSED and not report.failed
    assert "client release" in randomness.reason
