"""What a run declares is read from its producers' own phrases: GaussianRelease, privaudit's DP-FedAvg, Flower's tap."""

from __future__ import annotations

import pytest

from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Gaussian, Sampling, SubsampledGaussian
from privaudit.check.declared import EXPECTED, REALISED, ClipSite, Overrides, declarations, parse_divisor
from privaudit.errors import InvalidParameterError
from privaudit.interop.releases import GaussianRelease, privacy_events

MANIFEST = {"dataset": {"num_clients": 10}}


def _ledger(*events: PrivacyEvent) -> PrivacyLedger:
    ledger = PrivacyLedger()
    ledger.record_all(events)
    return ledger


def test_a_client_level_gaussian_release_is_read_with_its_clip_std_and_divisor():
    release = GaussianRelease("server", noise_multiplier=0.7, clip=0.05, sample_rate=0.5, sampling="poisson", level="client")
    decl = declarations(_ledger(*privacy_events(release, 1)), MANIFEST)
    (r,) = decl.central.values()
    assert (r.round, r.clip, r.sample_rate, r.sampling, r.population) == (1, 0.05, 0.5, Sampling.POISSON, 10)
    assert r.noise_std == pytest.approx(0.035) and r.multiplier == pytest.approx(0.7)
    assert r.divisor == EXPECTED and r.aggregate_divisor(3) == pytest.approx(5.0)  # DP-FedAvg's q·N, not the 3 that came
    assert r.clipped_at is ClipSite.SERVER and r.problem is None


def test_every_client_or_a_fixed_size_sample_divides_by_the_updates_that_arrived():
    release = GaussianRelease("server", noise_multiplier=1.0, clip=1.0, sample_rate=0.5, sampling="fixed-size", level="client")
    (r,) = declarations(_ledger(*privacy_events(release, 1)), MANIFEST).central.values()
    assert r.divisor == REALISED and r.aggregate_divisor(5) == 5.0


def test_privaudit_dp_fedavg_reads_the_exact_config_and_the_fixed_denominator():
    phrase = ("DP-FedAvg (McMahan et al. 2018): each update clipped to C = 0.123457 over all aggregated parameters, "
              "N(0, σ²C²) with σ = 0.7 on the sum, fixed denominator q·N = 5")
    event = PrivacyEvent(SERVER, 2, SubsampledGaussian(0.7, 0.5, Sampling.POISSON), 1, (phrase,))
    manifest = {"dataset": {"num_clients": 10}, "algorithm": {"privacy": {
        "mechanism": "central-dp", "variant": "dp-fedavg", "noise_multiplier": 0.7, "client_rate": 0.5, "num_clients": 10,
        "client_sampling": "poisson", "clip_norm": 0.123456789, "adaptive": None, "clip_history": []}}}
    (r,) = declarations(_ledger(event), manifest).central.values()
    assert r.clip == 0.123456789  # the manifest's exact value, not the phrase's 6 digits
    assert r.divisor == pytest.approx(5.0) and r.noise_std == pytest.approx(0.7 * 0.123456789)


def test_flower_fixed_clipping_is_read_from_the_taps_phrase():
    flwr = pytest.importorskip("flwr")  # noqa: F841
    from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg

    from privaudit.interop.flower.tap import dp_round_event, flower_dp_settings

    dp = flower_dp_settings(DifferentialPrivacyClientSideFixedClipping(FedAvg(), 0.8, 0.5, 4))
    event = dp_round_event(dp, 3, sampled=4, population=8, replied=3, weights=[1.0, 1.0, 1.0])
    (r,) = declarations(_ledger(event), {"dataset": {"num_clients": 8}}).central.values()
    assert r.clipped_at is ClipSite.CLIENT and r.clip == 0.5 and r.declared_sampled == 4 and r.population == 8
    assert r.divisor == REALISED and r.multiplier == pytest.approx(0.8 * 3 / 4)
    # noise on the mean σC/m = 0.1; on the sum of the 3 that arrived 0.3 = z·C
    assert r.noise_std / r.aggregate_divisor(3) == pytest.approx(0.8 * 0.5 / 4)


def test_record_level_and_no_guarantee_events_are_listed_not_parsed():
    record = GaussianRelease([0, 1], noise_multiplier=1.0, clip=1.0, sensitivity=2.0)
    ledger = _ledger(*privacy_events(record, 1), PrivacyEvent.no_guarantee(2, 1, "no noise"))
    decl = declarations(ledger, MANIFEST)
    assert not decl.central and decl.record_level == (1,) and decl.no_guarantee == (1,)


def test_an_event_without_a_clip_is_a_problem_unless_the_user_gives_it():
    event = PrivacyEvent(SERVER, 1, Gaussian(1.0), 1, ("noise from somewhere",))
    decl = declarations(_ledger(event), MANIFEST)
    assert not decl.central and "clip" in decl.problems[1]
    decl = declarations(_ledger(event), MANIFEST, Overrides(clip=2.0))
    assert decl.central[1].clip == 2.0 and decl.central[1].noise_std == 2.0 and not decl.problems


def test_overrides_are_checked_where_the_user_made_the_mistake():
    assert parse_divisor("realized") == REALISED and parse_divisor("7.5") == 7.5
    with pytest.raises(InvalidParameterError, match="divisor"):
        parse_divisor("median")
    with pytest.raises(InvalidParameterError, match="clip"):
        Overrides(clip=-1)
    with pytest.raises(InvalidParameterError, match="clipping site"):
        Overrides(clipped_at="middle")


def test_adaptive_clipping_reads_the_mean_release_and_skips_the_count():
    fedavg = ("DP-FedAvg (McMahan et al. 2018): each update clipped to C = 0.2 over all aggregated parameters, "
              "N(0, σ²C²) with σ = 0.7 on the sum, fixed denominator q·N = 5")
    count = ("adaptive clipping (Andrew et al. 2021): the count of clients with ‖Δ‖ ≤ C, centred by ½ per client "
             "(sensitivity ½), plus N(0, σ_b²) with σ_b = 2: multiplier 2σ_b = 4")
    every = [PrivacyEvent(SERVER, 1, Gaussian(0.7), 1, (fedavg,)), PrivacyEvent(SERVER, 1, Gaussian(4.0), 1, (count,))]
    (r,) = declarations(_ledger(*every), MANIFEST).central.values()
    assert r.multiplier == 0.7 and r.alone  # the count's event is another release, not read as the model's
    joint = PrivacyEvent(SERVER, 1, SubsampledGaussian(0.69, 0.5, Sampling.POISSON), 1, (fedavg, count))
    (r,) = declarations(_ledger(joint), MANIFEST).central.values()
    assert r.multiplier == 0.7 and r.noise_std == pytest.approx(0.14) and not r.alone  # no bound from a joint event


def test_an_event_its_producer_marked_invalid_without_a_noise_law_is_listed_with_its_reason():
    event = PrivacyEvent(SERVER, 1, Gaussian(0.3), 1, ("noise scaled by the median update norm",), valid=False,
                         note="the noise std uses an unprivatised median")
    decl = declarations(_ledger(event), MANIFEST)
    assert not decl.central and "unprivatised median" in decl.problems[1] and "nothing declared" in decl.problems[1]
    # a clip given on the command line does not turn it into a declaration
    assert not declarations(_ledger(event), MANIFEST, Overrides(clip=1.0)).central
