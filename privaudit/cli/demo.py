"""``make demo``: the default audit of the four papers' claims, preceded by a tour of ``compute-epsilon``.

1. The tour prints each ``privaudit compute-epsilon`` command it runs over the papers' headline settings
   and its output, so it doubles as a CLI tutorial (well under a minute: no training, no downloads).
   Each registered paper contributes its tour steps and its evidence steps (:class:`DemoPart`, the paper's
   ``demo`` part in :mod:`privaudit.plugins`); this module names no paper.
2. ``privaudit audit --suite default --out reports/default`` trains and attacks small federations on
   generated and embedded data and gives each registered claim its verdict; then PFA federations with
   per-client budgets under real and reference noise calibration (their ledgers, an ε-vs-rounds curve),
   LiRA on a private Upcycled-FL federation, and gradient inversion of FedAvg, FedReg+MG and DP-SGD updates
   add the report's other sections. Every torch computation runs on one thread (see :func:`use_one_torch_thread`).
3. ``privaudit report reports/default --out reports/default/report`` renders every result as Markdown and
   one self-contained HTML file.

``python -m privaudit.cli.demo --tour-only`` runs step 1 alone; ``--executor process`` runs the trials of step 2 in a
process pool with one worker per core instead of this process (``benchmarks/demo_timing.py`` times both).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from typing import Protocol

from rich.console import Console
from rich.rule import Rule

from privaudit import plugins
from privaudit.cli.app import main as cli_main


class DemoPart(Protocol):
    """What a paper adds to ``make demo`` (its ``demo`` part): ``tour`` — (title, explanation, ``privaudit
    compute-epsilon`` arguments) per step; ``steps(out, executor, threads)`` — (title, ``privaudit`` arguments) of the
    evidence steps after the default audit suite, writing under ``out``, with trials and shadow federations on
    ``executor`` and torch on ``threads`` threads (an empty list when the suite covers the paper)."""

    tour: Sequence[tuple[str, str, list[str]]]

    def steps(self, out: str, executor: str, threads: str) -> list[tuple[str, list[str]]]: ...


def demo_parts() -> list[DemoPart]:
    """Every registered paper's demo part, in the registry's order."""
    return [paper.demo.load() for paper in plugins.papers() if paper.demo is not None]


#: The tour's closing step, about DP-SGD in general.
GENERAL_TOUR = [
    (
        "DP-SGD in general: every accountant side by side (σ = 1, q = 0.01, 1000 steps)",
        "PRV and PLD agree; RDP is an upper bound ~15% looser; GDP is an approximation that under-states ε.",
        ["--mechanism", "subsampled-gaussian", "--noise-multiplier", "1.0", "--sample-rate", "0.01", "--steps", "1000",
         "--delta", "1e-5", "--accountant", "all"],
    ),
]

TOUR: list[tuple[str, str, list[str]]] = [*(step for part in demo_parts() for step in part.tour), *GENERAL_TOUR]


def run_tour(console: Console | None = None) -> int:
    console = console or Console()
    console.print(Rule("[bold]privaudit — a tour of compute-epsilon over the papers' headline settings"))
    for i, (title, explanation, args) in enumerate(TOUR, 1):
        console.print()
        console.print(Rule(f"{i}. {title}", align="left"))
        console.print(f"[italic]{explanation}[/italic]")
        console.print(f"[bold cyan]$ privaudit compute-epsilon {shlex.join(args)}[/bold cyan]")
        code = cli_main(["compute-epsilon", *args])
        if code != 0:
            console.print(f"[red]step {i} failed with exit code {code}[/red]")
            return code
    console.print()
    console.print("More: `privaudit compute-epsilon --help`, and README.md for the library API.")
    return 0


OUT = "reports/default"

#: Where the demo's independent trials run (the claims' trials, LiRA's shadow federations): in this process. Measured
#: back to back on a quiet 2-core machine, ``audit --suite default`` took 157.6 s wall (157 CPU-s) in-process and
#: 187.4 s (227.5 CPU-s) in a process pool: a pool per reading pays its workers' start-up (torch imports) and most
#: readings are short. Results are the same on every executor (each trial is seeded by its index, privaudit.executor).
DEMO_EXECUTOR = "in-process"
#: torch threads of the inversion steps: one. Measured on a loaded 2-core machine, Inverting Gradients (1 image, 40
#: iterations) took 8.1–9.3 CPU-s with one thread and 75.7 CPU-s (8× the wall time) with two, which spin-wait for
#: each other whenever the machine is busy.
INVERSION_THREADS = "1"


def default_steps(executor: str = DEMO_EXECUTOR) -> list[tuple[str, list[str]]]:
    """The default audit (``make demo``): the registered claims, then the evidence the report's other sections show
    (each paper's demo steps), then the report.

    Each step is (title, arguments of ``privaudit``); every step is seeded and runs on generated or embedded data.
    ``executor`` runs the trials of the audit and LiRA's shadows (``in-process`` for a single process).
    """
    return [
        ("The claims: every registered claim at small scale (accountants, attacks, verdicts)",
         ["audit", "--suite", "default", "--executor", executor, "--out", OUT]),
        *(step for part in demo_parts() for step in part.steps(OUT, executor, INVERSION_THREADS)),
        ("The audit report (Markdown + one self-contained HTML file)",
         ["report", OUT, "--out", f"{OUT}/report", "--title", "privaudit default audit"]),
    ]


DEFAULT_STEPS: list[tuple[str, list[str]]] = default_steps()


def run_step(console: Console, title: str, args: list[str]) -> int:
    console.print()
    console.print(Rule(title, align="left"))
    console.print(f"[bold cyan]$ privaudit {shlex.join(args)}[/bold cyan]")
    return cli_main(args)


def use_one_torch_thread() -> None:
    """One torch thread for the work the steps do in this process (training outside the pool, attacks, accounting).

    The pool's workers already use one each (privaudit.executor); this process used torch's default (one per core)
    when trials ran in a pool. Side by side on a busy 2-core machine, ``audit --claim privatefl-ldp-participation
    --trials 5 --executor process`` took 20.8 s wall and 11.6 CPU-s in this process with one thread, 24.1 s and
    21.4 CPU-s with two (they spin-wait for each other); under heavier load its trained-run reading took 129.8 s beside
    a pool against 14.9 s in-process.
    """
    import torch

    torch.set_num_threads(1)


def run_default_audit(console: Console | None = None, steps: list[tuple[str, list[str]]] | None = None) -> int:
    """Steps 2 and 3: the default audit suite and the evidence around it, then the report."""
    console = console or Console()
    use_one_torch_thread()
    for title, args in DEFAULT_STEPS if steps is None else steps:
        code = run_step(console, title, args)
        if code != 0:
            console.print(f"[red]`privaudit {args[0]}` failed with exit code {code}[/red]")
            return code
    console.print()
    console.print(f"Open {OUT}/report/report.html (or report.md). "
                  "`make claims` runs the full claims audit at larger trial counts.")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    executor = argv[argv.index("--executor") + 1] if "--executor" in argv[:-1] else DEMO_EXECUTOR
    console = Console()
    code = run_tour(console)
    if code != 0 or "--tour-only" in argv:
        return code
    return run_default_audit(console, default_steps(executor))


if __name__ == "__main__":
    sys.exit(main())
