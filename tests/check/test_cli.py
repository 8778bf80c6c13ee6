"""``privaudit check RUN``: a table, JSON valid against its schema, a result file ``privaudit report`` renders, exit codes
0 / 1 / 2, and a failed check written into the checkpoint so ``compute-epsilon --checkpoint`` states no guarantee."""

from __future__ import annotations

import json
import shutil

import pytest

from privaudit.fl.engine.checkpoint import read_manifest
from tests.cli.test_fuzz import run_cli

pytest.importorskip("jsonschema")


def test_a_correct_run_exits_0_and_prints_the_table(recorded):
    code, out, err = run_cli("check", recorded["correct"], "--no-mark")
    assert code == 0, err
    for word in ("noise", "randomness", "sampling", "accounting", "passed", "not-run", "Bonferroni"):
        assert word in out


def test_a_failed_check_exits_1_and_json_validates(recorded):
    from privaudit.schemas import validate

    code, out, err = run_cli("check", recorded["sigma-squared"], "--no-mark", "--json")
    assert code == 1, err
    document = json.loads(out)
    validate(document)  # privaudit/schemas/check.schema.json, by its "schema" field
    assert document["outcome"] == "failed" and document["marks_written"] is False
    noise = next(c for c in document["checks"] if c["name"] == "noise")
    assert noise["status"] == "failed" and noise["bound"]["refutes"] and noise["null"] and noise["assumptions"]


def test_bad_input_exits_2_with_one_line(tmp_path, recorded):
    for args in ((tmp_path / "nothing",), (recorded["correct"], "--divisor", "median"),
                 (recorded["correct"], "--probe", "x.y:z"), (), (recorded["correct"], "--alpha", "2")):
        code, _out, err = run_cli("check", *args)
        assert code == 2 and err.startswith("error:") and len(err.strip().splitlines()) == 1, (args, err)


def test_marks_are_written_and_compute_epsilon_then_states_no_guarantee(tmp_path, recorded):
    path = tmp_path / "copy"
    shutil.copytree(recorded["sigma-squared"], path)
    code, before, _ = run_cli("compute-epsilon", "--checkpoint", path, "--delta", "1e-5", "--json")
    assert code == 0 and json.loads(before)["guarantee"] == "dp"
    code, out, err = run_cli("check", path)
    assert code == 1 and "marked in the checkpoint" in out, err
    manifest = read_manifest(path)  # still a verified checkpoint (its content hash recomputed)
    assert manifest["checked"]["failed"] == ["noise"]
    code, after, err = run_cli("compute-epsilon", "--checkpoint", path, "--delta", "1e-5", "--json")
    ledger = json.loads(after)
    assert code == 0 and ledger["guarantee"] == "invalid", err
    assert "privaudit check noise" in ledger["per_client"]["server"]["failures"][0]["reason"]
    notes = [e["note"] for e in manifest["ledger"]["events"]]
    run_cli("check", path)  # again: the same result, nothing added twice
    assert [e["note"] for e in read_manifest(path)["ledger"]["events"]] == notes


def test_the_result_file_renders_in_a_report(tmp_path, recorded):
    from privaudit.schemas import validate

    result = tmp_path / "results" / "check.json"
    code, _, err = run_cli("check", recorded["fixed-size-as-poisson"], "--no-mark", "--out", result)
    assert code == 1, err
    document = json.loads(result.read_text())
    validate(document)  # the result envelope, and its kind's data against check.schema.json
    assert document["kind"] == "check"
    code, _, err = run_cli("report", tmp_path / "results", "--out", tmp_path / "report")
    assert code == 0, err
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Declared against observed (privaudit check)" in markdown and "| sampling | **failed** |" in markdown
    assert "What the checks needed that the run did not record" in markdown


def test_a_malformed_check_document_fails_its_schema(recorded):
    from privaudit.errors import InvalidParameterError
    from privaudit.schemas import validate

    _code, out, _ = run_cli("check", recorded["correct"], "--no-mark", "--json")
    document = json.loads(out)
    document["checks"][0]["status"] = "maybe"
    with pytest.raises(InvalidParameterError, match="checks/0/status"):
        validate(document)
