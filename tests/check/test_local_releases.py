"""The randomness check on the clients' own releases: privaudit's output perturbation with the Upcycled-FL reference's
clock seed is found (the clock-seed test made generic: a small seed space, not a clock, is what it looks for), and the
same run with the run's seeded generator passes; a recorded local-DP loop (record-level GaussianRelease on a whole
clipped update) with one seed for every release is caught, by the seed search for a small seed and by the repeats for
any seed, and with fresh noise passes."""

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


@pytest.fixture(scope="module")
def local_dp(tmp_path_factory, loops):
    root = tmp_path_factory.mktemp("local-dp")
    return {name: loops.run_local_loop(root / name, seed=2, noise_seed=seed)
            for name, seed in (("fresh", None), ("small-seed", 1234), ("large-seed", 987_654_321))}


def _randomness(path):
    report = run_check(CheckRequest(path, summary=False))
    return report, next(r for r in report.results if r.name == "randomness")


def test_a_local_dp_loop_with_fresh_noise_passes(local_dp):
    report, randomness = _randomness(local_dp["fresh"])
    assert randomness.status is Status.PASSED and not report.failed, randomness.reason
    assert "12 client release(s)" in randomness.reason and "GaussianRelease on a whole clipped update" in randomness.assumptions[0]
    assert {t.name for t in randomness.tests} == {"repeated noise", "small seed space"}
    assert report.statistical == 1 and randomness.level == pytest.approx(0.05)  # the only statistical check that ran


def test_one_seed_for_every_local_release_is_caught(local_dp):
    _, small = _randomness(local_dp["small-seed"])
    tests = {t.name: t for t in small.tests}
    assert small.status is Status.FAILED and tests["small seed space"].rejected
    assert "torch seed 1234" in tests["small seed space"].detail
    _, large = _randomness(local_dp["large-seed"])
    tests = {t.name: t for t in large.tests}
    assert large.status is Status.FAILED and tests["repeated noise"].rejected and not tests["small seed space"].rejected
    assert len(large.events) == 12  # every release's record-level event is marked


def test_a_skipped_sub_test_says_why(local_dp):
    report = run_check(CheckRequest(local_dp["fresh"], summary=False, seeds=0, only=("randomness",)))
    randomness = next(r for r in report.results if r.name == "randomness")
    assert [t.name for t in randomness.tests] == ["repeated noise"]
    assert any("not searched" in need for need in randomness.needs)
    assert [r.reason for r in report.results if r.name == "noise"] == ["not requested (--only randomness)"]
