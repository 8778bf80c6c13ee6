"""Re-runs of Upcycled-FL's experiments that the evidence reports are made from.

* :func:`table1` — Upcycled-FL Table 1's shape (003 §7.3): every base algorithm X and Upcycled-X on
  Synthetic(0.5,0.5) and Synthetic(1,1) (d = 20, C = 2, 30 clients: the Upcycled-FL data's shape),
  30 % of the clients per round, 90 % stragglers, E = 10, batch 32, momentum 0.5; X for 80 iterations and
  Upcycled-X for 160 (equal training time: the even iterations cost nothing); accuracy of the final global
  model on the pooled test set, mean ± std over training seeds (the data are generated once, seed 0).
  Learning rate 5e-3 and u = 0.7 / 0.9 for Syn(0.5,0.5) / Syn(1,1): the reference code's non-private
  settings for these datasets (``client/avg.py`` comment, spec §1.2); FedProx μ = 0.5 (the issue's example);
  the other algorithms' hyper-parameters are the reference code's defaults. No grid search (the paper did one).
* :func:`private_comparison` — private FedProx (σ = 1, 80 rounds) vs private Upcycled-FedProx (σ = 0.8,
  80 iterations = 40 odd rounds), output perturbation with τ = 10 on Synthetic iid (d = 20, C = 2), all
  clients, no stragglers, lr 0.07 (the reference README's output-perturbation setting), μ = 0.1 and λ = 0.04
  (000 App. F.2: u = μ/(μ+λ)); both noise conventions (σ as printed, σ² as the reference code draws it);
  per-client ε from the ledger (RDP accountant, δ = 1e-3) beside the paper's ε̄ (the ICLR draft's Thm 5.2
  form, which gives 003's 1.59 / 1.40, at the mean client size, spec §1.5), and loss curves.

``python -m privaudit.papers.upcycled.experiments table1 [--quick] [--workers 2]`` writes ``reports/upcycled-table1.md``;
``python -m privaudit.papers.upcycled.experiments private`` writes ``reports/upcycled-private.md`` and its figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_ALGORITHMS = ("fedavg", "fedavgm", "fedprox", "scaffold", "feddyn", "pfedme", "fedyogi")
TABLE1_DATASETS = {"0.5,0.5": 0.7, "1,1": 0.9}  # Synthetic(α,β) → Upcycled coefficient u (reference settings)
ALGORITHM_OPTIONS = {"fedprox": {"mu": 0.5}}
DISPLAY = {
    "fedavg": "FedAvg", "fedavgm": "FedAvgM", "fedprox": "FedProx", "scaffold": "Scaffold",
    "feddyn": "FedDyn", "pfedme": "pFedMe", "fedyogi": "FedYogi",
}


@dataclass(frozen=True)
class RunRequest:
    dataset: str  # "0.5,0.5"
    algorithm: str  # "fedprox" or "upcycled-fedprox"
    seed: int
    rounds: int
    options: dict[str, Any] = field(default_factory=dict)
    privacy: dict[str, Any] | None = None
    clients_per_round: float = 0.3
    stragglers: float = 0.9
    lr: float = 5e-3
    eval_every: int = 1
    eval_train_loss: bool = False


@dataclass(frozen=True)
class RunOutcome:
    request: RunRequest
    accuracy: float
    personalised_accuracy: float | None
    seconds: float
    history: list[dict[str, Any]]
    ledger: dict[str, Any] | None
    client_sizes: list[int]
    client_totals: list[int]


def _dataset(name: str):
    from privaudit.data.synthetic import synthetic

    if name == "iid":
        return synthetic(0.0, 0.0, iid=True, num_clients=30, dim=20, num_classes=2, seed=0)
    alpha, beta = (float(v) for v in name.split(","))
    return synthetic(alpha, beta, num_clients=30, dim=20, num_classes=2, seed=0)


def run_one(request: RunRequest) -> RunOutcome:
    """One federation (run in a worker process; one torch thread)."""
    import torch

    from privaudit.fl.algorithms.registry import make_algorithm
    from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
    from privaudit.fl.engine.round_loop import run_federation
    from privaudit.fl.privacy.registry import privatize

    torch.set_num_threads(1)
    dataset = _dataset(request.dataset)
    privatizer = None
    if request.privacy is not None:
        privacy = dict(request.privacy)
        name = privacy.pop("mechanism")
        privatizer = lambda algorithm: privatize(algorithm, name, privacy)  # noqa: E731
    algorithm = make_algorithm(request.algorithm, request.options, privatizer=privatizer)
    config = FederationConfig(
        rounds=request.rounds,
        local=LocalTrainingConfig(epochs=10, batch_size=32, lr=request.lr, momentum=0.5),
        clients_per_round=request.clients_per_round,
        stragglers=request.stragglers,
        seed=request.seed,
        eval_every=request.eval_every,
        eval_train_loss=request.eval_train_loss,
    )
    started = time.perf_counter()
    result = run_federation(dataset, "logreg", algorithm, config, progress=False)
    last = result.history[-1]
    return RunOutcome(
        request=request,
        accuracy=float(result.final_accuracy),
        personalised_accuracy=last.personalised_accuracy,
        seconds=time.perf_counter() - started,
        history=[m.to_dict() for m in result.history],
        ledger=result.ledger.to_dict() if result.ledger.events else None,
        client_sizes=[int(c.num_train) for c in dataset.clients],
        client_totals=[int(c.num_train + c.num_test) for c in dataset.clients],
    )


def run_all(requests: Sequence[RunRequest], workers: int, label: str) -> list[RunOutcome]:
    """Run every request (in ``workers`` processes) with a progress bar; results in request order."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as progress:
        task = progress.add_task(label, total=len(requests))
        if workers <= 1:
            outcomes = []
            for request in requests:
                outcomes.append(run_one(request))
                progress.advance(task)
            return outcomes
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(run_one, r) for r in requests]
            for future in futures:
                future.result()
                progress.advance(task)
            return [f.result() for f in futures]


