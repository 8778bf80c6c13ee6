"""Time ``make demo``'s main job (the default audit and the steps after it), per step, under each executor.

Each executor's run is a fresh process in its own scratch directory (nothing of ``reports/`` is touched); per step it
records wall seconds and CPU seconds (the process and its reaped children: pool workers included), so one run puts
the in-process and the process-pool demo side by side on the same machine at the same time of day.

Usage: ``python benchmarks/demo_timing.py [--executors in-process,process] [--steps 0,7]`` (step indices of
``privaudit.cli.demo.default_steps``; default: every step). Not part of ``make bench`` (minutes per executor).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_steps(executor: str, indices: list[int] | None) -> list[dict]:
    """In this process (cwd = a scratch directory): the demo's steps, each timed."""
    from rich.console import Console

    from privaudit.cli.demo import default_steps, run_step, use_one_torch_thread

    console = Console(width=120, quiet=True)
    use_one_torch_thread()  # as run_default_audit does
    steps = default_steps(executor)
    rows = []
    for i, (title, args) in enumerate(steps):
        if indices is not None and i not in indices:
            continue
        wall, cpu = time.perf_counter(), _cpu()
        code = run_step(console, title, args)
        rows.append({"step": i, "command": " ".join(args[:2]), "wall_s": time.perf_counter() - wall, "cpu_s": _cpu() - cpu,
                     "exit": code})
        if code != 0:
            break
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executors", default="in-process,process")
    parser.add_argument("--steps", default=None, help="comma-separated step indices (default: all)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    indices = None if ns.steps is None else [int(s) for s in ns.steps.split(",")]
    if ns.child is not None:
        print(json.dumps(run_steps(ns.child, indices)))
        return
    results = {}
    for executor in ns.executors.split(","):
        with tempfile.TemporaryDirectory(prefix=f"demo-{executor}-") as scratch:
            argv = [sys.executable, str(Path(__file__).resolve()), "--child", executor]
            argv += [] if ns.steps is None else ["--steps", ns.steps]
            done = subprocess.run(argv, cwd=scratch, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            if done.returncode != 0:
                sys.exit(f"{executor}: the demo failed\n{done.stderr[-2000:]}")
            results[executor] = json.loads(done.stdout.strip().splitlines()[-1])
    names = list(results)
    print("| step | command | " + " | ".join(f"{n} wall s | {n} CPU s" for n in names) + " |")
    print("|---:|---|" + "---:|---:|" * len(names))
    for rows in zip(*results.values(), strict=True):
        print(f"| {rows[0]['step']} | {rows[0]['command']} | "
              + " | ".join(f"{r['wall_s']:.1f} | {r['cpu_s']:.1f}" for r in rows) + " |")
    totals = {n: (sum(r["wall_s"] for r in rs), sum(r["cpu_s"] for r in rs)) for n, rs in results.items()}
    print("| | **total** | " + " | ".join(f"**{w:.1f}** | **{c:.1f}**" for w, c in totals.values()) + " |")
    if len(names) == 2:
        print(f"\nwall {names[1]} / {names[0]}: {totals[names[1]][0] / totals[names[0]][0]:.2f}")


if __name__ == "__main__":
    main()
