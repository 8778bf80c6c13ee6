"""FedReg's claim audited as stated: MG vs DP-SGD at similar PSNR (a comparison claim), and two facts — no ε invented."""

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

from privaudit.audit import claims as claims_module
from privaudit.audit.claims import get_claim
from privaudit.audit.comparison import (
    ComparisonRule,
    Finding,
    PairedComparison,
    comparison_by_role,
    decide_comparison,
    fact,
    overall_comparison,
    paired_bound,
)
from privaudit.audit.plan import Role
from privaudit.audit.runner import AuditSettings, run_claim
from privaudit.errors import InvalidParameterError
from privaudit.report.results import read_result

torch.set_num_threads(1)

CLAIM_ID = "fedreg-mg-vs-dpsgd-psnr"
FEDREG_SEED = "002_ce947d6957998473.txt"
RULE = ComparisonRule("candidate ≤ reference + Δ", 1.0)


# ------------------------------------------------------------------------------------------------
# the registry entry: the paper's words, no (ε, δ)
# ------------------------------------------------------------------------------------------------
def test_fedreg_claim_states_no_epsilon_and_quotes_the_paper():
    claim = get_claim(CLAIM_ID)
    assert claim.kind == "comparison" and claim.epsilon is None and claim.delta is None
    assert claim.to_dict()["claimed"] == {"epsilon": None, "delta": None}
    assert claim.to_dict()["claim_kind"] == "comparison" and "Δ = 1 dB" in claim.criterion
    assert all(q.seed_file == FEDREG_SEED for q in claim.quotes)
    assert "we tune the noise level in DPSGD to generate images with similar quality as measured by PSNR" in claim.quote.text
    assert claim.quote.source == "002 §4.5"
    assert any("similar privacy protection level" in q.text for q in claim.quotes)
    # no ε or δ is recorded as the paper's: the δ of the ε facts is privaudit's choice
    assert claim.number("epsilon") is None and claim.number("delta") is None
    assert claim.provenance() == {"epsilon": "unrecorded", "delta": "unrecorded"}
    assert claim.number("delta (for the ε facts)").source == "chosen"
    for name, value in (("sigma (EMNIST)", 0.01), ("sigma (CIFAR-10)", 0.05), ("sigma (CT)", 0.001), ("clip", 1.0)):
        assert claim.number(name).source == "stated" and claim.number(name).value == value
        assert "App. B.4" in claim.number(name).where
    assert claim.number("margin Δ").source == "chosen" and claim.number("iterations").source == "chosen"
    assert [s[2] for s in claim.params["settings"]] == [0.01, 0.05, 0.001]
    assert dict(claim.suites) == {"default": 1, "claims": 8}


# ------------------------------------------------------------------------------------------------
# the comparison rule
# ------------------------------------------------------------------------------------------------
def test_paired_bound_is_a_one_sided_t_bound():
    from scipy.stats import t

    d = (1.0, 2.0, 3.0, 4.0)
    b = paired_bound(PairedComparison("x", "a", "b", d), 0.05, 1.0)
    half = t.ppf(0.95, 3) * np.std(d, ddof=1) / 2.0
    assert b.mean == pytest.approx(2.5) and b.lower == pytest.approx(2.5 - half) and b.upper == pytest.approx(2.5 + half)
    assert b.finding is Finding.INCONCLUSIVE  # the bounds straddle Δ = 1
    assert paired_bound(PairedComparison("x", "a", "b", (5.0, 6.0, 7.0)), 0.05, 1.0).finding is Finding.NOT_SUPPORTED
    assert paired_bound(PairedComparison("x", "a", "b", (0.0, 0.0, 0.0)), 0.05, 1.0).finding is Finding.SUPPORTED
    one = paired_bound(PairedComparison("x", "a", "b", (9.0,)), 0.05, 1.0)
    assert one.finding is Finding.INCONCLUSIVE and math.isinf(one.upper)  # one sample: no bound
    with pytest.raises(InvalidParameterError):
        paired_bound(PairedComparison("x", "a", "b", (math.inf, 1.0)), 0.05, 1.0)
    with pytest.raises(InvalidParameterError):
        ComparisonRule("r", -1.0)


