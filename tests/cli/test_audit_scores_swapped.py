"""``audit --scores``: a one-line warning when "in" and "out" look swapped, and the README's randomized-response example.

The swapped check runs the same routes on (out, in) without power; it is a diagnostic that never changes the verdict
or α of the audit of the scores as given.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

from privaudit.audit import ClaimPower
from privaudit.audit.scores_audit import audit_score_file
from privaudit.audit.verdict import decide
from privaudit.stats.assumptions import Design, MechanismFamily
from privaudit.stats.estimators import audit_scores
from privaudit.stats.scores import AuditScores
from tests.audit.helpers import run_audit as run

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "make_rr_scores.py"


def _generator():
    spec = importlib.util.spec_from_file_location("make_rr_scores", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rr_file(tmp_path: Path, swapped: bool = False, name: str = "rr.json") -> Path:
    scores = _generator().randomized_response_scores(1.0, 4000, 0)
    if swapped:
        scores = {"in": scores["out"], "out": scores["in"]}
    path = tmp_path / name
    path.write_text(json.dumps(scores))
    return path


def test_swapped_scores_get_one_warning_line_and_keep_their_verdict(capsys, tmp_path):
    path = _rr_file(tmp_path, swapped=True)
    code, out, err = run(capsys, "--scores", str(path), "--design", "bernoulli", "--delta", "0",
                         "--claimed-epsilon", "0.5")
    assert code == 0, err
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, out
    assert "the out-scores are higher than the in-scores: were 'in' and 'out' swapped? reversed, one-run would give" \
        " ε ≥ 0.88" in warnings[0]
    assert "verdict on ε = 0.5: refuted" not in out  # the reversed direction is a diagnostic, never evidence

    code, out, err = run(capsys, "--scores", str(path), "--design", "bernoulli", "--delta", "0",
                         "--claimed-epsilon", "0.5", "--json")
    assert code == 0
    data = json.loads(out)
    assert err.strip().startswith("warning: the out-scores are higher") and len(err.strip().splitlines()) == 1
    warning = data["swap_warning"]
    assert warning["route"] == "one-run" and warning["reversed_epsilon_lb"] > 0.8 and warning["diagnostic_only"]
    assert data["best"]["epsilon_lb"] == 0.0 and data["alpha"] == 0.05
    assert all(r["result"]["significance"] == 0.05 / 3 for r in data["routes"] if r["run"])
    assert data["verdict"]["verdict"] != "refuted"


def test_the_reversed_run_changes_neither_verdict_nor_bounds():
    scores = AuditScores.of(np.r_[np.zeros(700), np.ones(300)], np.r_[np.zeros(300), np.ones(700)])
    options = dict(mechanism=MechanismFamily.ANY, design=Design.BERNOULLI, delta=0.0, significance=0.05)
    result = audit_score_file(scores, source="x", claim=ClaimPower(claimed_epsilon=0.2, trials=10, seed=0), **options)
    assert result["swap_warning"] is not None and result["swap_warning"]["reversed_epsilon_lb"] > 0.2
    outcomes = audit_scores(scores.in_scores, scores.out_scores, mechanism="any", design="bernoulli", significance=0.05, delta=0.0, claim=ClaimPower(claimed_epsilon=0.2, trials=10))
    bounds = [o.bound for o in outcomes if o.bound is not None]
    assert [r["epsilon_lb"] for r in result["routes"]] == [o.to_dict()["epsilon_lb"] for o in outcomes]
    assert result["verdict"] == decide(0.2, 0.0, bounds).to_dict()


def test_no_warning_when_the_scores_are_the_right_way_round_or_carry_no_signal(capsys, tmp_path):
    code, out, err = run(capsys, "--scores", str(_rr_file(tmp_path)), "--design", "bernoulli", "--delta", "0", "--json")
    assert code == 0, err
    assert json.loads(out)["swap_warning"] is None and "warning" not in err
    constant = tmp_path / "constant.json"
    constant.write_text(json.dumps({"in": [0.5] * 300, "out": [0.5] * 200}))
    code, out, err = run(capsys, "--scores", str(constant))
    assert code == 0, err
    assert "warning:" not in out


def test_the_generator_writes_randomized_response_reproducibly(tmp_path):
    args = ["--epsilon", "1", "--canaries", "4000", "--seed", "0"]
    runs = [subprocess.run([sys.executable, str(EXAMPLE), *args, "--out", str(tmp_path / f"rr{i}.json")],
                           capture_output=True, text=True, timeout=600) for i in (0, 1)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr
    first, second = ((tmp_path / f"rr{i}.json").read_text() for i in (0, 1))
    assert first == second
    data = json.loads(first)
    assert len(data["in"]) + len(data["out"]) == 4000 and set(data["in"]) | set(data["out"]) == {0, 1}
    truthful = (sum(data["in"]) + len(data["out"]) - sum(data["out"])) / 4000  # e/(1+e) ≈ 0.731
    assert abs(truthful - np.e / (1 + np.e)) < 0.03
    bad = subprocess.run([sys.executable, str(EXAMPLE), "--epsilon", "nan", "--out", str(tmp_path / "x.json")],
                         capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "--epsilon must be" in bad.stderr.strip().splitlines()[-1]


def test_the_readme_example_bounds_are_what_the_commands_print(capsys, tmp_path):
    """The ε lower bounds in README "Bring your own scores" are the output of its two commands."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("$ python examples/make_rr_scores.py"):]
    block = block[:block.index("```")]
    printed = dict(re.findall(r"│ (one-run\S*|cp|gdp)\s*│ ([0-9.]+)\s*│", block))
    assert set(printed) == {"one-run", "one-run-fdp-box", "one-run-paired"}, block
    done = subprocess.run([sys.executable, str(EXAMPLE), "--epsilon", "1", "--canaries", "4000", "--seed", "0",
                           "--out", str(tmp_path / "rr.json")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    code, out, err = run(capsys, "--scores", str(tmp_path / "rr.json"), "--design", "bernoulli", "--delta", "0",
                         "--claimed-epsilon", "0.5", "--json")
    assert code == 0, err
    bounds = {r["route"]: r["epsilon_lb"] for r in json.loads(out)["routes"] if r["run"]}
    assert {route: f"{bounds[route]:.4g}" for route in printed} == printed
