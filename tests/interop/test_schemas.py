"""The JSON Schemas shipped in privaudit/schemas accept what privaudit writes and reject malformed documents."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from privaudit.errors import InvalidParameterError
from privaudit.report.results import KINDS, evidence_pages
from privaudit.schemas import SCHEMAS, load_schema, validate
from tests.cli.test_fuzz import TINY, run_cli
from tests.interop.recorded import record_tiny_federation

pytest.importorskip("jsonschema")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, Path]:
    """Real files: a recorded and a privaudit-trained checkpoint, and the result of every command that writes one."""
    root = tmp_path_factory.mktemp("schemas")
    recorded = record_tiny_federation(root / "recorded")
    trained = root / "trained"
    assert run_cli("train", "--algorithm", "fedavg", *TINY, "--rounds", "2", "--out", trained)[0] == 0
    results = root / "results"
    commands = [
        ("compute-epsilon", "--checkpoint", recorded, "--delta", "1e-5", "--out", results / "ledger.json"),
        ("compute-epsilon", "--checkpoint", recorded, "--delta", "1e-5", "--curve", "--out", results / "curve.json"),
        ("attack", "membership", "--checkpoint", recorded, "--attack", "loss", "--out", results),
        ("attack", "inversion", "--checkpoint", recorded, "--client", "0", "--round", "1", "--attack", "analytic", "--quiet",
         "--out", results / "inv"),
    ]
    for command in commands:
        code, _, err = run_cli(*command)
        assert code == 0, (command, err)
    (root / "scores.json").write_text(json.dumps({"in": [1.0, 2.0, 3.0, 2.5] * 10, "out": [0.0, 1.0, 0.5, 1.5] * 10}))
    assert run_cli("audit", "--scores", root / "scores.json", "--out", root / "sa")[0] == 0
    assert run_cli("report", results, "--out", root / "report")[0] == 0
    return {"recorded": recorded, "trained": trained, "results": results, "root": root}


def _load(path: Path):
    return json.loads(path.read_text())


def test_real_outputs_validate(outputs):
    root, results = outputs["root"], outputs["results"]
    files = [outputs["recorded"] / "manifest.json", outputs["trained"] / "manifest.json", outputs["recorded"] / "training.json",
             outputs["trained"] / "training.json", results / "ledger.json", results / "curve.json",
             results / "membership-attack.json", results / "inv" / "inversion.json", root / "report" / "results.json"]
    kinds = set()
    for path in files:
        document = _load(path)
        validate(document)
        kinds.add(document.get("kind"))
    assert {"ledger", "epsilon-curve", "membership-attack", "inversion", "training"} <= kinds
    validate(_load(root / "sa" / "scores-audit.json"), "scores-audit")
    validate(_load(outputs["recorded"] / "manifest.json")["ledger"])


def test_committed_reports_validate():
    committed = [REPO / "reports" / "claims-audit" / "results.json", *sorted((REPO / "reports" / "evidence").glob("*.json"))]
    assert committed
    for path in committed:
        validate(_load(path))


def test_malformed_documents_fail(outputs):
    manifest = _load(outputs["recorded"] / "manifest.json")
    broken = copy.deepcopy(manifest)
    del broken["ledger"]
    with pytest.raises(InvalidParameterError, match="'ledger' is a required property"):
        validate(broken)
    broken = copy.deepcopy(manifest)
    broken["ledger"]["events"][0]["count"] = 0
    with pytest.raises(InvalidParameterError, match="ledger/events/0/count"):
        validate(broken)
    broken = copy.deepcopy(manifest)
    broken["tensors"]["../outside.safetensors"] = {"sha256": "0" * 64, "bytes": 1}
    with pytest.raises(InvalidParameterError, match="tensors"):
        validate(broken)
    ledger = _load(outputs["results"] / "ledger.json")
    del ledger["data"]["per_client"]
    with pytest.raises(InvalidParameterError, match="per_client"):
        validate(ledger)
    attack = _load(outputs["results"] / "membership-attack.json")
    attack["data"]["auc"] = 1.5
    with pytest.raises(InvalidParameterError, match="data/auc"):
        validate(attack)
    with pytest.raises(InvalidParameterError, match="declares no known schema"):
        validate({"schema": "something/else"})


def test_result_schema_matches_the_known_kinds():
    schema = load_schema("result")
    required = {rule["if"]["properties"]["kind"]["const"]: rule["then"]["properties"]["data"]["required"] for rule in schema["allOf"]}
    declared = {**KINDS, **{kind: page.data_keys for kind, page in evidence_pages().items()}}  # the papers' evidence kinds
    assert required == {kind: list(keys) for kind, keys in declared.items()}


def test_schemas_are_package_data():
    for name in SCHEMAS:
        schema = load_schema(name)
        assert schema["$schema"].endswith("2020-12/schema") and schema["$id"] == f"urn:privaudit:schema:{name}:1"
    config = (REPO / "pyproject.toml").read_text()  # tomllib is Python ≥ 3.11; the lines are checked as written
    package_data = config.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert '"privaudit.schemas" = ["*.schema.json"]' in package_data
    assert '"jsonschema>=' in next(line for line in config.splitlines() if line.startswith("dev = "))
