"""Time the auditor's statistics on 10⁵ scores per side; print a table and write reports/bench/audit.md.

Part 1 (this script): each ε estimator through the public API (bound + ceiling, no power simulation),
for its default strategy and the other strategies, plus the ROC curve and the bootstrap intervals.
Target: < 1 s per estimator call. Scores are seeded Gaussians, in ~ N(1, 1), out ~ N(0, 1).

Part 2: trials per minute of the synthetic output-perturbation audit (Upcycled-FL Thm 6.2's mechanism on
Synthetic iid: train the canary client twice — with and without the canary — clip, release M = 40 times, score
with the likelihood-ratio test; the ``paper-sgd-domain`` reading of ``upcycled-thm6.2-fig3``) run through the
executor in-process and in a local process pool of 2 workers (pool start-up included), with results written
to a resumable ``trials.jsonl`` as the audit runner does.

Usage: ``.venv/bin/python benchmarks/bench_audit.py [--n 100000] [--repeats 3] [--trials 200] [--part 1|2|all]
[--out reports/bench/audit.md]`` (``--part 2`` keeps the file's existing part 1).
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
    RouteOptions,
    Split,
    attack_metrics,
    estimate,
    roc_curve,
)

TARGET_SECONDS = 1.0


def _cases(n: int) -> list[tuple[str, str, Callable[[np.ndarray, np.ndarray], object]]]:
    def est(name: str, strategy=None, two_sided: bool = False):
        return lambda a, b: estimate(name, a, b, significance=0.05, delta=1e-5, route_options=RouteOptions(strategy, two_sided))

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


PART2_HEADING = "## Part 2: audit trials per minute"


def _trial_plan(trials: int):
    from privaudit.audit.claims import get_claim
    from privaudit.papers.upcycled.recipe import output_perturbation

    readings = output_perturbation(get_claim("upcycled-thm6.2-fig3"), trials)
    return next(r for r in readings if getattr(r, "reading_id", "") == "paper-sgd-domain").trials


def _time_executor(name: str, workers: int | None, trials: int) -> tuple[float, list]:
    import tempfile

    from privaudit.executor import make_executor, make_trials, run_trials

    plan = _trial_plan(trials)
    batch = make_trials([dict(plan.spec)] * trials, base_seed=20_240_611, prefix="bench")
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        results = run_trials(plan.fn, batch, folder, make_executor(name, workers=workers), progress=False)
        return time.perf_counter() - start, results


def run_trials_benchmark(trials: int) -> str:
    import torch

    torch.set_num_threads(1)
    _time_executor("in-process", None, 2)  # warm-up: imports and the dataset cache
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    outcomes = {}
    for label, name, workers in (("in-process", "in-process", None), ("process pool, 2 workers", "process", 2)):
        seconds, results = _time_executor(name, workers, trials)
        outcomes[label] = results
        rows.append(f"| {label} | {trials} | {seconds:.1f} | {60.0 * trials / seconds:.0f} |")
        print(rows[-1], flush=True)
    same = outcomes["in-process"] == outcomes["process pool, 2 workers"]
    lines = [
        PART2_HEADING,
        "",
        f"The synthetic output-perturbation audit: {trials} trials of the `paper-sgd-domain` reading of `upcycled-thm6.2-fig3` "
        "(one trial = the canary client trained with and without the canary through the engine, clipped, released 40 times, "
        "scored by the likelihood-ratio test), results appended to `trials.jsonl`; one torch thread per process; the pool's "
        f"start-up (spawn, imports) is included. Load average {load:.2f} at start, {os.cpu_count()} CPUs.",
        "",
        "| executor | trials | seconds | trials / minute |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        f"Same seeds, same results on both executors: {'yes' if same else '**no**'}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="scores per side")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=200, help="audit trials per executor (part 2)")
    parser.add_argument("--part", choices=("1", "2", "all"), default="all")
    parser.add_argument("--out", type=Path, default=Path("reports/bench/audit.md"))
    args = parser.parse_args()
    existing = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
    part1 = existing.split(PART2_HEADING)[0].rstrip("\n") + "\n" if existing else ""
    if args.part in ("1", "all"):
        part1 = run(args.n, args.repeats)
    part2 = existing[existing.index(PART2_HEADING):] if PART2_HEADING in existing else ""
    if args.part in ("2", "all"):
        part2 = run_trials_benchmark(args.trials)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(part1 + ("\n" + part2 if part2 else ""), encoding="utf-8")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
