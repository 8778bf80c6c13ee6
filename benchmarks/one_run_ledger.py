"""Route ``one-run-fdp-ledger`` on simulated one-run audits: certified ε against the other one-run routes, and speed.

Each audit is one run of the declared mechanism — T steps of a Poisson-subsampled Gaussian (rate q, noise σ), m
canaries each in by a fair coin — seen white-box with optimal scores (the privacy loss of the T outputs,
:class:`privaudit.stats.ledger_scenarios.LedgerMechanism`). For R seeded audits it prints the mean ± sd of the
certified ε of: ``one-run-fdp-ledger`` (the run's own curve, mechanism = its LedgerFamily), ``one-run-fdp`` (the
Gaussian curve through (ε, δ); declared "gaussian", which is *false* for q < 1 — shown for comparison only, its
number is not a valid bound there), ``one-run-fdp-box`` and ``one-run`` (both declared "any"), with each route's
ceiling and the true ε (the ``ctd`` accountant's; exact for q = 1). Then the time of one bound (no ceiling) at
m = 10⁴ over 40 fresh draws of one mechanism, for the ledger route (curve cache cold at the first) and ``one-run-fdp``.

Usage: ``.venv/bin/python benchmarks/one_run_ledger.py [--runs 20] [--seed 0] [--out PATH]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from privaudit.stats.estimators import estimate
from privaudit.stats.ledger_family import member_curve, member_epsilon
from privaudit.stats.ledger_scenarios import LedgerMechanism
from privaudit.stats.routes import ROUTES
from privaudit.stats.scores import AuditScores
from privaudit.stats.validity_scenarios import Bernoulli, draw_scores

DELTA, ALPHA = 1e-5, 0.05
CONFIGS = (LedgerMechanism(10, 0.5, 1.0), LedgerMechanism(10, 1.0, 3.0))
SIZES = (1000, 10_000)


def _declarations(scenario: LedgerMechanism) -> dict[str, object]:
    return {"one-run-fdp-ledger": scenario.ledger, "one-run-fdp": "gaussian", "one-run-fdp-box": "any", "one-run": "any"}


def _table(runs: int, seed: int) -> list[str]:
    rows = ["| mechanism | m | true ε | route (declared) | certified ε, mean ± sd | min – max | ceiling | mean / true ε |",
            "|---|---|---|---|---|---|---|---|"]
    for scenario in CONFIGS:
        true_epsilon = scenario.true_epsilon(DELTA)
        for m in SIZES:
            draws = [draw_scores(scenario, Bernoulli(m), np.random.default_rng([seed, m, rep])) for rep in range(runs)]
            for name, declared in _declarations(scenario).items():
                results = [estimate(name, a, b, mechanism=declared, design="bernoulli", significance=ALPHA, delta=DELTA)
                           for a, b in draws]
                values = np.array([r.epsilon_lb for r in results])
                note = " (false for q < 1)" if name == "one-run-fdp" and scenario.sample_rate < 1 else ""
                rows.append(f"| {scenario.name} | {m} | {true_epsilon:.3f} | {name} ({declared}{note}) | "
                            f"{values.mean():.3f} ± {values.std(ddof=1):.3f} | {values.min():.3f} – {values.max():.3f} | "
                            f"{results[0].ceiling:.3f} | {values.mean() / true_epsilon:.3f} |")
    return rows


def _timings(seed: int, m: int = 10_000, audits: int = 40) -> list[str]:
    """Seconds per bound (no ceiling) over ``audits`` fresh draws of one mechanism, the ledger route's cache cold first."""
    scenario = CONFIGS[0]
    scores = [AuditScores.of(*draw_scores(scenario, Bernoulli(m), np.random.default_rng([seed, 99, rep])))
              for rep in range(audits)]
    strategy = ROUTES["one-run-fdp-ledger"].default_strategy
    bounds = {"one-run-fdp-ledger": ROUTES["one-run-fdp-ledger"].bound_for(scenario.ledger),
              "one-run-fdp (Gaussian curve)": ROUTES["one-run-fdp"].bound}
    member_curve.cache_clear()
    member_epsilon.cache_clear()
    rows = [f"Seconds per bound on {scenario.name}, m = {m}, default strategy, no ceiling; {audits} fresh draws in turn "
            "(the ledger route's curve cache starts cold and fills as the audits go):", "",
            "| route | audit 1 | audits 2–10, mean | audits 11–40, mean | audit 1 again (same scores) |", "|---|---|---|---|---|"]
    for name, bound in bounds.items():
        seconds = []
        for s in [*scores, scores[0]]:
            start = time.perf_counter()
            bound(s, ALPHA, DELTA, strategy, False)
            seconds.append(time.perf_counter() - start)
        rows.append(f"| {name} | {seconds[0]:.3f} | {np.mean(seconds[1:10]):.3f} | {np.mean(seconds[10:audits]):.3f} | "
                    f"{seconds[-1]:.3f} |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    timing = _timings(args.seed)  # first, so that the cold cache is cold
    command = "python benchmarks/one_run_ledger.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"Command: `{command}`", "", f"α = {ALPHA}, δ = {DELTA:g}, {args.runs} audits per row, seed {args.seed}.", "",
             *_table(args.runs, args.seed),
             "", *timing]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
