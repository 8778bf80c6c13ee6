"""Shared helpers of the audit tests: deterministic samples and the Monte-Carlo tolerance."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def deterministic_normal(mu: float, n: int) -> np.ndarray:
    """n scores at the mid-point quantiles of N(mu, 1): counts at any threshold are within 1 of expected."""
    return stats.norm.ppf((np.arange(n) + 0.5) / n) + mu


def binomial_upper_tolerance(alpha: float, repetitions: int) -> float:
    """α + 3·√(α(1 − α)/R): the largest false-positive rate a valid level-α procedure plausibly shows in R runs."""
    return alpha + 3.0 * math.sqrt(alpha * (1.0 - alpha) / repetitions)


def checkpoint_without_recipe(checkpoint, tmp_path):
    """A copy of ``checkpoint`` whose manifest lacks ``train_spec`` (its hash recomputed): audits that re-train refuse it."""
    import json
    import shutil

    from privaudit.fl.engine.checkpoint import MANIFEST, manifest_digest

    copy = tmp_path / "custom"
    shutil.copytree(checkpoint, copy)
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest.pop("train_spec")
    manifest["manifest_sha256"] = manifest_digest(manifest)
    (copy / MANIFEST).write_text(json.dumps(manifest))
    return copy


def run_audit(capsys, *args):
    """``privaudit audit ARGS`` through the CLI: (exit code, stdout, stderr)."""
    from privaudit.cli.app import main

    code = main(["audit", *args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_audit_error(capsys, *args, match):
    """``privaudit audit ARGS`` fails with one ``error:`` line containing ``match`` and exit code 2."""
    code, _, err = run_audit(capsys, *args)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert match in lines[0], lines[0]


def family(name: str) -> str:
    """The mechanism family under which route ``name`` may run on these tests' Gaussian-shift scores."""
    return "gaussian" if name in ("gdp", "one-run-fdp") else "any"
