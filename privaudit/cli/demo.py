"""``make demo``: the default audit of the four papers' claims, preceded by a tour of ``compute-epsilon``.

1. The tour prints each ``privaudit compute-epsilon`` command it runs over the papers' headline settings
   and its output, so it doubles as a CLI tutorial (well under a minute: no training, no downloads).
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

from rich.console import Console
from rich.rule import Rule

from privaudit.cli.app import main as cli_main

TOUR: list[tuple[str, str, list[str]]] = [
    (
        "Upcycled-FL, output perturbation: FedProx σ = 1 over 80 rounds (the journal version's Fig. 3 states ε̄ = 1.59, and no δ)",
        "The journal version's ε̄ = 1.59 is reproduced by the submission draft's formula (its Thm 5.2) at the draft's δ = 1e-3 and the mean "
        "client size |D| = 224.2; the journal version's own Thm 6.2 prints r + 2·sqrt(r·ln(1/δ)), which gives 1.562 (--form tmlr).",
        ["--mechanism", "upcycled-output", "--rounds", "80", "--noise", "1.0", "--clip", "10", "--dataset-size", "224.2", "--delta", "1e-3",
         "--form", "draft"],
    ),
    (
        "Upcycled-FL, Thm 6.2: Upcycled-FedProx σ = 0.8 over 40 perturbed rounds, with the reference code's noise",
        "The paper claims 1.40 < 1.59. The reference code draws noise with std σ² (torch.normal(0, sigma**2)): "
        "with the std it really used, the claim reverses (1.75 > 1.59 by the same draft formula).",
        ["--mechanism", "upcycled-output", "--rounds", "40", "--noise", "0.8", "--clip", "10", "--dataset-size", "224.2",
         "--delta", "1e-3", "--noise-std", "sigma-squared", "--form", "draft"],
    ),
    (
        "Upcycled-FL, Thm 6.2 with the paper's own (replace-one) neighbours",
        "Replacing a record doubles the sensitivity: ε̄ becomes 3.17, not 1.59.",
        ["--mechanism", "upcycled-output", "--rounds", "80", "--noise", "1.0", "--clip", "10", "--dataset-size", "224.2",
         "--delta", "1e-3", "--sensitivity", "replace-one"],
    ),
    (
        "Upcycled-FL, Thm 6.3 (objective perturbation) for FedAvg (μ = 0)",
        "The theorem needs a strongly convex objective; with μ = 0 (the README's FedAvg example) ε is infinite.",
        ["--mechanism", "upcycled-objective", "--rounds", "40", "--alpha", "20", "--mu", "0", "--u1", "1", "--u2", "0.25",
         "--dataset-size", "224.2"],
    ),
    (
        "PrivateFL-LDP: the noise for ε = 8, δ = 1e-3 (q = 0.1, 1500 DP-SGD steps)",
        "opacus' RDP calibration gives σ ≈ 2.15; the tight accountant needs less noise for the same guarantee.",
        ["--mechanism", "subsampled-gaussian", "--epsilon", "8", "--delta", "1e-3", "--sample-rate", "0.1", "--steps", "1500", "--calibrate"],
    ),
    (
        "PrivateFL-CDP: σ = 6.37 was calibrated for ε = 8 (150 rounds, q = 1); the code clips and noises 3 tensors separately",
        "Per-tensor clipping makes the effective multiplier σ/√3: the claimed ε = 8 is really about 15.",
        ["--mechanism", "gaussian", "--noise-multiplier", "6.37", "--steps", "150", "--delta", "1e-3", "--tensors", "3", "--accountant", "all"],
    ),
    (
        "PFA: a public client (claimed ε_m = 10) under the reference calibration σ = 10·q·sqrt(T·log10(1/δ))/ε",
        "With the code's defaults (2000 records, batch 4, T = 8000 steps) the noise gives ε ≈ 23, not 10.",
        ["--mechanism", "pfa-reference", "--epsilon", "10", "--sample-rate", "0.002", "--steps", "8000", "--delta", "1e-5", "--accountant", "rdp"],
    ),
    (
        "PFA: a private client (claimed ε_m = 0.1) under the same calibration",
        "Eight times more noise than the budget needs (ε ≈ 0.013).",
        ["--mechanism", "pfa-reference", "--epsilon", "0.1", "--sample-rate", "0.002", "--steps", "8000", "--delta", "1e-5", "--accountant", "rdp"],
    ),
    (
        "FedReg: the DP-SGD comparison point for EMNIST (σ = 0.01, 20 full-batch steps)",
        "The 'matched PSNR' baseline carries essentially no privacy: ε ≈ 10⁵.",
        ["--mechanism", "gaussian", "--noise-multiplier", "0.01", "--steps", "20", "--delta", "1e-5"],
    ),
    (
        "DP-SGD in general: every accountant side by side (σ = 1, q = 0.01, 1000 steps)",
        "PRV and PLD agree; RDP is an upper bound ~15% looser; GDP is an approximation that under-states ε.",
        ["--mechanism", "subsampled-gaussian", "--noise-multiplier", "1.0", "--sample-rate", "0.01", "--steps", "1000",
         "--delta", "1e-5", "--accountant", "all"],
    ),
]


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
    """The default audit (``make demo``): the registered claims, then the evidence the report's other sections show.

    Each step is (title, arguments of ``privaudit``); every step is seeded and runs on generated or embedded data.
    ``executor`` runs the trials of the audit and LiRA's shadows (``in-process`` for a single process).
    """
    return [
        ("The claims: every registered claim at small scale (accountants, attacks, verdicts)",
         ["audit", "--suite", "default", "--executor", executor, "--out", OUT]),
        ("PFA with MixGauss1 budgets: a federation whose clients each have their own ε (the ledger's pre-check stops it)",
         ["train", "--algorithm", "pfa", "--budgets", "mixgauss1", "--clients", "20", "--clients-per-round", "0.8",
          "--local-steps", "20", "--batch-size", "8", "--rounds", "10", "--dataset", "mnist5k", "--model", "pfa-lr",
          "--out", f"{OUT}/runs/pfa", "--overwrite"]),
        ("The same PFA federation with the reference code's closed-form noise σ = 10q√(T·log₁₀(1/δ))/ε",
         ["train", "--algorithm", "pfa", "--budgets", "mixgauss1", "--clients", "20", "--clients-per-round", "0.8",
          "--local-steps", "20", "--batch-size", "8", "--rounds", "10", "--dataset", "mnist5k", "--model", "pfa-lr",
          "--noise-calibration", "reference", "--out", f"{OUT}/runs/pfa-reference-calibration", "--overwrite"]),
        ("What each client of the reference-calibrated run really spent vs its budget",
         ["compute-epsilon", "--checkpoint", f"{OUT}/runs/pfa-reference-calibration", "--delta", "1e-5", "--accountant", "rdp",
          "--out", f"{OUT}/pfa-reference-calibration-ledger.json"]),
        ("What each PFA client really spent vs its budget (the run's ledger, RDP)",
         ["compute-epsilon", "--checkpoint", f"{OUT}/runs/pfa", "--delta", "1e-5", "--accountant", "rdp",
          "--out", f"{OUT}/pfa-ledger.json"]),
        ("ε vs rounds of the PFA client that spent the most, by every accountant that can account for it",
         ["compute-epsilon", "--checkpoint", f"{OUT}/runs/pfa", "--delta", "1e-5", "--curve",
          "--out", f"{OUT}/pfa-epsilon-curve.json"]),
        ("Private Upcycled-FedProx (output perturbation, σ = 0.8): a federation to attack",
         ["train", "--algorithm", "upcycled-fedprox", "--dataset", "synthetic:iid", "--rounds", "20",
          "--privacy", "output-perturbation", "--noise", "0.8", "--clip", "10", "--out", f"{OUT}/runs/upcycled-private",
          "--overwrite"]),
        ("LiRA membership inference on that federation's final model (8 shadow federations)",
         ["attack", "membership", "--checkpoint", f"{OUT}/runs/upcycled-private", "--attack", "lira", "--shadows", "8",
          "--variance", "fixed", "--executor", executor, "--out", f"{OUT}/membership-lira"]),
        ("Gradient inversion, analytic attack on a fully connected first layer: FedReg+MG's update (no noise)",
         ["attack", "inversion", "--dataset", "lfw", "--model", "upcycled-mlp", "--defense", "fedreg-mg", "--attack",
          "analytic", "--images", "4", "--out", f"{OUT}/inversion-fedreg-mg-analytic"]),
        ("Inverting Gradients on a FedAvg update (convnet, 300 iterations)",
         ["attack", "inversion", "--dataset", "lfw", "--model", "convnet", "--defense", "fedavg", "--attack", "ig",
          "--images", "2", "--iterations", "300", "--threads", INVERSION_THREADS, "--out", f"{OUT}/inversion-fedavg-ig"]),
        ("Inverting Gradients on a FedReg+MG update (the attacker assumes FedAvg)",
         ["attack", "inversion", "--dataset", "lfw", "--model", "convnet", "--defense", "fedreg-mg", "--attack", "ig",
          "--images", "2", "--iterations", "300", "--threads", INVERSION_THREADS, "--out", f"{OUT}/inversion-fedreg-mg-ig"]),
        ("Inverting Gradients on a DP-SGD update (σ = 0.01: the result carries its ε)",
         ["attack", "inversion", "--dataset", "lfw", "--model", "convnet", "--defense", "dpsgd:1e-2", "--attack", "ig",
          "--images", "2", "--iterations", "300", "--threads", INVERSION_THREADS, "--out", f"{OUT}/inversion-dpsgd-ig"]),
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
