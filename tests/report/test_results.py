"""Result-file envelope: round trip, infinities, validation of foreign or truncated files."""

import json
import math

import pytest

from privaudit.errors import InvalidParameterError
from privaudit.plugins import EvidencePageRef, Paper, Ref
from privaudit.report.results import RESULT_SCHEMA, evidence_pages, make_result, read_result, write_result


def test_round_trip_with_infinity(tmp_path):
    res = make_result("ledger", "per-client ε", {"accountant": "rdp", "delta": 1e-3, "max_epsilon": math.inf,
                                                  "mean_epsilon": 2.0, "per_client": {"0": {"epsilon": math.inf}}},
                      config={"rounds": 3}, seed=7)
    path = write_result(tmp_path / "r" / "ledger.json", res)
    raw = json.loads(path.read_text())
    assert raw["schema"] == RESULT_SCHEMA and raw["data"]["max_epsilon"] == "inf"
    assert raw["provenance"]["seed"] == 7 and "numpy" in raw["provenance"]["packages"]
    back = read_result(path)
    assert back.kind == "ledger" and math.isinf(back.data["max_epsilon"]) and back.config == {"rounds": 3}


def test_nan_is_refused(tmp_path):
    res = make_result("table", "t", {"columns": ["a"], "rows": [[float("nan")]]})
    with pytest.raises(InvalidParameterError, match="NaN"):
        write_result(tmp_path / "t.json", res)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "not a JSON file"), ('{"schema": "other"}', "not a privaudit result"),
     (json.dumps({"schema": RESULT_SCHEMA, "kind": "ledger", "data": {"accountant": "rdp"}}), "lacks"),
     (json.dumps({"schema": RESULT_SCHEMA, "data": {}}), "no 'kind'")],
)
def test_bad_files_are_one_clear_error(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InvalidParameterError, match=message):
        read_result(path)
    with pytest.raises(InvalidParameterError, match="no such file"):
        read_result(tmp_path / "missing.json")


def test_required_keys_checked_when_made():
    with pytest.raises(InvalidParameterError, match="lacks"):
        make_result("claim-audit", "x", {"claim_id": "c"})


# -- evidence kinds are declared by the papers (privaudit.plugins) --------------------------------------------------
ALPHA = Paper("alpha", "Alpha", evidence_pages=(
    EvidencePageRef("alpha-evidence", "alpha", Ref("json:dumps"), data_keys=("runs",), inputs=("figure",)),))
CLASH = Paper("clash", "Clash", evidence_pages=(EvidencePageRef("ledger", "ledger", Ref("json:dumps")),))


def test_a_papers_evidence_kind_requires_the_keys_and_inputs_it_declares(papers):
    papers("ALPHA")
    assert list(evidence_pages()) == ["alpha-evidence"]
    with pytest.raises(InvalidParameterError, match="lacks runs"):
        make_result("alpha-evidence", "t", {"other": 1}, inputs={"figure": "f.png"})
    with pytest.raises(InvalidParameterError, match="must declare its input"):
        make_result("alpha-evidence", "t", {"runs": []})
    assert make_result("alpha-evidence", "t", {"runs": []}, inputs={"figure": "f.png"}).kind == "alpha-evidence"
    assert make_result("ledger-of-the-future", "t", {}).kind == "ledger-of-the-future"  # unknown kinds stay allowed


def test_a_paper_cannot_redeclare_a_known_kind(papers):
    papers("CLASH")
    with pytest.raises(InvalidParameterError, match="declares the result kind 'ledger'"):
        evidence_pages()
