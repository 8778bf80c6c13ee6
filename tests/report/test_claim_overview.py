"""The claims-at-a-glance figure's data: one panel per claim, one row per reading, every ε on one axis."""

import math

from privaudit.report.claim_overview import (
    claim_panel,
    claim_panels,
    per_client_epsilons,
    reading_client_epsilons,
)
from privaudit.report.figures import claims_overview_figure, client_epsilon_histogram
from privaudit.report.results import make_result


def _claim(**extra):
    data = {
        "claim_id": "c1", "claimed": {"epsilon": 1.4, "delta": 1e-3}, "verdict": "refuted", "reason": "r",
        "accountant": [{"label": "paper", "accountant": "prv", "upper": 1.0, "lower": 0.98, "implementation": False},
                       {"label": "code", "accountant": "support", "upper": "inf", "lower": "inf", "implementation": True,
                        "assumptions_hold": False}],
        "lower_bounds": [{"estimator": "cp", "epsilon_lb": 2.5}, {"estimator": "gdp", "epsilon_lb": 0.0}],
    }
    data.update(extra)
    return make_result("claim-audit", "a claim", data)


def test_a_claim_without_readings_is_one_row_with_every_mark():
    panel = claim_panel(_claim())
    assert (panel.claim_id, panel.verdict, panel.claimed, panel.delta) == ("c1", "refuted", 1.4, 1e-3)
    (row,) = panel.rows
    assert row.claimed == 1.4 and [b.value for b in row.lower_bounds] == [2.5, 0.0]
    paper, code = row.accountants
    assert (paper.lower, paper.upper, paper.implementation, paper.assumptions_hold) == (0.98, 1.0, False, True)
    assert (code.lower, code.upper, code.implementation, code.assumptions_hold) == (math.inf, math.inf, True, False)
    assert sorted(panel.values()) == sorted([1.4, 1.4, 1.0, 0.98, math.inf, math.inf, 2.5, 0.0])


def test_readings_are_rows_with_their_own_claimed_epsilon_and_verdict():
    readings = [
        {"reading": "a", "role": "implementation", "claimed": {"epsilon": 9.9, "delta": 1e-5}, "verdict": "refuted",
         "accountant": [{"accountant": "rdp", "upper": 24.0, "lower": None, "implementation": True}], "lower_bounds": []},
        {"reading": "b", "role": "paper", "verdict": "consistent", "accountant": [], "lower_bounds": []},  # no claimed: the claim's
        {"reading": "psnr", "role": "paper", "claimed": {"epsilon": None, "delta": None, "note": "PSNR ≤ DP-SGD's"},
         "verdict": "supported", "accountant": [], "lower_bounds": []},
    ]
    panel = claim_panel(_claim(readings=readings, verdict_basis="refuted (as implemented)"))
    assert [r.label for r in panel.rows] == ["a (implementation)", "b (paper)", "psnr (paper)"]
    assert [r.verdict for r in panel.rows] == ["refuted", "consistent", "supported"]
    assert [r.claimed for r in panel.rows] == [9.9, 1.4, None]
    assert panel.rows[0].accountants[0].lower is None and panel.rows[0].accountants[0].upper == 24.0
    assert panel.rows[2].note == "no ε: PSNR ≤ DP-SGD's" and panel.basis == "refuted (as implemented)"


def test_only_claim_results_make_panels_and_the_figure_draws_them():
    other = make_result("table", "t", {"columns": ["a"], "rows": [[1]]})
    panels = claim_panels([_claim(), other, _claim(claim_id="c2", claimed={"epsilon": None, "delta": None},
                                                   accountant=[], lower_bounds=[])])
    assert [p.claim_id for p in panels] == ["c1", "c2"] and panels[1].rows[0].note
    assert claims_overview_figure(panels)[:8] == b"\x89PNG\r\n\x1a\n"


def test_per_client_epsilons_in_each_recorded_shape():
    ledger = per_client_epsilons({"0": {"epsilon": 1.5, "budget": 1.0}, "1": {"epsilon": 0.5}}, "ledger", 1e-5)
    assert ledger.epsilons == (1.5, 0.5) and ledger.budgets == (1.0, None) and ledger.delta == 1e-5
    table = per_client_epsilons([{"client": 0, "claimed": 10.0, "rdp_epsilon": 24.3}, {"client": 1, "note": "no ε"}], "pfa")
    assert table.epsilons == (24.3,) and table.budgets == (10.0,)
    rows = per_client_epsilons([{"client_id": 3, "claimed_epsilon": 0.5, "epsilon_realised": 0.05}], "run")
    assert rows.epsilons == (0.05,) and rows.budgets == (0.5,)
    assert per_client_epsilons({"0": {"steps": 3}}, "none") is None and per_client_epsilons("text", "none") is None
    assert client_epsilon_histogram([*ledger.epsilons, math.inf], [*ledger.budgets, None], "t", 1e-5)[:4] == b"\x89PNG"


def test_reading_details_per_client_are_found():
    readings = [{"reading": "trained", "role": "implementation", "verdict": "refuted", "accountant": [], "lower_bounds": [],
                 "details": {"per_client": {"0": {"epsilon": 8.7}, "1": {"epsilon": 5.9}}}},
                {"reading": "no-table", "verdict": "consistent", "details": {"per_client": []}}]
    (group,) = reading_client_epsilons([_claim(readings=readings)])
    assert group.title == "c1 · trained" and group.epsilons == (8.7, 5.9) and group.delta == 1e-3
