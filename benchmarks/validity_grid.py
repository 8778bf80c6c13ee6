"""The validity suite's full grid (``make validity``): coverage of every route, a tightness table, and the verdict gate.

For every route × strategy × scenario × design (parts in :mod:`privaudit.stats.validity`) it runs R seeded
audits and reports the over-claim rate P[ε_lb > ε_true] with its 95% Clopper–Pearson interval against α;
then the tightness of each route on the Gaussian mechanism (mean ε_lb/ε_true at n = 10⁴); then the verdict's own
property, P[consistent | true ε ≥ 2 × claimed ε] ≤ 1 − min_power, on the cells of
:func:`privaudit.audit.verdict_validity.consistency_grid` (``--consistency-runs`` audits each). Writes
``reports/validity.md`` (``--json PATH`` also writes every cell's raw numbers) with the exact command, the
machine, the seeds and the wall time. Numbers are only ever what this run measured.

Flagged cells (coverage above α at R, not significantly) are re-run on fresh draws with ``--confirm-runs`` audits.

Usage: ``.venv/bin/python benchmarks/validity_grid.py [--runs 200] [--confirm-runs 1000] [--tight-runs 10] [--tight-n 10000]
[--consistency-runs 200] [--seed 0] [--workers 2] [--alpha 0.05] [--routes cp,gdp] [--out reports/validity.md] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import numpy as np
import scipy
from rich.console import Console

from privaudit.audit.verdict_validity import ConsistencyResult, consistency_grid, evaluate_consistency
from privaudit.progress import progress_bars
from privaudit.stats.validity import (
    NULL_SHAPES,
    Bernoulli,
    Cell,
    CoverageResult,
    Fixed,
    GaussianMechanism,
    LaplaceMechanism,
    LedgerMechanism,
    NullScores,
    RandomizedResponse,
    RouteInfo,
    SubsampledGaussian,
    Tightness,
    Trials,
    available_routes,
    evaluate_cell,
    measure_tightness,
    strategy_names,
)

SCENARIOS = (
    *(NullScores(shape) for shape in NULL_SHAPES),
    GaussianMechanism(1.0),
    LaplaceMechanism(2.0),
    RandomizedResponse(2.0),
)
DESIGNS = (
    Trials(500, 500),
    Trials(900, 100),
    Trials(100, 900),
    Fixed(500, 500),
    Fixed(900, 100),
    Fixed(100, 900),
    Bernoulli(1000),
)
#: The pure block (δ = 0): scenarios whose ε at δ = 0 is finite, the routes' default strategies.
PURE_SCENARIOS = (NullScores("continuous"), LaplaceMechanism(2.0), RandomizedResponse(2.0))
PURE_DESIGNS = (Trials(500, 500), Fixed(500, 500), Bernoulli(1000))
#: The declared-ledger block (one run, guess routes): T-fold (subsampled) Gaussians scored by their privacy loss — the
#: exact mechanism at its claim, whose true claims include its own curve family (route one-run-fdp-ledger).
LEDGER_SCENARIOS = (LedgerMechanism(10, 0.5, 1.0), LedgerMechanism(10, 0.5, 3.0), LedgerMechanism(1, 0.5, 0.5),
                    LedgerMechanism(10, 1.0, 8.0), SubsampledGaussian(2.0, 0.5))
LEDGER_DESIGNS = (Bernoulli(1000), Bernoulli(10_000))
AUDIT_DELTA = 1e-5
TIGHTNESS_MUS = (0.5, 1.0, 2.0)
HEADLINE_MU = 1.0


def grid(routes: tuple[RouteInfo, ...], alpha: float) -> list[Cell]:
    cells = [
        Cell(route.name, strategy, scenario, design, AUDIT_DELTA, alpha)
        for scenario in SCENARIOS
        for design in DESIGNS
        for route in routes
        for strategy in strategy_names(route.kind)
    ]
    cells += [
        Cell(route.name, "default", scenario, design, 0.0, alpha)
        for scenario in PURE_SCENARIOS
        for design in PURE_DESIGNS
        for route in routes
    ]
    cells += [
        Cell(route.name, strategy, scenario, design, AUDIT_DELTA, alpha)
        for scenario in LEDGER_SCENARIOS
        for design in LEDGER_DESIGNS
        for route in routes
        if route.kind == "guess"
        for strategy in (strategy_names(route.kind) if design.m <= 1000 else ("default",))
    ]
    return cells


def _run_cell(cell: Cell, runs: int, seed: int) -> CoverageResult:
    return evaluate_cell(cell, runs, seed)


def _run_consistency(cell, runs: int, seed: int) -> ConsistencyResult:
    return evaluate_consistency(cell, runs, seed)


def _run_tightness(route: RouteInfo, strategy: str, mu: float, n: int, runs: int, alpha: float, seed: int) -> Tightness:
    return measure_tightness(route, strategy, mu=mu, delta=AUDIT_DELTA, n=n, runs=runs, significance=alpha, base_seed=seed)


def _fmt(value: float, digits: int = 3) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞"
    return f"{value:.{digits}g}"


def _claim(result: CoverageResult) -> str:
    if result.claim is None:
        return "— (ungated)"
    refused = ", ".join(f"{c} refused" for c, _ in result.refusals)
    return f"`{result.claim}`" + (f" ({refused})" if refused else "")


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} logical CPUs; Python "
            f"{platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}")


def _commit() -> str:
    """The commit of the privaudit package under test (which may be another checkout than this script's)."""
    import privaudit

    root = Path(privaudit.__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + (" with uncommitted changes" if dirty else "")


def _summary_rows(results: list[CoverageResult], tightness: list[Tightness], routes, alpha: float,
                  confirmed: dict[str, CoverageResult], tight_n: int) -> list[str]:
    by_route: dict[str, list[CoverageResult]] = defaultdict(list)
    for result in results:
        by_route[result.cell.route].append(result)
    headline = {t.route: t for t in tightness if t.strategy == "default" and t.mu == HEADLINE_MU}
    rows = ["| route | families · designs declared | cells run | not run | never run on | worst coverage (cell) | 95% CI | "
            f"vs α | fail / flag | tightness ε_lb/ε_true (Gaussian μ={HEADLINE_MU:g}, n={tight_n}, default) |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for route in routes:
        ran = [r for r in by_route[route.name] if r.status != "not run"]
        skipped = len(by_route[route.name]) - len(ran)
        declared = ("—" if route.families is None else ", ".join(route.families)) + " · " + (
            "—" if route.designs is None else ", ".join(route.designs))
        never = _never_run(by_route[route.name])
        if not ran:
            rows.append(f"| {route.name} | {declared} | 0 | {skipped} | {never} | — | — | — | — | — |")
            continue
        worst = max(ran, key=lambda r: (r.coverage, r.interval[0]))
        fails = sum(r.status == "fail" for r in ran)
        flags = sum(r.status == "flag" for r in ran)
        where = f"{worst.cell.strategy}, {worst.cell.scenario.name}, {worst.cell.design.label}, δ={worst.cell.delta:g}"
        verdict = "**INVALID**" if fails else ("≤ α" if worst.coverage <= alpha else "above α (not significant)")
        again = confirmed.get(worst.cell.key)
        if not fails and again is not None:
            verdict += (f"; re-run (R={again.runs}, seed {'+'}1): {again.coverage:.3f} "
                        f"[{again.interval[0]:.3f}, {again.interval[1]:.3f}], {again.status}")
        tight = headline.get(route.name)
        tight_text = "not run" if tight is None or tight.runs == 0 else f"{tight.mean_fraction:.3f} ± {tight.sd_fraction:.3f}"
        if fails and tight is not None and tight.runs:
            tight_text += " (route not valid)"
        rows.append(f"| {route.name} | {declared} | {len(ran)} | {skipped} | {never} | {worst.coverage:.3f} ({where}) | "
                    f"[{worst.interval[0]:.3f}, {worst.interval[1]:.3f}] | {verdict} | {fails} / {flags} | {tight_text} |")
    return rows


def _never_run(results: list[CoverageResult]) -> str:
    """The scenarios and splits on which a route never ran (refused, or took none of the strategies), or "—"."""
    def never(key) -> list[str]:
        seen: dict[str, bool] = {}
        for r in results:
            seen[key(r)] = seen.get(key(r), False) or r.status != "not run"
        return [name for name, ran in seen.items() if not ran]

    parts = never(lambda r: r.cell.scenario.name) + never(lambda r: r.cell.design.label)
    return ", ".join(parts) if parts else "—"


def _coverage_rows(results: list[CoverageResult]) -> list[str]:
    rows = ["| route | strategy | scenario | split | δ | claim | ε_true | runs | coverage | 95% CI | mean ε_lb | max ε_lb | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        if r.status == "not run":
            continue
        c = r.cell
        verdict = {"fail": "**FAIL**", "flag": "flag", "pass": "pass"}[r.status]
        rows.append(f"| {c.route} | {c.strategy} | {c.scenario.name} | {c.design.label} | {c.delta:g} | {_claim(r)} | "
                    f"{_fmt(r.true_epsilon)} | {r.runs} | {r.coverage:.3f} | [{r.interval[0]:.3f}, {r.interval[1]:.3f}] | "
                    f"{_fmt(r.mean_lb)} | {_fmt(r.max_lb)} | {verdict} |")
    return rows


def _not_run_rows(results: list[CoverageResult]) -> list[str]:
    """One row per route × split × reason, naming the scenarios and strategies it covers ("all" when it covers all)."""
    groups: dict[tuple[str, str, str], tuple[dict[str, None], dict[str, None]]] = {}
    all_scenarios = {r.cell.scenario.name for r in results}
    for r in results:
        if r.status != "not run":
            continue
        c = r.cell
        scenarios, strategies = groups.setdefault((c.route, f"{c.design.label}, δ={c.delta:g}", r.reason), ({}, {}))
        scenarios[c.scenario.name] = None
        strategies[c.strategy] = None
    rows = ["| route | split, δ | scenarios | strategies | reason |", "|---|---|---|---|---|"]
    for (route, design, reason), (scenarios, strategies) in groups.items():
        named = "all" if set(scenarios) == all_scenarios else ", ".join(scenarios)
        rows.append(f"| {route} | {design} | {named} | {', '.join(strategies)} | {reason.replace('|', '/')} |")
    return rows


def _tightness_rows(tightness: list[Tightness], invalid: dict[str, list[CoverageResult]]) -> list[str]:
    rows = ["| route | strategy | μ | ε_true (δ=1e-5) | design, n | claim | runs | mean ε_lb/ε_true | sd | "
            "route valid in the grid? |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for t in tightness:
        if t.runs == 0:
            rows.append(f"| {t.route} | {t.strategy} | {t.mu:g} | {t.true_epsilon:.3f} | {t.design}, {t.n} | — | 0 | not run: "
                        f"{t.reason.replace('|', '/')} | — | — |")
            continue
        failing = invalid.get(t.route, [])
        valid = "yes" if not failing else (
            f"no: {len(failing)} failing cells ({', '.join(sorted({r.cell.scenario.family for r in failing}))} scores)")
        rows.append(f"| {t.route} | {t.strategy} | {t.mu:g} | {t.true_epsilon:.3f} | {t.design}, {t.n} | "
                    f"{t.claim or '—'} | {t.runs} | {t.mean_fraction:.3f} | {t.sd_fraction:.3f} | {valid} |")
    return rows


def _confirmation_rows(results: list[CoverageResult], confirmed: dict[str, CoverageResult]) -> list[str]:
    rows = ["| route | strategy | scenario | split | δ | first run: coverage (R) | re-run: coverage (R) | re-run 95% CI | "
            "re-run verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        again = confirmed.get(r.cell.key)
        if again is None:
            continue
        c = r.cell
        rows.append(f"| {c.route} | {c.strategy} | {c.scenario.name} | {c.design.label} | {c.delta:g} | "
                    f"{r.coverage:.3f} ({r.runs}) | {again.coverage:.3f} ({again.runs}) | "
                    f"[{again.interval[0]:.3f}, {again.interval[1]:.3f}] | {again.status} |")
    return rows


def _consistency_rows(results: list[ConsistencyResult]) -> list[str]:
    rows = ["| kind | scenario | attack | split | declared family | attack declared optimal | true ε | claimed ε | runs | "
            "consistent | P[consistent] [95% CI] | refuted | power of an optimal attack at 2× (MC lower limit) | "
            "gate p-value | verdict |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c = r.cell
        verdict = {"fail": "**FAIL**", "flag": "flag", "pass": "pass", "report": "reported"}[r.status]
        power = "none (family or route has no attack-based power)" if r.power_lower is None else f"≥ {r.power_lower:.3f}"
        p_value = "—" if r.status == "report" else f"{r.p_value:.3g}"
        rows.append(f"| {c.kind} | {c.scenario.name} | {c.attack.name} | {c.design.label} | {c.mechanism} | "
                    f"{'yes' if c.attack_optimal else 'no'} | {_fmt(r.true_epsilon)} | {_fmt(r.claimed_epsilon)} | {r.runs} | "
                    f"{r.consistent} | {r.rate:.3f} [{r.interval[0]:.3f}, {r.interval[1]:.3f}] | {r.refuted} | {power} | "
                    f"{p_value} | {verdict} |")
    return rows


def _consistency_section(results: list[ConsistencyResult], runs: int) -> list[str]:
    if not results:
        return ["Not run (--consistency-runs 0)."]
    gates = [r for r in results if r.status != "report"]
    worst = max(gates, key=lambda r: r.rate)
    fails = sum(r.status == "fail" for r in gates)
    return [
        "Each cell runs the pipeline a user gets — every route valid for the declared family and design at its share of "
        "α = 0.05 (`audit_scores`, as `privaudit audit --scores` does), the power of an optimal attack on a Gaussian "
        "mechanism at 2× the claim, then `decide` with min_power = 0.8 — on fresh seeded draws, and counts the verdicts. "
        "*gate* cells have true ε = 2 × claimed ε (3 × for issue 24's case, μ = 0.2996, 300 per side) and only true "
        "declarations; their verdict is a one-sided binomial test of P[consistent] ≤ 0.2 at level 1e-3 (**FAIL** when "
        "it rejects, *flag* when the rate is above 0.2 but not significantly). *earnable* cells have a true claim "
        "(claim = true ε) and an optimal attack declared so; *false-declaration* cells declare a weak or signal-free "
        "attack optimal at true ε = 2 × claim. Both are reported, not gated. Attacks are post-processings of the "
        "mechanism's output: weak = + N(0, 1) noise, saturating = min(score, 1), discrete = rounded to integers, "
        "zero-signal = N(0, 1) independent of membership. δ = 1e-5.",
        "",
        f"{len(gates)} gate cells, {runs} audits each: {fails} fail; the largest P[consistent] is {worst.rate:.3f} "
        f"({worst.cell.key}).",
        "",
        *_consistency_rows(results),
    ]


def write_report(path: Path, results, tightness, routes, args, seconds: float, cpu_seconds: float, command: str,
                 confirmed: dict[str, CoverageResult], consistency: list[ConsistencyResult] | None = None) -> None:
    invalid: dict[str, list[CoverageResult]] = defaultdict(list)
    for result in results:
        if result.status == "fail":
            invalid[result.cell.route].append(result)
    ran = [r for r in results if r.status != "not run"]
    lines = [
        "# Validity suite: P[ε_lb > ε_true] ≤ α for every route, strategy, score shape and design",
        "",
        "and the verdict's own property, P[consistent | true ε ≥ 2 × claimed ε] ≤ 1 − min_power = 0.2, for optimal, weak, "
        "saturating, discrete and zero-signal attacks (the last section).",
        "",
        f"Command: `{command}` (what `make validity` runs). Commit {_commit()}; "
        f"{dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}; machine: {_machine()}; "
        f"{args.workers} worker process(es); wall time {seconds / 60:.1f} min, CPU time of the workers "
        f"{cpu_seconds / 60:.1f} min (the wall time on an otherwise idle machine is about CPU time ÷ workers).",
        "",
        f"α = {args.alpha}; R = {args.runs} audits per cell; audited δ = {AUDIT_DELTA:g} (plus a δ = 0 block for the pure "
        f"mechanisms); base seed {args.seed}: repetition r of a scenario × design draws its scores from "
        f"`SeedSequence([{args.seed}, crc32(scenario), crc32(split), r])`, the same draws for every route and strategy. "
        "Routes gated by mechanism claim and design: yes.",
        "",
        "Coverage = fraction of the R audits with ε_lb > ε_true, with its two-sided 95% Clopper–Pearson interval. "
        "Verdict: **FAIL** when the whole interval lies above α (significantly invalid), *flag* when the point "
        "estimate is above α but the interval reaches it, *pass* otherwise. The claim is the most general true "
        "mechanism claim (`any` ⊃ `gaussian`, `pure`) the route accepts for the scenario; the refusals before it "
        "are listed. Scenarios: identical in/out scores (null; continuous N(0,1), heavy-tailed Cauchy, discrete "
        "uniform on 0..3, constant 0; ε_true = 0), the Gaussian mechanism N(1,1) vs N(0,1) (exact ε(δ), Dong, Roth & "
        "Su 2022), Laplace Lap(1, ½) vs Lap(0, ½) (pure ε₀ = 2, ε(δ) = ε₀ + 2 ln(1 − δ)) and randomized response "
        "with ε₀ = 2 (ε(δ) = ln(e^ε₀ − δ(1 + e^ε₀))). Splits: `trials a/b` = a in-scores and b out-scores from "
        "independent runs; `fixed a/b` = one run, exactly a of a + b canaries in; `bernoulli(½)` = one run, each "
        "canary in with probability ½.",
        "",
        "## Summary by route",
        "",
        *_summary_rows(results, tightness, routes, args.alpha, confirmed, args.tight_n),
        "",
        f"{len(ran)} cells run, {len(results) - len(ran)} not run (listed below with their reasons); "
        f"{sum(r.status == 'fail' for r in ran)} fail, {sum(r.status == 'flag' for r in ran)} flagged.",
        "",
        f"## Tightness on the Gaussian mechanism (δ = {AUDIT_DELTA:g}, n = {args.tight_n} per side for trials, "
        f"m = {args.tight_n} canaries for one-run designs, {args.tight_runs} audits each)",
        "",
        *_tightness_rows(tightness, invalid),
        "",
        f"## Flagged cells re-run ({args.confirm_runs} audits, base seed {args.seed + 1}: fresh draws)",
        "",
        *(_confirmation_rows(results, confirmed) if confirmed else ["None were flagged." if args.confirm_runs
                                                                    else "Re-runs disabled (--confirm-runs 0)."]),
        "",
        "## Every cell run",
        "",
        *_coverage_rows(results),
        "",
        "## Not run (the route refused, or does not take the strategy or δ)",
        "",
        *_not_run_rows(results),
        "",
        "## \"Consistent\" is earned against the claim: P[consistent | true ε ≥ 2 × claimed ε] ≤ 0.2",
        "",
        *_consistency_section(consistency or [], args.consistency_runs),
        "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))


def _to_json(results, tightness, consistency=()) -> dict:
    return {
        "consistency": [
            {"kind": r.cell.kind, "cell": r.cell.key, "runs": r.runs, "consistent": r.consistent, "refuted": r.refuted,
             "inconclusive": r.inconclusive, "rate": r.rate, "interval": list(r.interval), "p_value": r.p_value,
             "status": r.status, "true_epsilon": r.true_epsilon, "claimed_epsilon": r.claimed_epsilon,
             "power_lower": r.power_lower, "example_reason": r.example_reason, "seconds": r.seconds}
            for r in consistency
        ],
        "cells": [
            {"route": r.cell.route, "strategy": r.cell.strategy, "scenario": r.cell.scenario.name, "split": r.cell.design.label,
             "delta": r.cell.delta, "alpha": r.cell.significance, "status": r.status,
             "claim": None if r.claim is None else str(r.claim), "runs": r.runs,
             "exceed": r.exceed, "coverage": r.coverage, "interval": list(r.interval), "true_epsilon": r.true_epsilon,
             "mean_lb": r.mean_lb, "max_lb": r.max_lb, "reason": r.reason, "refusals": [[str(c), why] for c, why in r.refusals],
             "seconds": r.seconds}
            for r in results
        ],
        "tightness": [dict(t.__dict__, claim=None if t.claim is None else str(t.claim)) for t in tightness],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="audits per coverage cell (R)")
    parser.add_argument("--confirm-runs", type=int, default=1000,
                        help="re-run each flagged cell with this many audits on fresh draws (0: off)")
    parser.add_argument("--tight-runs", type=int, default=10, help="audits per tightness row")
    parser.add_argument("--tight-n", type=int, default=10_000, help="scores per side (trials) / canaries (one run)")
    parser.add_argument("--consistency-runs", type=int, default=200,
                        help="audits per cell of the verdict gate P[consistent | true ε ≥ 2 × claim] ≤ 0.2 (0: off)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--routes", default="", help="comma-separated route names (default: all)")
    parser.add_argument("--out", type=Path, default=Path("reports/validity.md"))
    parser.add_argument("--json", type=Path, default=None, help="also write every cell's raw numbers here")
    args = parser.parse_args(argv)
    command = "python benchmarks/validity_grid.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))

    routes = available_routes()
    if args.routes:
        wanted = set(args.routes.split(","))
        routes = tuple(r for r in routes if r.name in wanted)
    cells = grid(routes, args.alpha)
    tight_jobs = [(route, "default", mu) for route in routes for mu in TIGHTNESS_MUS]
    tight_jobs += [(route, s, HEADLINE_MU) for route in routes for s in strategy_names(route.kind) if s != "default"]
    consistency_cells = consistency_grid() if args.consistency_runs > 0 else []

    console = Console(stderr=True)
    start = time.perf_counter()
    with progress_bars(console=console) as progress, ProcessPoolExecutor(max_workers=args.workers) as pool:
        coverage_bar = progress.add("coverage cells", total=len(cells))
        tight_bar = progress.add("tightness rows", total=len(tight_jobs))
        consistency_bar = progress.add("verdict gate cells", total=len(consistency_cells))
        # the slowest jobs first, so that the pool does not end on them
        futures = {pool.submit(_run_consistency, cell, args.consistency_runs, args.seed): ("consistency", i)
                   for i, cell in enumerate(consistency_cells)}
        futures |= {pool.submit(_run_cell, cell, args.runs, args.seed): ("cell", i) for i, cell in enumerate(cells)}
        futures |= {pool.submit(_run_tightness, route, s, mu, args.tight_n, args.tight_runs, args.alpha, args.seed): ("tight", i)
                    for i, (route, s, mu) in enumerate(tight_jobs)}
        ordered_cells: dict[int, CoverageResult] = {}
        ordered_tight: dict[int, Tightness] = {}
        ordered_consistency: dict[int, ConsistencyResult] = {}
        for future in as_completed(futures):
            kind, index = futures[future]
            if kind == "consistency":
                ordered_consistency[index] = gate = future.result()
                consistency_bar.advance()
                if gate.status == "fail":
                    progress.print(f"[red]FAIL[/red] {gate.cell.key}: consistent in {gate.consistent} of {gate.runs}")
            elif kind == "cell":
                ordered_cells[index] = result = future.result()
                coverage_bar.describe(f"coverage · {result.cell.route} · {result.cell.scenario.name}")
                coverage_bar.advance()
                if result.status == "fail":
                    progress.print(f"[red]FAIL[/red] {result.cell.key}: coverage {result.coverage:.3f} "
                                   f"[{result.interval[0]:.3f}, {result.interval[1]:.3f}]")
            else:
                ordered_tight[index] = future.result()
                tight_bar.advance()
        results = [ordered_cells[i] for i in range(len(cells))]
        tightness = [ordered_tight[i] for i in range(len(tight_jobs))]
        consistency = [ordered_consistency[i] for i in range(len(consistency_cells))]
        suspects = [r.cell for r in results if r.status == "flag"] if args.confirm_runs else []
        confirm_bar = progress.add("re-runs of flagged cells", total=len(suspects))
        confirmed: dict[str, CoverageResult] = {}
        for result in pool.map(_run_cell, suspects, [args.confirm_runs] * len(suspects), [args.seed + 1] * len(suspects)):
            confirmed[result.cell.key] = result
            confirm_bar.advance()
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_seconds = usage.ru_utime + usage.ru_stime
    write_report(args.out, results, tightness, routes, args, seconds, cpu_seconds, command, confirmed, consistency)
    if args.json is not None:
        args.json.write_text(json.dumps(_to_json(results, tightness, consistency), default=float))
    fails = sum(r.status == "fail" for r in results)
    gate_fails = sum(r.status == "fail" for r in consistency)
    console.print(f"wrote {args.out} ({len(results)} cells, {fails} fail; {len(consistency)} verdict-gate cells, "
                  f"{gate_fails} fail) in {seconds / 60:.1f} min (workers' CPU {cpu_seconds / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
