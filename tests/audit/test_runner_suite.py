"""Full-size audits (``-m slow``): the default suite within its time budget, and Thm 6.2 at the claim's trial count."""

import time

import pytest
import torch

from privaudit.audit.runner import AuditSettings, run_claim, run_suite
from privaudit.audit.suites import get_suite
from privaudit.report.results import read_result

torch.set_num_threads(1)


@pytest.mark.slow
def test_default_suite_runs_every_claim_within_ten_minutes(tmp_path):
    started = time.perf_counter()
    result = run_suite("default", AuditSettings(out=tmp_path, progress=False))
    assert time.perf_counter() - started < 600
    ran = {a.claim.claim_id for a in result.audits}
    assert ran == {e.claim_id for e in get_suite("default")}
    for audit in result.audits:
        assert read_result(audit.path).data["verdict"] == audit.verdict.value
        assert not any(n.startswith("validity check failed") for n in audit.notes), audit.notes
    verdicts = {a.claim.claim_id: a.verdict.value for a in result.audits}
    assert verdicts["upcycled-thm6.2-fig3"] == verdicts["privatefl-cdp-eps8"] == "refuted"
    assert verdicts["fedreg-mg-vs-dpsgd-psnr"] == "not supported"  # a comparison claim: no ε is claimed or refuted


@pytest.mark.slow
def test_thm62_worst_case_record_is_refuted_by_the_attack_at_full_size(tmp_path):
    audit = run_claim("upcycled-thm6.2-fig3", AuditSettings(trials=500, out=tmp_path, progress=False))
    readings = {o.reading.reading_id: o for o in audit.readings}
    worst = readings["paper-sgd-worst-case"]
    assert worst.verdict.verdict.value == "refuted" and all(r.startswith("attack:") for r in worst.verdict.refuted_by)
    assert readings["theorem-setting"].verdict.verdict.value == "consistent"
