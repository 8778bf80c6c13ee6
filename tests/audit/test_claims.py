"""The claims registry: the six claim ids as data, read through the paper registry; suites, light imports."""

import dataclasses
import subprocess
import sys

import pytest

from privaudit.audit.claims import all_claims, claim_ids, claim_modules, get_claim, list_claims
from privaudit.audit.plan import ClaimDetails, Reading
from privaudit.audit.suites import get_suite, register, suites
from privaudit.errors import InvalidParameterError

#: In paper-key order (fedreg, pfa, privatefl, upcycled: privaudit.plugins.papers), each paper's in its own order.
REQUIRED_IDS = [
    "fedreg-mg-vs-dpsgd-psnr",
    "pfa-heterogeneous-calibration",
    "privatefl-cdp-eps8",
    "privatefl-ldp-participation",
    "upcycled-thm6.2-fig3",
    "upcycled-thm6.3-fig4",
]


def test_registry_lists_the_six_claims_as_frozen_data():
    assert claim_ids() == REQUIRED_IDS
    claim = get_claim("upcycled-thm6.2-fig3")
    assert (claim.epsilon, claim.delta) == (1.40, 1e-3)
    assert claim.seed_file.endswith(".txt") and "Theorem 6.2" in claim.where
    assert claim.params["sigma"] == 0.8 and claim.params["rounds"] == 40
    with pytest.raises(dataclasses.FrozenInstanceError):
        claim.epsilon = 2.0  # type: ignore[misc]
    for c in all_claims():
        assert c.assumptions and c.spec_points and ":" in c.recipe
        assert c.to_dict()["claimed"] == {"epsilon": c.epsilon, "delta": c.delta}


def test_unknown_claim_is_one_clear_error():
    with pytest.raises(InvalidParameterError, match=r"unknown claim 'nope'; known claims: fedreg-mg-vs-dpsgd-psnr"):
        get_claim("nope")


def test_listing_is_the_registry_in_paper_order_and_every_recipe_builds():
    listed = list_claims()
    assert [c.claim_id for c in listed] == REQUIRED_IDS
    assert claim_modules() == tuple(f"privaudit.papers.{p}.claims" for p in ("fedreg", "pfa", "privatefl", "upcycled"))
    for claim in listed:  # every claim's recipe builds its readings (nothing is trained here)
        parts = claim.recipe_function()(claim, 1)
        assert parts and all(isinstance(p, Reading | ClaimDetails) for p in parts)


def test_default_suite_has_every_claim_and_registration_adds_entries():
    default = get_suite("default")
    assert [e.claim_id for e in default] == REQUIRED_IDS and all(e.trials >= 1 for e in default)
    # the claims suite runs the wired trial readings at larger sizes than the default suite
    larger = {e.claim_id: e.trials for e in get_suite("claims")}
    small = {e.claim_id: e.trials for e in default}
    assert {"privatefl-cdp-eps8", "fedreg-mg-vs-dpsgd-psnr"} <= set(larger)
    assert all(larger[c] > small[c] for c in larger)
    register("test-extra", "fedreg-mg-vs-dpsgd-psnr", 1)
    assert [e.claim_id for e in suites()["test-extra"]] == ["fedreg-mg-vs-dpsgd-psnr"]
    with pytest.raises(InvalidParameterError, match="unknown suite"):
        get_suite("no-such-suite")
    with pytest.raises(InvalidParameterError, match="at least one trial"):
        register("test-extra", "fedreg-mg-vs-dpsgd-psnr", 0)


