"""Which end of an accountant's ε holds (privaudit.accounting.evidence_ends) and what the report draws from it."""

import math

import pytest

from privaudit.accounting.evidence_ends import cell_text, contradictions, ends, of_evidence, sentence
from privaudit.report.claim_overview import (
    AccountantMark,
    ClaimRow,
    LowerBoundMark,
    row_glyphs,
    row_statement,
)
from privaudit.report.claim_sections import accounting_contradictions, claims_section
from privaudit.report.results import make_result


def _impl(lower, upper, holds=True, **extra):
    return {"label": "code", "accountant": "ctd", "lower": lower, "upper": upper, "implementation": True,
            "assumptions_hold": holds, **extra}


def test_a_lower_end_of_the_code_holds_even_where_its_upper_end_rests_on_failing_assumptions():
    # PrivateFL-CDP's exact Gaussian composition: attained by a constructed worst case, while the upper end assumes
    # data-independent clip norms (the reference code's are unprivatised medians)
    e = of_evidence(_impl(15.126, 15.126, holds=False))
    assert e.lower_holds and not e.upper_holds and e.refutes(8.0) and not e.refutes(16.0)
    assert cell_text(e) == "≥15.1, ≤15.1*"  # the refuting value carries no star; the upper end does
    text = sentence(e)
    assert text.startswith("ε ≥ 15.1 (certified lower bound: holds for a constructed worst case)")
    assert text.endswith("the upper bound 15.1 rests on assumptions that fail")


@pytest.mark.parametrize(("lower", "upper", "holds", "cell", "words"), [
    (None, 9.19, True, "≤9.19", "ε ≤ 9.19 (certified upper bound)"),
    (None, 16.6, False, "≤16.6*", "ε ≤ 16.6, an upper bound resting on assumptions that fail"),
    (9.18, 10.6, True, "[9.18, 10.6]", "9.18 ≤ ε ≤ 10.6 (certified lower and upper bound)"),
    (0.887, 0.887, True, "=0.887", "ε = 0.887 (exact)"),
    ("inf", "inf", True, "=∞", "ε = ∞ (exact)"),
    (None, "inf", False, "∞*", "no finite upper bound (the accounting rests on assumptions that fail)"),
    # a lower end alone: the ∞ beside it is "no upper end given", never a value (PFA's old result files)
    (271.1, "inf", True, "≥271", "ε ≥ 271 (certified lower bound: holds for a constructed worst case)"),
])
def test_cells_and_sentences_of_the_code_evidence(lower, upper, holds, cell, words):
    e = of_evidence(_impl(lower, upper, holds))
    assert cell_text(e) == cell and sentence(e) == words


def test_evidence_under_the_paper_assumptions_is_marked_as_such_and_never_refutes():
    poisson = ends(21.09, 21.29, implementation=False, assumptions_hold=False)
    assert not poisson.lower_holds and not poisson.refutes(10.0)
    assert cell_text(poisson) == "[21.1, 21.3]*"
    assert sentence(poisson) == "21.1 ≤ ε ≤ 21.3 under the paper's assumptions, which fail for the code"
    assert sentence(ends(None, 9.19, implementation=False, assumptions_hold=True)) == (
        "ε ≤ 9.19 (certified upper bound) under the paper's assumptions")


def test_a_lower_end_above_an_upper_end_of_the_examined_mechanism_is_reported_as_a_bug():
    assert contradictions([_impl(271.1, "inf"), _impl(None, 271.6)]) == []  # PFA: [271.1, 271.6], consistent
    assert contradictions([_impl(15.1, 15.1, holds=False), _impl(None, 9.0, holds=False)]) == []  # ≤ 9 proves nothing
    found = contradictions([_impl(300.0, "inf"), _impl(None, 271.6)], "pfa · defaults")
    assert len(found) == 1 and found[0].startswith("pfa · defaults: a certified lower bound ε ≥ 300 lies above")
    # the paper's mechanism is another mechanism: never compared with the code's
    assert contradictions([_impl(300.0, "inf"), {**_impl(None, 21.3), "implementation": False}]) == []
    reading = {"reading": "defaults", "role": "implementation", "verdict": "refuted",
               "accountant": [_impl(300.0, "inf"), _impl(None, 271.6)], "lower_bounds": []}
    fact = {**reading, "reading": "settings", "verdict": "fact"}  # a fact lists several settings' ε: not one mechanism
    result = make_result("claim-audit", "c", {"claim_id": "c", "claimed": {"epsilon": 10.0, "delta": 1e-5},
                                              "verdict": "refuted", "reason": "r", "accountant": [],
                                              "lower_bounds": [], "readings": [reading, fact]})
    assert accounting_contradictions([result]) == [
        "c · defaults: a certified lower bound ε ≥ 300 lies above a certified upper bound ε ≤ 271.6 for the same mechanism"]
    section = claims_section([result])
    assert any("Contradictory accounting" in getattr(b, "text", "") for b in section.blocks)


def test_glyphs_draw_each_end_on_its_own_and_never_fade_a_refuting_value():
    row = ClaimRow("reference-mnist-dnn (implementation)", "refuted", 8.0,
                   (AccountantMark("calibrated", 7.196, None, False, False), AccountantMark("code", 15.126, 15.126, True, False)),
                   (LowerBoundMark("gdp", 9.5), LowerBoundMark("cp", 0.0)))
    glyphs = row_glyphs(row)
    kinds = [(g.kind, g.source, g.faded, g.refutes) for g in glyphs]
    assert kinds == [("claimed", "claimed", False, False), ("upper", "paper", True, False),
                     ("upper", "implementation", True, False), ("lower", "implementation", False, True),
                     ("attack", "attack", False, True), ("attack", "attack", False, False)]
    assert all(not g.faded for g in glyphs if g.refutes)
    assert row_statement(row) == "ε ≥ 15.1"
    # a lower end alone is a ▶ at its value: no line to ∞
    lone = ClaimRow("defaults", "refuted", 10.17, (AccountantMark("lower end", math.inf, 271.1, True, True),
                                                   AccountantMark("upper end", 271.6, None, True, True)))
    assert [(g.kind, g.value) for g in row_glyphs(lone)] == [("claimed", 10.17), ("lower", 271.1), ("upper", 271.6)]
    # an interval of the code, both ends holding: a solid line, its lower end refuting
    interval = ClaimRow("defaults", "refuted", 10.17, (AccountantMark("code", 271.6, 271.1, True, True),))
    span, upper, lower = row_glyphs(interval)[1:]
    assert (span.kind, span.start, span.value, span.faded) == ("span", 271.1, 271.6, False)
    assert (upper.kind, lower.kind, lower.refutes, lower.faded) == ("upper", "lower", True, False)
    consistent = ClaimRow("paper", "consistent", 9.98, (AccountantMark("code", 2.124, 2.103, True, True),))
    assert row_statement(consistent) == "ε ≤ 2.12"


def test_ends_equal_at_the_precision_shown_read_as_one_value():
    e = ends(0.887466944579294, 0.8874669551541674, implementation=True, assumptions_hold=True)  # ctd's two ends
    assert not e.exact and cell_text(e) == "=0.887" and sentence(e) == "ε = 0.887 (exact)"
    assert cell_text(e, lambda v: f"{v:.9g}") == "[0.887466945, 0.887466955]"
