"""A release without noise has no DP guarantee: ε = ∞ everywhere (issue 13 item 8), never 0."""

import json
import math

import pytest

from privaudit.accounting import Composition, Gaussian, PureDP, SubsampledGaussian
from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.base import NO_GUARANTEE
from privaudit.accounting.ledger import PrivacyEvent, PrivacyLedger


@pytest.mark.parametrize("name", ["auto", "rdp", "prv", "pld", "pure"])
def test_every_accountant_answers_infinity_with_the_statement(name):
    acct = get_accountant(name)
    comp = Composition([(PureDP(math.inf), 1)] + ([] if name == "pure" else [(SubsampledGaussian(1.0, 0.01), 100)]))
    res = acct.epsilon(comp, 1e-5)
    assert math.isinf(res.epsilon)
    assert any(NO_GUARANTEE in n for n in res.notes)
    assert acct.delta(comp, 5.0).delta == 1.0


def test_no_guarantee_event_makes_the_client_and_federation_infinite():
    ledger = PrivacyLedger()
    ledger.record(PrivacyEvent("0", 1, Gaussian(2.0)))
    ledger.record(PrivacyEvent.no_guarantee("1", 1, "fedavg releases its update without noise"))
    s = ledger.summary(1e-5, "auto")
    assert math.isfinite(s.per_client["0"].epsilon) and math.isinf(s.per_client["1"].epsilon)
    assert math.isinf(s.max_epsilon) and s.guarantee == "none"
    data = s.to_dict()
    assert data["guarantee"] == "none" and NO_GUARANTEE in data["statement"] and data["per_client"]["1"]["guarantee"] == "none"
    assert NO_GUARANTEE in s.per_client["1"].assumptions[0]
    only_private = PrivacyLedger()
    only_private.record(PrivacyEvent("0", 1, Gaussian(2.0)))
    assert only_private.summary(1e-5, "rdp").guarantee == "dp"


def test_ledger_with_infinity_is_valid_json_and_round_trips():
    ledger = PrivacyLedger()
    ledger.record(PrivacyEvent.no_guarantee("3", 2, "no noise"))
    text = json.dumps(ledger.to_dict(), allow_nan=False)  # strict JSON: ∞ is written "inf"
    back = PrivacyLedger.from_dict(json.loads(text))
    assert back.events == ledger.events and not back.events[0].has_guarantee
