"""A framework's own ε classified against the recorded releases; a ledger never states a guarantee it marks invalid (issue 24)."""

from __future__ import annotations

import math

import pytest

from privaudit.accounting import Composition, Gaussian, SubsampledGaussian
from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.gaussian import gaussian_epsilon
from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Neighbouring, Sampling
from privaudit.accounting.reported import (
    CERTIFIED,
    NOT_AN_UPPER_BOUND,
    REFUTED,
    UNVERIFIED,
    FrameworkAccounting,
    assess_all,
    assess_reported,
    describe_assessment,
)

DELTA = 1e-5
FIXED = Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT


def ledger_of(mechanism, rounds: int, *, valid: bool = True, note: str = "") -> PrivacyLedger:
    ledger = PrivacyLedger()
    ledger.record_all(PrivacyEvent(SERVER, r, mechanism, 1, ("test",), valid=valid, note=note) for r in range(1, rounds + 1))
    return ledger


def reported(epsilon: float, model: FrameworkAccounting | None, client: str | None = SERVER) -> dict:
    entry = {"source": "a framework", "epsilon": epsilon, "delta": DELTA, "client": client}
    if model is not None:
        entry["accounted_as"] = model.to_dict()
    return entry


def flower_no_amplification(sigma: float, rounds: int) -> FrameworkAccounting:
    return FrameworkAccounting("rdp", ((Gaussian(sigma), rounds),), Neighbouring.ADD_REMOVE, "upper",
                               model="no amplification", caveat="an added client displaces a sampled one")


def test_flower_no_amplification_is_refuted_when_clients_are_sampled():
    """The issue's run: 5 of 10 clients, σ = 1, 10 rounds. Flower's RDP of Gaussian(σ) × 10 is below a certified lower
    bound on the fixed-size subsampled rounds that ran (sensitivity 2C under add/remove)."""
    flower = get_accountant("rdp").epsilon(Composition.of(Gaussian(1.0), 10), DELTA).epsilon
    assert flower == pytest.approx(19.05, abs=0.01)
    ledger = ledger_of(SubsampledGaussian(1.0, 0.5, FIXED), 10)
    out = assess_reported(reported(flower, flower_no_amplification(1.0, 10)), ledger)
    assert out["status"] == REFUTED
    assert out["lower_bound"]["epsilon"] > flower * 1.5 and "PRV" in out["lower_bound"]["method"]
    assert out["lower_bound"]["epsilon"] <= out["privaudit_epsilon"] == pytest.approx(31.40, abs=0.01)
    assert "displaces" in out["reason"] and "SubsampledGaussian" in out["reason"]
    line = describe_assessment({**reported(flower, None), "assessment": out})
    assert "refuted" in line and "privaudit's certified ε at that δ: 31.4" in line


def test_flower_no_amplification_is_certified_when_every_node_trains():
    """8 of 8 clients: a round is Gaussian(σ) with sensitivity C — what Flower composed; its RDP bound is certified and
    above the exact ε (a lower bound that cannot refute an upper bound of the same mechanism)."""
    rdp = get_accountant("rdp").epsilon(Composition.of(Gaussian(0.5), 8), DELTA).epsilon
    out = assess_reported(reported(rdp, flower_no_amplification(0.5, 8)), ledger_of(Gaussian(0.5), 8))
    exact = gaussian_epsilon(math.sqrt(8) / 0.5, DELTA)
    assert out["status"] == CERTIFIED and out["lower_bound"]["epsilon"] == pytest.approx(exact) and exact < rdp
    assert out["privaudit_epsilon"] == pytest.approx(exact)


def test_an_approximation_a_different_mechanism_and_an_unknown_model():
    steps = SubsampledGaussian(1.0, 0.05)
    ledger = ledger_of(steps, 200)
    upper = get_accountant("auto").epsilon(Composition.of(steps, 200), DELTA).epsilon
    gdp = FrameworkAccounting("gdp", ((steps, 200),), bound="approximation", model="CLT")
    assert assess_reported(reported(upper * 2, gdp), ledger)["status"] == NOT_AN_UPPER_BOUND
    poisson_model = FrameworkAccounting("prv", ((steps, 200),), caveat="Poisson sampling assumed")
    assert assess_reported(reported(upper, poisson_model), ledger)["status"] == CERTIFIED
    fixed = ledger_of(SubsampledGaussian(1.0, 0.05, FIXED), 200)  # the loader drew fixed-size batches instead
    out = assess_reported(reported(1e6, poisson_model), fixed)  # too large to refute, yet not a bound for what ran
    assert out["status"] == NOT_AN_UPPER_BOUND and "Poisson sampling assumed" in out["reason"]
    assert assess_reported(reported(upper, None), ledger)["status"] == UNVERIFIED
    refuted = assess_reported(reported(upper / 3, None), ledger)  # whatever the model, below a certified lower bound
    assert refuted["status"] == REFUTED


def test_invalid_releases_leave_every_figure_unverified():
    ledger = ledger_of(Gaussian(1.0), 3, valid=False, note="an update of norm 3 > C = 1 arrived: the clients did not clip")
    (entry,) = assess_all([reported(1.0, flower_no_amplification(1.0, 3))], ledger)
    assert entry["assessment"]["status"] == UNVERIFIED and "did not clip" in entry["assessment"]["reason"]


def test_a_ledger_with_an_invalid_event_states_no_guarantee_and_why():
    ledger = ledger_of(Gaussian(1.0), 3, valid=False, note="the clients did not clip")
    ledger.record(PrivacyEvent("7", 1, Gaussian(2.0), 1, ("fine",)))
    summary = ledger.summary(DELTA)
    data = summary.to_dict()
    assert data["guarantee"] == "invalid" and not data["all_valid"]
    assert "-DP for every client" not in data["statement"] and "did not clip" in data["statement"]
    assert data["per_client"][SERVER]["guarantee"] == "invalid"
    assert data["per_client"][SERVER]["failures"] == [{"reason": "the clients did not clip", "rounds": [1, 2, 3]}]
    assert data["per_client"]["7"]["guarantee"] == "dp" and data["per_client"]["7"]["failures"] == []
    valid = ledger_of(Gaussian(1.0), 3).summary(DELTA)
    assert valid.guarantee == "dp" and "-DP for every client" in valid.statement


def test_framework_accounting_round_trips_and_checks_its_bound():
    model = FrameworkAccounting("rdp", ((SubsampledGaussian(1.0, 0.5, FIXED), 3), (Gaussian(2.0), 1)),
                                Neighbouring.REPLACE_ONE, "upper", "m", "c")
    assert FrameworkAccounting.from_dict(model.to_dict()) == model
    with pytest.raises(ValueError, match="'upper' or 'approximation'"):
        FrameworkAccounting("rdp", ((Gaussian(1.0), 1),), bound="maybe")
