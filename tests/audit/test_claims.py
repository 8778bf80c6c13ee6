"""The claims registry: the seven claim ids as data, their status and reasons, suites, light imports."""

import dataclasses
import subprocess
import sys

import pytest

from privaudit.audit.claims import CLAIMS, FEDREG_TRAINING, claim_ids, claim_status, get_claim, list_claims
from privaudit.audit.plan import PendingPart, Requirement
from privaudit.audit.suites import get_suite, register, suites
from privaudit.errors import InvalidParameterError

REQUIRED_IDS = [
    "upcycled-thm6.2-fig3",
    "upcycled-thm6.3-fig4",
    "privatefl-cdp-eps8",
    "privatefl-ldp-participation",
    "pfa-heterogeneous-calibration",
    "fedreg-dpsgd-baselines",
    "fedreg-mg-membership",
]


def test_registry_lists_the_seven_claims_as_frozen_data():
    assert claim_ids() == REQUIRED_IDS
    claim = get_claim("upcycled-thm6.2-fig3")
    assert (claim.epsilon, claim.delta) == (1.40, 1e-3)
    assert claim.seed_file.endswith(".txt") and "Theorem 6.2" in claim.where
    assert claim.params["sigma"] == 0.8 and claim.params["rounds"] == 40
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.epsilon = 2.0  # type: ignore[misc]
    for c in CLAIMS:
        assert c.assumptions and c.spec_points and ":" in c.recipe
        assert c.to_dict()["claimed"] == {"epsilon": c.epsilon, "delta": c.delta}


def test_unknown_claim_is_one_clear_error():
    with pytest.raises(InvalidParameterError, match=r"unknown claim 'nope'; known claims: upcycled-thm6\.2-fig3"):
        get_claim("nope")


def test_status_ready_or_pending_with_reasons():
    statuses = {s.claim.claim_id: s for s in list_claims()}
    assert list(statuses) == REQUIRED_IDS
    for claim_id in REQUIRED_IDS[:6]:
        assert statuses[claim_id].status == "ready", statuses[claim_id].reason
        assert statuses[claim_id].reason
    mg = statuses["fedreg-mg-membership"]
    if FEDREG_TRAINING.available():
        assert mg.status == "ready" and not mg.pending_parts  # landed and wired: its canary audit runs
    else:
        assert mg.status == "pending" and "privaudit/fl/algorithms/fedreg.py" in mg.reason
    # the parts that needed other issues' training code (PrivateFL, local DP-SGD) have landed and run
    for claim_id in ("privatefl-cdp-eps8", "fedreg-dpsgd-baselines"):
        assert statuses[claim_id].pending_parts == () and statuses[claim_id].reason == "all parts run"


def test_parts_are_pending_while_their_training_code_is_missing(monkeypatch):
    from privaudit.audit.recipes import fedreg, privatefl

    monkeypatch.setattr(privatefl, "PRIVATEFL_TRAINING", Requirement("privaudit.fl.no_such_module", "PrivateFL training (issue 6)"))
    monkeypatch.setattr(fedreg, "DPSGD_TRAINING", Requirement("privaudit.fl.no_such_dpsgd", "local DP-SGD (issue 5)"))
    cdp = claim_status(get_claim("privatefl-cdp-eps8"))
    assert [p.part_id for p in cdp.pending_parts] == ["client-canary-attack"]
    assert "PrivateFL training" in cdp.pending_parts[0].reason
    dpsgd = claim_status(get_claim("fedreg-dpsgd-baselines"))
    assert [p.part_id for p in dpsgd.pending_parts] == ["dpsgd-membership"]


def test_missing_requirement_makes_a_claim_pending():
    claim = dataclasses.replace(get_claim("fedreg-dpsgd-baselines"),
                                requires=(Requirement("privaudit.fl.no_such_module", "training code of a future issue"),))
    status = claim_status(claim)
    assert status.status == "pending"
    assert status.reason == "needs training code of a future issue (privaudit/fl/no_such_module.py), which has not landed yet"
    assert isinstance(PendingPart("p", "t", "r").to_dict(), dict)


def test_default_suite_has_every_claim_and_registration_adds_entries():
    default = get_suite("default")
    assert [e.claim_id for e in default] == REQUIRED_IDS and all(e.trials >= 1 for e in default)
    # the claims suite runs the wired trial readings at larger sizes than the default suite
    larger = {e.claim_id: e.trials for e in get_suite("claims")}
    small = {e.claim_id: e.trials for e in default}
    assert {"privatefl-cdp-eps8", "fedreg-dpsgd-baselines", "fedreg-mg-membership"} <= set(larger)
    assert all(larger[c] > small[c] for c in larger)
    register("test-extra", "fedreg-dpsgd-baselines", 1)
    assert [e.claim_id for e in suites()["test-extra"]] == ["fedreg-dpsgd-baselines"]
    with pytest.raises(InvalidParameterError, match="unknown suite"):
        get_suite("no-such-suite")
    with pytest.raises(InvalidParameterError, match="at least one trial"):
        register("test-extra", "fedreg-dpsgd-baselines", 0)


def test_listing_claims_imports_neither_torch_nor_opacus():
    code = ("import sys; from privaudit.audit.claims import list_claims; list_claims(); "
            "print('torch' in sys.modules, 'opacus' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