def test_decide_comparison_findings_and_bonferroni():
    worse = PairedComparison("σ = 0.01", "MG", "DP", (10.0, 12.0, 11.0, 13.0))
    same = PairedComparison("σ = 0.05", "MG", "DP", (0.0, 0.1, -0.1, 0.0))
    result = decide_comparison([worse, same], RULE, 0.05)
    assert result.verdict is Finding.NOT_SUPPORTED and "MG is worse than DP" in result.reason
    assert result.basis["per_comparison_level"] == pytest.approx(0.975)  # α split over the two comparisons
    assert [c["finding"] for c in result.basis["comparisons"]] == ["not supported", "supported"]
    assert decide_comparison([same], RULE, 0.05).verdict is Finding.SUPPORTED
    # a missing stronger attacker blocks "supported" only; an invalid measurement blocks everything
    held = decide_comparison([same], RULE, 0.05, support_needs=["the adaptive attacker was not run"])
    assert held.verdict is Finding.INCONCLUSIVE and "adaptive attacker was not run" in held.reason
    assert decide_comparison([worse], RULE, 0.05, support_needs=["x"]).verdict is Finding.NOT_SUPPORTED
    broken = decide_comparison([worse], RULE, 0.05, invalid=["the attack fails without a defence"])
    assert broken.verdict is Finding.INCONCLUSIVE and broken.reason.startswith("the attack fails")
    assert decide_comparison([PairedComparison("σ", "MG", "DP", (3.0,))], RULE, 0.05).verdict is Finding.INCONCLUSIVE


def test_claim_level_combination_keeps_facts_beside_the_finding():
    @dataclasses.dataclass
    class Reading:
        reading_id: str
        role: Role
        decision: object = print

    @dataclasses.dataclass
    class Outcome:
        reading: Reading
        verdict: object

    fine = decide_comparison([PairedComparison("σ", "MG", "DP", (0.0, 0.0))], RULE, 0.05)
    bad = decide_comparison([PairedComparison("σ", "MG", "DP", (9.0, 10.0, 11.0))], RULE, 0.05)
    no_dp = fact("no DP guarantee (ε = ∞)", "no noise", epsilon=math.inf)
    outcomes = [Outcome(Reading("a", Role.PAPER), fine), Outcome(Reading("b", Role.PAPER), bad),
                Outcome(Reading("f", Role.FACT), no_dp)]
    finding, reason, notes = overall_comparison(outcomes)
    assert finding is Finding.NOT_SUPPORTED and reason.startswith("b: ") and notes == []  # facts: in by_role
    by_role = comparison_by_role(outcomes)
    assert by_role["paper"]["verdict"] == "not supported" and by_role["paper"]["basis"] == "as stated"
    assert by_role["fact:f"] == {"verdict": "no DP guarantee (ε = ∞)", "basis": "fact", "reason": "f: no noise",
                                 "readings": {"f": "fact"}}
    assert overall_comparison(outcomes[:1])[0] is Finding.SUPPORTED
    assert overall_comparison(outcomes[2:])[0] is Finding.INCONCLUSIVE  # facts alone decide nothing


# ------------------------------------------------------------------------------------------------
# the trials: one image under every defence, paired
# ------------------------------------------------------------------------------------------------
def _spec(attack="analytic", model="upcycled-mlp", iterations=None):
    from privaudit.papers.fedreg.recipe import _trial_spec

    claim = get_claim(CLAIM_ID)
    params = dict(claim.parameters)
    if iterations is not None:
        params["ig"] = (("model", "convnet"), ("iterations", iterations))
    spec = _trial_spec(params, attack, 1)
    assert spec["model"] == model
    return spec


def test_psnr_trial_is_paired_and_seeded():
    from privaudit.papers.fedreg.trials import psnr_trial

    spec = _spec()
    result = psnr_trial(spec, 11)

    def timeless(r):
        return {**r, "rows": [{k: v for k, v in row.items() if k != "seconds"} for row in r["rows"]]}

    assert timeless(result) == timeless(psnr_trial(spec, 11))  # seeded, repeatable
    rows = {r["defence"]: r for r in result["rows"]}
    assert list(rows) == ["fedavg", "dpsgd:0.01", "dpsgd:0.05", "dpsgd:0.001", "fedreg", "fedreg-mg"]
    assert rows["fedavg"]["exact"] and rows["fedavg"]["psnr"] == 100.0  # the closed form recovers FedAvg exactly (capped)
    assert rows["dpsgd:0.001"]["psnr"] > rows["dpsgd:0.01"]["psnr"] > rows["dpsgd:0.05"]["psnr"] - 1.0  # more noise, less PSNR
    assert 5.0 < result["baseline_psnr"] < 20.0  # the mean of the other images, what an attacker gets without the update
    assert rows["fedreg-mg"]["psnr"] > rows["dpsgd:0.01"]["psnr"]  # MG leaves the first layer's rank-1 structure intact
    json.dumps(result)


def test_mg_release_is_deterministic():
    from privaudit.papers.fedreg.trials import release_is_deterministic

    check = release_is_deterministic(_spec("ig", "convnet"))
    assert check["repeat_distance"] == 0.0 and check["neighbour_distance"] > 0.0