# -- Table 1 ------------------------------------------------------------------------------------------
def table1_requests(seeds: Sequence[int] = (0, 1, 2), rounds: int = 80, algorithms: Sequence[str] = BASE_ALGORITHMS,
                    datasets: Sequence[str] = tuple(TABLE1_DATASETS)) -> list[RunRequest]:
    requests = []
    for dataset in datasets:
        for algorithm in algorithms:
            options = ALGORITHM_OPTIONS.get(algorithm, {})
            for seed in seeds:
                requests.append(RunRequest(dataset, algorithm, seed, rounds, options, eval_every=rounds))
                upcycled = {**options, "upcycle": TABLE1_DATASETS[dataset]}
                requests.append(RunRequest(dataset, f"upcycled-{algorithm}", seed, 2 * rounds, upcycled, eval_every=2 * rounds))
    return requests


def _mean_std(values: Sequence[float]) -> str:
    mean = 100 * statistics.fmean(values)
    std = 100 * statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.2f} ± {std:.2f}"


def render_table1(outcomes: Sequence[RunOutcome], seeds: Sequence[int], rounds: int) -> str:
    by_key: dict[tuple[str, str], list[RunOutcome]] = {}
    for outcome in outcomes:
        by_key.setdefault((outcome.request.algorithm, outcome.request.dataset), []).append(outcome)
    datasets = list(dict.fromkeys(o.request.dataset for o in outcomes))
    algorithms = list(dict.fromkeys(o.request.algorithm.removeprefix("upcycled-") for o in outcomes))
    header = "| method | " + " | ".join(f"Syn({d})" for d in datasets) + " | mean s/run |"
    lines = [
        "# Upcycled-FL Table 1 (shape): accuracy of X vs Upcycled-X with 90 % stragglers",
        "",
        f"Test accuracy (%) of the final global model on the pooled test set, mean ± std over {len(seeds)} training seeds "
        f"({', '.join(map(str, seeds))}); X runs {rounds} iterations, Upcycled-X {2 * rounds} (equal training time). "
        "Synthetic(α,β) with d = 20, C = 2, 30 clients, data seed 0; 30 % of the clients per round, 90 % stragglers, "
        "E = 10, batch 32, lr 5e-3, momentum 0.5; u = " + ", ".join(f"{TABLE1_DATASETS[d]} on Syn({d})" for d in datasets)
        + "; FedProx μ = 0.5; other hyper-parameters: the Upcycled-FL reference code's defaults. No grid search.",
        "",
        header,
        "|---" * (len(datasets) + 2) + "|",
    ]
    personal_rows = []
    for algorithm in algorithms:
        for name in (algorithm, f"upcycled-{algorithm}"):
            cells, seconds = [], []
            label = ("Upcycled-" + DISPLAY.get(algorithm, algorithm)) if name.startswith("upcycled-") else DISPLAY.get(algorithm, algorithm)
            for dataset in datasets:
                runs = by_key.get((name, dataset), [])
                cells.append(_mean_std([r.accuracy for r in runs]) if runs else "—")
                seconds += [r.seconds for r in runs]
                if runs and runs[0].personalised_accuracy is not None:
                    personal_rows.append((label, dataset, _mean_std([r.personalised_accuracy for r in runs])))
            lines.append(f"| {label} | " + " | ".join(cells) + f" | {statistics.fmean(seconds):.1f} |")
    wins = []
    for dataset in datasets:
        better = sum(
            statistics.fmean(r.accuracy for r in by_key[(f"upcycled-{a}", dataset)]) > statistics.fmean(r.accuracy for r in by_key[(a, dataset)])
            for a in algorithms
            if (a, dataset) in by_key and (f"upcycled-{a}", dataset) in by_key
        )
        wins.append(f"Syn({dataset}): Upcycled-X has the higher mean accuracy for {better} of {len(algorithms)} base algorithms")
    lines += ["", *[f"- {w}." for w in wins]]
    if personal_rows:
        lines += ["", "pFedMe's personalised models (each client's own model on its own test split, pooled):", ""]
        lines += ["| method | dataset | personalised accuracy (%) |", "|---|---|---|"]
        lines += [f"| {n} | Syn({d}) | {v} |" for n, d, v in personal_rows]
    lines += ["", "Regenerate: `python -m privaudit.papers.upcycled.experiments table1`."]
    return "\n".join(lines) + "\n"