def test_listing_claims_imports_neither_torch_nor_opacus():
    code = ("import sys; from privaudit.audit.claims import list_claims; list_claims(); "
            "print('torch' in sys.modules, 'opacus' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


# ------------------------------------------------------------------------------------------------
# the claims in the papers' own words: quotes, stated vs chosen numbers
# ------------------------------------------------------------------------------------------------
SEEDS = {"000_885f491b4e5299dd.txt", "001_da864522ec6b6fa7.txt", "002_ce947d6957998473.txt", "003_a806a4129da32579.txt",
         "004_d5201f9987646520.txt"}
QUOTED = [c for c in REQUIRED_IDS if not c.startswith("fedreg-")]  # FedReg states no ε: tests/papers/fedreg/test_claims_fedreg.py


@pytest.mark.parametrize("claim_id", QUOTED)
def test_every_claim_is_quoted_and_its_claimed_numbers_have_a_source(claim_id):
    claim = get_claim(claim_id)
    assert claim.quotes and all(q.seed_file in SEEDS and q.where and q.text for q in claim.quotes)
    assert claim.quote.seed_file == claim.seed_file  # the first quote comes from the paper the claim cites
    eps, delta = claim.number("epsilon"), claim.number("delta")
    assert eps is not None and delta is not None
    assert (eps.value, delta.value) == (claim.epsilon, claim.delta)  # the registry's (ε, δ) is the one documented
    for n in claim.numbers:
        assert (n.source == "stated" and n.where) or (n.source == "chosen" and n.reason)
    data = claim.to_dict()
    assert data["quotes"][0]["source"].startswith(claim.seed_file[:3])
    assert {n["name"] for n in data["stated"]} | {n["name"] for n in data["chosen"]} == {n.name for n in claim.numbers}
    assert data["claimed_provenance"] == claim.provenance()


def test_numbers_the_papers_never_state_are_marked_chosen():
    upcycled = get_claim("upcycled-thm6.2-fig3")
    # 003 states ε̄ = 1.40 (Fig. 3) but no δ: 0.001 is the ICLR draft's (000 Fig. 2), privaudit's choice
    assert upcycled.number("epsilon").source == "stated" and "003" in upcycled.number("epsilon").where
    delta = upcycled.number("delta")
    assert delta.source == "chosen" and "000" in delta.where and "003 states no δ" in delta.reason
    assert upcycled.provenance() == {"epsilon": "stated", "delta": "chosen"}
    assert {q.seed_file for q in upcycled.quotes} == {"003_a806a4129da32579.txt", "000_885f491b4e5299dd.txt"}
    assert any("Theorem 6.2" in q.where and "+ Mτ²/(2σ²|D_i|²)." in q.text for q in upcycled.quotes)  # 003's own form
    pfa = get_claim("pfa-heterogeneous-calibration")
    assert pfa.number("delta").source == "chosen" and "--delta" in pfa.number("delta").where
    assert pfa.number("epsilon").source == "stated"
    for claim_id in ("privatefl-cdp-eps8", "privatefl-ldp-participation", "upcycled-thm6.3-fig4"):
        assert get_claim(claim_id).provenance() == {"epsilon": "stated", "delta": "stated"}
    assert get_claim("upcycled-thm6.3-fig4").number("u1").source == "chosen"  # 003 states no u₁ (000 App. F.2 does)


def test_quotes_and_numbers_are_checked_and_optional():
    from privaudit.audit.claims import Number, Quote, chosen, stated

    with pytest.raises(InvalidParameterError, match="needs where"):
        stated("delta", 1e-3, "")
    with pytest.raises(InvalidParameterError, match="needs the reason"):
        chosen("delta", 1e-3, " ")
    with pytest.raises(InvalidParameterError, match="'stated' or 'chosen'"):
        Number("delta", 1e-3, "inferred")
    with pytest.raises(InvalidParameterError, match="quote needs"):
        Quote("", "003_a806a4129da32579.txt", "Fig. 3")
    assert chosen("delta", 1e-5, "the paper gives none", where="main.py --delta").text() == \
        "delta = 1e-05 (the paper gives none; from main.py --delta)"
    bare = dataclasses.replace(get_claim("upcycled-thm6.2-fig3"), quotes=(), numbers=())  # older entries still construct
    assert bare.quote is None and bare.provenance() == {"epsilon": "unrecorded", "delta": "unrecorded"}
    assert bare.to_dict()["quotes"] == [] and bare.to_dict()["stated"] == []


def test_registry_listing_shows_words_and_provenance():
    statuses = {c.claim_id: c.to_dict() for c in list_claims()}
    up = statuses["upcycled-thm6.2-fig3"]
    assert up["claimed_provenance"] == {"epsilon": "stated", "delta": "chosen"}
    assert up["quotes"][0]["source"] == "003 §7, Fig. 3 caption" and "1.40" in up["quotes"][0]["text"]
    assert up["chosen"][0]["name"] == "delta"