# ------------------------------------------------------------------------------------------------
# end to end: the claim (IG shrunk to a few iterations), its JSON, summary and report
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fast_audit(tmp_path_factory):
    claim = get_claim(CLAIM_ID)
    params = dict(claim.parameters)
    params["ig"] = (("model", "convnet"), ("iterations", 3))
    fast = dataclasses.replace(claim, parameters=tuple(params.items()))
    out = tmp_path_factory.mktemp("fedreg")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(claims_module.claims_by_id(), CLAIM_ID, fast)
        audit = run_claim(CLAIM_ID, AuditSettings(trials=1, out=out, progress=False))
    return audit, out


def test_claim_audit_decides_by_the_comparison_rule_and_reports_facts(fast_audit):
    audit, _ = fast_audit
    data = read_result(audit.path).data
    assert data["claim_kind"] == "comparison" and data["claimed"] == {"epsilon": None, "delta": None}
    readings = {r["reading"]: r for r in data["readings"]}
    assert list(readings) == ["psnr-ig", "psnr-analytic", "dpsgd-epsilon", "mg-no-dp-guarantee"]
    assert [r["role"] for r in readings.values()] == ["paper", "paper", "fact", "fact"]
    assert all(r["lower_bounds"] == [] for r in readings.values())  # no membership test, no invented ε to refute
    # one IG image: no bound, and without the adaptive attacker "supported" could not be concluded anyway
    ig = readings["psnr-ig"]
    assert ig["verdict"] == "inconclusive" and ig["details"]["adaptive_attacker"] is False
    # 16 closed-form images: MG's reconstructions are far better than DP-SGD's at σ = 0.01 and 0.05
    analytic = readings["psnr-analytic"]
    assert analytic["trials"] == 16 and analytic["verdict"] == "not supported"
    findings = {c["label"]: c["finding"] for c in analytic["details"]["decision"]["comparisons"]}
    assert findings["σ = 0.01"] == findings["σ = 0.05"] == "not supported" and findings["σ = 0.001"] == "supported"
    means = analytic["details"]["effective_psnr_mean"]
    assert set(means) == {"FedAvg", "DP-SGD σ = 0.01", "DP-SGD σ = 0.05", "DP-SGD σ = 0.001", "FedReg", "FedReg+MG"}
    assert "what MG adds over plain FedReg" in analytic["reason"]  # plain FedReg is a row: MG's own effect is measured
    assert data["verdict"] == "not supported" and data["reason"].startswith("psnr-analytic:")
    # the facts: DP-SGD's real ε at the paper's σ, and MG's ε = ∞ by construction
    eps = {round(r["sigma"], 3): r for r in readings["dpsgd-epsilon"]["details"]["settings"]}
    assert eps[0.01]["epsilon"] == pytest.approx(1.019e5, rel=1e-3) and eps[0.001]["epsilon"] > 5e5
    assert eps[0.05]["epsilon_one_step"] == pytest.approx(284.4, rel=1e-3)
    mg = readings["mg-no-dp-guarantee"]
    assert mg["verdict"] == "fact" and mg["accountant"][0]["upper"] in ("inf", math.inf)
    assert mg["details"]["repeat_distance"] == 0.0 and "not a refuted ε" in mg["reason"]
    by_role = data["verdicts_by_role"]
    assert by_role["fact:mg-no-dp-guarantee"]["verdict"] == "no DP guarantee for FedReg+MG (ε = ∞)"
    assert data["verdict_basis"].startswith("not supported (as stated)") and "(ε = ∞) (fact)" in data["verdict_basis"]


def test_summary_and_report_render_the_comparison(fast_audit, tmp_path):
    from rich.console import Console

    from privaudit.audit.summary import audit_table, reasons
    from privaudit.report.build import build_report

    audit, out = fast_audit
    console = Console(record=True, width=200)
    console.print(audit_table([audit]))
    text = console.export_text()
    assert "none stated" in text and "not supported" in text and "fact" in text
    lines = reasons([audit])
    assert lines[0].startswith(f"{CLAIM_ID}: not supported — not supported (as stated)")
    assert any(line.startswith("  fact: no DP guarantee for FedReg+MG (ε = ∞) — mg-no-dp-guarantee:") for line in lines)
    markdown = build_report([out], tmp_path / "report").markdown.read_text()
    assert "none stated (a comparison claim)" in markdown and "**not supported**" in markdown
    assert "PSNR per defence and attacker" in markdown and "data-only baseline" in markdown
    assert "**supported / not supported / inconclusive**" in markdown
