"""``privaudit audit --scores FILE``: bring your own attack scores; every route with its bound or its reason."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tests.audit.helpers import binomial_upper_tolerance
from tests.audit.helpers import one_line_audit_error as one_line_error
from tests.audit.helpers import run_audit as run


def randomized_response(epsilon: float, m: int, rng: np.random.Generator) -> dict[str, list[float]]:
    """One run of randomized response on m fair-coin canaries: the score is the reported bit."""
    member = rng.random(m) < 0.5
    keep = math.exp(epsilon) / (1.0 + math.exp(epsilon))
    return {"in": (rng.random(member.sum()) < keep).astype(float).tolist(),
            "out": (rng.random((~member).sum()) < 1.0 - keep).astype(float).tolist()}


def write_json(path, data):
    path.write_text(json.dumps(data))
    return path


def test_json_scores_list_every_route_with_bound_or_reason(capsys, tmp_path):
    rng = np.random.default_rng(0)
    path = write_json(tmp_path / "s.json", {"in": rng.normal(2.0, 1.0, 300).tolist(), "out": rng.normal(0, 1, 300).tolist()})
    code, out, err = run(capsys, "--scores", str(path), "--design", "trials", "--claimed-epsilon", "0.1",
                         "--power-trials", "10", "--json")
    assert code == 0, err
    data = json.loads(out)
    routes = {r["route"]: r for r in data["routes"]}
    assert set(routes) == {"cp", "gdp", "one-run", "one-run-fdp", "one-run-fdp-box", "one-run-paired", "one-run-fdp-ledger"}
    assert not routes["one-run-fdp-ledger"]["run"] and "ledger" in routes["one-run-fdp-ledger"]["reason"]
    assert routes["cp"]["run"] and routes["cp"]["epsilon_lb"] > 0.1
    assert not routes["gdp"]["run"] and "Gaussian-shaped" in routes["gdp"]["reason"] and routes["gdp"]["epsilon_lb"] is None
    assert not routes["one-run"]["run"] and "probability ½" in routes["one-run"]["reason"]
    assert data["verdict"]["verdict"] == "refuted" and data["mechanism"] == "any" and data["design"] == "trials"


def test_npz_scores_and_a_written_result(capsys, tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "s.npz"
    np.savez(path, **{"in": rng.normal(1.0, 1.0, 200), "out": rng.normal(0.0, 1.0, 200)})
    code, out, err = run(capsys, "--scores", str(path), "--mechanism", "gaussian", "--design", "trials",
                         "--out", str(tmp_path / "res"))
    assert code == 0, err
    written = json.loads((tmp_path / "res" / "scores-audit.json").read_text())
    assert {r["route"] for r in written["routes"] if r["run"]} == {"cp", "gdp", "one-run-paired"}
    assert "best:" in out and "not run: one-run" in out


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ('{"in": [1, 2]}', "lacks the score list(s) 'out'"),
        ('[1, 2, 3]', "must hold a JSON object"),
        ('{"in": [1, "x"], "out": [0]}', "sequence of numbers"),
        ('{"in": [1, NaN], "out": [0]}', "non-finite"),
        ('{"in": [1, 2], "out": []}', "empty"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_score_files_are_one_line(capsys, tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    one_line_error(capsys, "--scores", str(path), match=match)


def test_bad_score_inputs_are_one_line(capsys, tmp_path):
    good = write_json(tmp_path / "s.json", {"in": [1.0, 2.0, 3.0], "out": [0.0, 1.0]})
    (tmp_path / "latin1.json").write_bytes(b'{"in": [1], "out": [0], "x": "\xe9"}')
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    one_line_error(capsys, "--scores", str(tmp_path / "missing.json"), match="does not exist")
    one_line_error(capsys, "--scores", str(tmp_path / "latin1.json"), match="not UTF-8")
    one_line_error(capsys, "--scores", str(tmp_path / "bad.npz"), match="not a readable .npz")
    one_line_error(capsys, "--scores", str(good), "--mechanism", "laplace", match="unknown mechanism family")
    one_line_error(capsys, "--scores", str(good), "--design", "poisson", match="unknown design")
    one_line_error(capsys, "--scores", str(good), "--trials", "3", match="does not apply to --scores")
    one_line_error(capsys, "--scores", str(good), "--out", str(good), match="is a file")
    one_line_error(capsys, "--claim", "upcycled-thm6.2-fig3", "--mechanism", "gaussian", match="apply to --scores audits only")


def test_randomized_response_with_any_mechanism_never_overclaims(capsys, tmp_path):
    """RR at ε = 1 through the CLI defaults (mechanism any, design fixed) and bernoulli: ε_lb > 1 at most α of the time."""
    rng = np.random.default_rng(5)
    repetitions, alpha, over = 40, 0.1, 0
    for rep in range(repetitions):
        path = write_json(tmp_path / f"rr{rep}.json", randomized_response(1.0, 2000, rng))
        design = "fixed" if rep % 2 else "bernoulli"
        code, out, err = run(capsys, "--scores", str(path), "--design", design, "--delta", "0", "--alpha", str(alpha), "--json")
        assert code == 0, err
        over += json.loads(out)["best"]["epsilon_lb"] > 1.0
    assert over / repetitions <= binomial_upper_tolerance(alpha, repetitions)


def test_optimal_attack_is_a_declaration_that_only_a_gaussian_audit_with_power_can_use(capsys, tmp_path):
    """Issue 24: an attack's silence supports a claim only when the user declares the attack optimal for a declared
    Gaussian mechanism and an optimal attack at 2× the claim would be refuted with probability ≥ 0.8 at these sizes."""
    rng = np.random.default_rng(3)
    path = write_json(tmp_path / "s.json", {"in": rng.normal(1.0, 1.0, 2000).tolist(), "out": rng.normal(0, 1, 2000).tolist()})
    common = ("--scores", str(path), "--mechanism", "gaussian", "--design", "trials", "--claimed-epsilon", "6",
              "--power-trials", "40", "--json", "--out", str(tmp_path / "res"))
    code, out, err = run(capsys, *common)
    assert code == 0, err
    silent = json.loads(out)
    assert silent["attack_optimal"] is False and silent["verdict"]["verdict"] == "inconclusive"
    assert "not declared optimal" in silent["verdict"]["reason"]
    code, out, err = run(capsys, *common, "--optimal-attack")
    assert code == 0, err
    declared = json.loads(out)
    assert declared["attack_optimal"] is True and declared["verdict"]["verdict"] == "consistent"
    assert "declared optimal for a Gaussian mechanism" in declared["verdict"]["reason"]
    gdp = next(r["result"] for r in declared["routes"] if r["route"] == "gdp")
    assert gdp["attack_optimal"] and gdp["power"]["lower"] >= 0.8 and gdp["power"]["alternative_epsilon"] == 12
    paired = next(r["result"] for r in declared["routes"] if r["route"] == "one-run-paired")
    assert paired["power"] is None and "differences" in paired["no_power_reason"]
    pytest.importorskip("jsonschema")
    from privaudit.schemas import validate

    validate(json.loads((tmp_path / "res" / "scores-audit.json").read_text()), "scores-audit")


def test_optimal_attack_on_an_undeclared_family_earns_nothing(capsys, tmp_path):
    rng = np.random.default_rng(4)
    path = write_json(tmp_path / "s.json", {"in": rng.normal(1.0, 1.0, 2000).tolist(), "out": rng.normal(0, 1, 2000).tolist()})
    code, out, err = run(capsys, "--scores", str(path), "--design", "trials", "--claimed-epsilon", "6", "--optimal-attack",
                         "--power-trials", "20", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["verdict"]["verdict"] == "inconclusive" and "no attack-based power for mechanism family 'any'" in data[
        "verdict"]["reason"]


@pytest.mark.parametrize(("args", "match"), [
    (("--optimal-attack",), "--claimed-epsilon"),
    (("--optimal-attack", "--claimed-epsilon", "1", "--claim", "upcycled-thm6.2-fig3"), "exactly one of"),
])
def test_optimal_attack_needs_a_claim_and_scores(capsys, tmp_path, args, match):
    path = write_json(tmp_path / "s.json", {"in": [1.0, 2.0, 3.0], "out": [0.0, 1.0, 2.0]})
    one_line_error(capsys, "--scores", str(path), *args, match=match)