# -- private FedProx vs private Upcycled-FedProx ------------------------------------------------------
PRIVATE_SETTINGS = {
    "FedProx, σ = 1": ("fedprox", 1.0),
    "Upcycled-FedProx, σ = 0.8": ("upcycled-fedprox", 0.8),
}


def private_requests(rounds: int = 80, seed: int = 0) -> list[RunRequest]:
    requests = []
    for convention in ("sigma", "sigma-squared"):
        for algorithm, sigma in PRIVATE_SETTINGS.values():
            options = {"mu": 0.1} if algorithm == "fedprox" else {"mu": 0.1, "lam": 0.04}
            privacy = {"mechanism": "output-perturbation", "clip": 10.0, "noise": sigma, "noise_std": convention}
            requests.append(
                RunRequest("iid", algorithm, seed, rounds, options, privacy, clients_per_round=1.0, stragglers=0.0, lr=0.07,
                           eval_train_loss=True)
            )
    return requests


def _ledger_epsilons(ledger_dict: dict, delta: float) -> tuple[float, float, str]:
    from privaudit.accounting.ledger import PrivacyLedger

    ledger = PrivacyLedger.from_dict(ledger_dict)
    summary = ledger.summary(delta, accountant="rdp")
    return summary.max_epsilon, summary.mean_epsilon, summary.accountant


