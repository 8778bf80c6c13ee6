"""The streaming accountant and dp-accounting DpEvent import/export (ledger included)."""

import math

import dp_accounting
import pytest

from privaudit.accounting import Composition, Gaussian, Laplace, PureDP, Sampling, SubsampledGaussian
from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.dp_events import from_dp_event, to_dp_event
from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger
from privaudit.accounting.streaming import StreamingAccountant
from privaudit.errors import UnsupportedMechanismError


def test_streaming_matches_the_batch_answer_and_memoises():
    stream = StreamingAccountant()
    for step in range(200):
        stream.add(SubsampledGaussian(1.0 + (step % 4) * 0.25, 0.01))
    batch = get_accountant("auto").epsilon(stream.composition, 1e-5)
    first = stream.epsilon(1e-5)
    assert first.epsilon == batch.epsilon and stream.epsilon(1e-5) is first  # memoised until the next release
    stream.add(Gaussian(10.0))
    assert stream.epsilon(1e-5).epsilon > first.epsilon and stream.releases == 201
    assert stream.delta(stream.epsilon(1e-5).epsilon).delta == pytest.approx(1e-5, rel=0.05)


def test_would_exceed_is_a_precheck_only():
    stream = StreamingAccountant()
    stream.add(SubsampledGaussian(1.0, 0.01), 900)
    before = stream.epsilon(1e-5).epsilon
    assert stream.would_exceed(SubsampledGaussian(1.0, 0.01), 5000, epsilon=before * 1.1, delta=1e-5)
    assert not stream.would_exceed(SubsampledGaussian(1.0, 0.01), 1, epsilon=before * 1.1, delta=1e-5)
    assert stream.composition.total_count == 900


@pytest.mark.parametrize("composition", [
    Composition([(SubsampledGaussian(1.0, 0.01), 500), (Gaussian(8.0, 2.0), 3), (Laplace(4.0, 2.0), 2)]),
    Composition([(SubsampledGaussian(1.2, 0.25, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT), 7)], "replace_one"),
    Composition([(PureDP(0.5, proven_for="replace_one"), 4)], "replace_one"),
])
def test_dp_event_round_trip(composition):
    event = to_dp_event(composition, dataset_size=1000)
    assert isinstance(event, dp_accounting.DpEvent)
    back = from_dp_event(event, composition.neighbouring)
    # equal up to the units (σ/Δ, b/Δ): the same releases, hence the same ε
    assert back.total_count == composition.total_count
    assert get_accountant("rdp").epsilon(back, 1e-5).epsilon == pytest.approx(get_accountant("rdp").epsilon(composition, 1e-5).epsilon)


def test_dp_event_export_agrees_with_dp_accountings_own_accountant():
    composition = Composition([(SubsampledGaussian(1.0, 0.01), 300), (Gaussian(4.0), 2)])
    acct = dp_accounting.pld.PLDAccountant()
    acct.compose(to_dp_event(composition))
    assert acct.get_epsilon(1e-5) == pytest.approx(get_accountant("pld").epsilon(composition, 1e-5).epsilon, rel=1e-6)


def test_unfaithful_events_are_refused():
    with pytest.raises(UnsupportedMechanismError, match="ZCDpEvent"):
        from_dp_event(dp_accounting.ZCDpEvent(0.1))
    with pytest.raises(UnsupportedMechanismError, match="add/remove"):
        to_dp_event(Composition.of(PureDP(1.0), 1))
    assert math.isinf(from_dp_event(dp_accounting.NonPrivateDpEvent()).entries[0][0].epsilon)


def test_ledger_speaks_both():
    ledger = PrivacyLedger()
    ledger.record(PrivacyEvent("0", 1, SubsampledGaussian(1.0, 0.01), 100))
    ledger.record_dp_event("1", 1, dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0)), 100), assumptions=("imported",))
    events = ledger.to_dp_events()
    assert set(events) == {"0", "1"} and events["0"] == events["1"]
    summary = ledger.summary(1e-5, "auto")
    assert summary.per_client["0"].epsilon == summary.per_client["1"].epsilon
    assert summary.per_client["1"].assumptions == ("imported",)
