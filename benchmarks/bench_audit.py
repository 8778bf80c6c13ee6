"""Time the auditor's statistics on 10⁵ scores per side; print a table and write reports/bench/audit.md.

Part 1 (this script): each ε estimator through the public API (bound + ceiling, no power simulation),
for its default strategy and the other strategies, plus the ROC curve and the bootstrap intervals.
Target: < 1 s per estimator call. Scores are seeded Gaussians, in ~ N(1, 1), out ~ N(0, 1).

Part 2 (trials per minute of full audits, in-process vs a process pool) belongs to the executor work and
is not part of this script yet.

Usage: ``.venv/bin/python benchmarks/bench_audit.py [--n 100000] [--repeats 3] [--out reports/bench/audit.md]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy

from privaudit.audit import (
    Bonferroni,
    Explicit,
    Guesses,
    MultiSplit,
    OrderStatistics,
    Split,
    attack_metrics,
    estimate,
    roc_curve,
)

TARGET_SECONDS = 1.0


def _cases(n: int) -> list[tuple[str, str, Callable[[np.ndarray, np.ndarray], object]]]:
    def est(name: str, strategy=None, **options):
        return lambda a, b: estimate(name, a, b, significance=0.05, delta=1e-5, strategy=strategy, **options)

    return [
        ("cp", "default: Bonferroni(OrderStatistics)", est("cp")),
        ("cp", "two-sided, default family", est("cp", two_sided=True)),
        ("cp", "Explicit(0.5)", est("cp", Explicit(0.5))),
        ("cp", "Split(0.5)", est("cp", Split())),
        ("cp", "MultiSplit(11)", est("cp", MultiSplit())),
        ("gdp", "default: Bonferroni(DEFAULT_GDP_FAMILY)", est("gdp")),
        ("gdp", "Bonferroni(OrderStatistics)", est("gdp", Bonferroni(OrderStatistics()))),
        ("gdp", "Split(0.5)", est("gdp", Split())),
        ("gdp", "MultiSplit(11)", est("gdp", MultiSplit())),
        ("one-run", "default: Bonferroni(DEFAULT_GUESS_GRID)", est("one-run")),
        ("one-run", f"Guesses({n // 20}, {n // 20})", est("one-run", Guesses(n // 20, n // 20))),
        ("one-run", "Split(0.5)", est("one-run", Split())),
        ("one-run", "MultiSplit(11)", est("one-run", MultiSplit())),
        ("one-run-fdp", "default: Bonferroni(DEFAULT_GUESS_GRID)", est("one-run-fdp")),
        ("one-run-fdp", f"Guesses({n // 20}, {n // 20})", est("one-run-fdp", Guesses(n // 20, n // 20))),
        ("one-run-fdp", "Split(0.5)", est("one-run-fdp", Split())),
        ("one-run-fdp", "MultiSplit(11)", est("one-run-fdp", MultiSplit())),
        ("roc", "roc_curve", lambda a, b: roc_curve(a, b)),
        ("bootstrap", "attack_metrics, 1000 BCa resamples", lambda a, b: attack_metrics(a, b, n_resamples=1000)),
    ]


def _time(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def run(n: int, repeats: int) -> str:
    rng = np.random.default_rng(20_240_611)
    in_scores, out_scores = rng.normal(1.0, 1.0, n), rng.normal(0.0, 1.0, n)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# Audit statistics benchmark",
        "",
        f"{n:,} scores per side (in ~ N(1, 1), out ~ N(0, 1), seed 20240611); α = 0.05, δ = 1e-5; "
        f"median of {repeats} runs; each estimator call includes its ceiling, no power simulation.",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {load:.2f} at start; "
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}.",
        "",
        "| estimator | strategy | seconds | ε lower bound | ceiling | < 1 s |",
        "|---|---|---:|---:|---:|:---:|",
    ]
    for estimator, label, fn in _cases(n):
        seconds, result = _time(lambda fn=fn: fn(in_scores, out_scores), repeats)
        epsilon = getattr(result, "epsilon_lb", None)
        ceiling = getattr(result, "ceiling", None)
        cells = [
            estimator,
            label,
            f"{seconds:.3f}",
            "—" if epsilon is None else f"{epsilon:.3f}",
            "—" if ceiling is None else f"{ceiling:.2f}",
            ("yes" if seconds < TARGET_SECONDS else "**no**") if epsilon is not None else "n/a",
        ]
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="scores per side")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("reports/bench/audit.md"))
    args = parser.parse_args()
    table = run(args.n, args.repeats)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table, encoding="utf-8")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