def render_private(outcomes: Sequence[RunOutcome], delta: float, figure: Path | None) -> str:
    from privaudit.accounting.closed_form import upcycled_output_perturbation

    lines = [
        "# Private FedProx vs private Upcycled-FedProx (output perturbation)",
        "",
        "Synthetic iid (d = 20, C = 2, 30 clients, data seed 0), all clients every round, no stragglers, E = 10, batch 32, "
        "lr 0.07, momentum 0.5, μ = 0.1, Upcycled u = μ/(μ+λ) with λ = 0.04; τ = 10; 80 iterations each "
        f"(FedProx: 80 noisy rounds; Upcycled-FedProx: 40 noisy odd rounds); run seed 0; δ = {delta:g}.",
        "Per-client ε: the run's privacy ledger (one Gaussian event per client per noisy round, sensitivity τ/|D_i| as "
        "Thm 6.2 assumes, |D_i| = the client's training-set size) composed by privaudit's RDP accountant; max and mean "
        "over clients. Paper's ε̄: the ICLR draft's Thm 5.2 form (000), which reproduces 003's printed 1.59 / 1.40 at "
        "δ = 1e-3 (003's own Thm 6.2 prints r + 2·sqrt(r·ln(1/δ)): 1.562 / 1.373), evaluated at the mean client size including test data "
        "(spec §1.5: how 1.59 / 1.40 were obtained). Accuracy: final global model on the pooled test set.",
        "",
        "| run | noise std drawn | final test accuracy | final training loss | ledger ε max | ledger ε mean | paper's ε̄ (000 Thm 5.2 form, mean size) |",
        "|---|---|---|---|---|---|---|",
    ]
    curves = {}
    for outcome in outcomes:
        request = outcome.request
        sigma = request.privacy["noise"]
        convention = request.privacy["noise_std"]
        std = sigma if convention == "sigma" else sigma**2
        label = next(k for k, v in PRIVATE_SETTINGS.items() if v[0] == request.algorithm)
        noisy_rounds = len({e["round"] for e in outcome.ledger["events"]})
        eps_max, eps_mean, accountant = _ledger_epsilons(outcome.ledger, delta)
        mean_size = statistics.fmean(outcome.client_totals)
        paper = upcycled_output_perturbation(noisy_rounds, sigma, 10.0, mean_size, delta, form="draft", noise_std=convention)
        final = outcome.history[-1]
        lines.append(
            f"| {label} ({'σ' if convention == 'sigma' else 'σ²'} convention) | {std:g} | {final['test_accuracy']:.4f} | "
            f"{final['global_train_loss']:.4f} | {eps_max:.3f} | {eps_mean:.3f} | {paper.value:.3f} |"
        )
        curves[f"{label}, std {std:g} ({'σ' if convention == 'sigma' else 'σ²'} convention)"] = [(m["round"], m["global_train_loss"], m["test_accuracy"]) for m in outcome.history]
    at_paper_size = [
        upcycled_output_perturbation(m, sigma, 10.0, 224.2, delta, form="draft", noise_std=convention).value
        for m, sigma, convention in ((80, 1.0, "sigma"), (40, 0.8, "sigma"), (40, 0.8, "sigma-squared"))
    ]
    lines += [
        "",
        f"ε accountant: {accountant}; every event's assumptions are stored in the ledger. With σ = 1 both conventions draw "
        "std 1, so the two FedProx rows are the same run. The generated data's clients are smaller than the Upcycled-FL "
        "files' (mean train+test size 224.2): there the draft's formula gives "
        f"{at_paper_size[0]:.3f} (FedProx) and {at_paper_size[1]:.3f} (Upcycled-FedProx, σ) — the paper's 1.59 / 1.40 — "
        f"and {at_paper_size[2]:.3f} for Upcycled-FedProx with the σ² the reference code draws (spec U1).",
        "",
    ]
    lines += ["Training loss of the global model on all clients' training data (the curve the reference code publishes, spec U9):", ""]
    marks = [1, 2, 5, 10, 20, 40, 60, 80]
    lines += ["| run | " + " | ".join(f"it. {m}" for m in marks) + " |", "|---" * (len(marks) + 1) + "|"]
    for name, points in curves.items():
        by_round = {r: loss for r, loss, _ in points}
        lines.append(f"| {name} | " + " | ".join(f"{by_round[m]:.3f}" if m in by_round else "—" for m in marks) + " |")
    if figure is not None:
        _plot_curves(curves, figure)
        lines += ["", f"![loss curves]({figure.name})"]
    lines += ["", "Regenerate: `python -m privaudit.papers.upcycled.experiments private`."]
    return "\n".join(lines) + "\n"


def _plot_curves(curves: dict[str, list[tuple[int, float, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, points in curves.items():
        rounds = [p[0] for p in points]
        left.plot(rounds, [p[1] for p in points], label=name)
        right.plot(rounds, [p[2] for p in points], label=name)
    left.set(xlabel="iteration", ylabel="global training loss", yscale="log", title="training loss")
    right.set(xlabel="iteration", ylabel="test accuracy", title="test accuracy")
    right.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m privaudit.papers.upcycled.experiments", description="Upcycled-FL evidence runs.")
    parser.add_argument("experiment", choices=("table1", "private"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--datasets", nargs="+", default=list(TABLE1_DATASETS))
    parser.add_argument("--algorithms", nargs="+", default=list(BASE_ALGORITHMS))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--delta", type=float, default=1e-3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    reports = Path(os.environ.get("PRIVAUDIT_REPORTS", "reports"))
    started = time.perf_counter()
    if args.experiment == "table1":
        requests = table1_requests(args.seeds, args.rounds, args.algorithms, args.datasets)
        outcomes = run_all(requests, args.workers, "Table 1 runs")
        text = render_table1(outcomes, args.seeds, args.rounds)
        out = args.out or reports / "upcycled-table1.md"
    else:
        outcomes = run_all(private_requests(args.rounds, args.seeds[0]), args.workers, "private runs")
        out = args.out or reports / "upcycled-private.md"
        text = render_private(outcomes, args.delta, out.with_suffix(".png"))
    elapsed = time.perf_counter() - started
    text += f"\nWall time of this report: {elapsed / 60:.1f} min with {args.workers} worker process(es) on {os.cpu_count()} CPUs.\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
