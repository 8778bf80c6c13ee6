"""The per-client ledger: events, budgets, pre-checks, max/mean summaries, JSON round trip."""

import numpy as np
import pytest

from privaudit.accounting import Gaussian, SubsampledGaussian
from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.errors import InvalidParameterError


def make_ledger():
    ledger = PrivacyLedger()
    for r in range(1, 4):
        ledger.record(PrivacyEvent("0", r, Gaussian(1.0, 0.1), assumptions=("sensitivity τ/|D| per paper Thm 6.2",)))
        ledger.record(PrivacyEvent("1", r, Gaussian(1.0, 0.5)))
    ledger.record(PrivacyEvent("2", 1, Gaussian(1.0, 0.5), valid=False, note="unprivatised median"))
    ledger.set_budget("1", 2.0, 1e-5)
    return ledger


def test_summary_reports_max_and_mean_never_the_mean_client():
    s = make_ledger().summary(1e-5, accountant="prv")
    per = {cid: c.epsilon for cid, c in s.per_client.items()}
    assert s.max_epsilon == max(per.values())
    assert s.mean_epsilon == pytest.approx(np.mean(list(per.values())))
    assert per["1"] > per["0"]
    assert s.per_client["0"].rounds == 3 and s.per_client["0"].steps == 3
    assert s.per_client["0"].assumptions == ("sensitivity τ/|D| per paper Thm 6.2",)


def test_invalid_events_mark_the_client_not_valid():
    s = make_ledger().summary(1e-5)
    assert not s.per_client["2"].valid and s.per_client["1"].valid and not s.all_valid


def test_budget_and_precheck():
    ledger = make_ledger()
    eps_now = ledger.epsilon_for("1", 1e-5, "prv").epsilon
    assert ledger.summary(1e-5, "prv").per_client["1"].budget == 2.0
    # one more identical release would raise ε; with a budget just above today's ε it must be refused
    ledger.set_budget("1", eps_now * 1.001, 1e-5)
    assert not ledger.can_participate("1", Gaussian(1.0, 0.5), accountant="prv")
    assert ledger.can_participate("1", Gaussian(1e6), accountant="prv")
    assert ledger.can_participate("no-budget", Gaussian(0.1))


def test_over_budget_is_reported():
    ledger = make_ledger()
    ledger.set_budget("0", 0.01, 1e-5)
    assert ledger.summary(1e-5, "rdp").per_client["0"].over_budget


def test_json_round_trip(tmp_path):
    ledger = make_ledger()
    ledger.record(PrivacyEvent(SERVER, 1, SubsampledGaussian(3.0, 0.3), count=1))
    path = tmp_path / "ledger.json"
    ledger.save(path)
    back = PrivacyLedger.load(path)
    assert back.to_dict() == ledger.to_dict()
    assert back.summary(1e-5).to_dict() == ledger.summary(1e-5).to_dict()


def test_rejects_foreign_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"schema": "something-else"}')
    with pytest.raises(InvalidParameterError):
        PrivacyLedger.load(path)
    with pytest.raises(InvalidParameterError):
        PrivacyEvent("0", 1, Gaussian(1.0), count=0)


def test_thousand_clients_with_distinct_noise():
    ledger = PrivacyLedger()
    sigmas = np.linspace(0.8, 2.0, 1000)
    for i, s in enumerate(sigmas):
        ledger.record(PrivacyEvent(i, 1, SubsampledGaussian(float(s), 0.01), count=100))
    s = ledger.summary(1e-5, accountant="rdp")
    assert len(s.per_client) == 1000
    rdp = get_accountant("rdp")
    from privaudit.accounting import Composition

    for i in (0, 499, 999):
        direct = rdp.epsilon(Composition.of(SubsampledGaussian(float(sigmas[i]), 0.01), 100), 1e-5).epsilon
        assert s.per_client[str(i)].epsilon == pytest.approx(direct, rel=1e-12)
    assert s.max_epsilon == s.per_client["0"].epsilon
