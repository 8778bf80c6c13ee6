"""Upcycled-FL side by side: the reference code (osu-srml/Upcycled-FL@4dd7400) and privaudit on the same data files.

Not a test: it runs the reference repository's own ``train.py`` (a checkout given on the command line, run by an
interpreter that has what its ``requirements.txt`` needs), then privaudit on the data files of that checkout
(:func:`privaudit.papers.upcycled.reference_data.load_reference_synthetic`), with the same settings and seeds, and
writes the table to ``reports/bench/reference-upcycled.md``.

Experiments (``--experiments``; all by default):

* ``upcycled`` — the reference README's non-private Upcycled-FedAvg command with the settings its
  ``client/avg.py`` comment gives for Synthetic(1,1) (lr 5e-3, u = 0.9): ``--dataset synthetic_1_1 --epochs 160
  --frac 0.3 --local_ep 10 --local_bs 32 --straggler 0.3``, momentum 0.5; privaudit ``upcycled-fedavg`` with the
  reference's double softmax, 160 iterations (80 training rounds);
* ``fedavg`` — the same without Upcycled (``--algorithm Vanilla --epochs 80``), the control;
* ``private`` — the README's output-perturbation FedAvg command (``--clip 10 --sigma 1 --lr 7e-2 --frac 1
  --epochs 80``) on the reference's ``synthetic_iid`` files, as :mod:`privaudit.papers.upcycled.readme_run` runs
  it (std σ², simulated clock-ms seeds, double softmax). The reference seeds its noise from the wall clock, so
  one of its seeds does not repeat.

Reported per run: test accuracy of the global model after the last iteration and the mean over the last 10, from
the reference's log lines (``At round N accuracy: ...``) and privaudit's history; CPU seconds of each run (the
reference: ``getrusage(RUSAGE_CHILDREN)`` around its process; privaudit: ``time.process_time`` in this process), both
with one thread (``OMP_NUM_THREADS=1`` / ``torch.set_num_threads(1)``), and both evaluating the global model on every
client's training data every iteration (the reference always does; privaudit's ``eval_train_loss``).

Running the reference here needs three things outside its code, applied to a scratch copy of the checkout (the
checkout itself is not touched): the client's device line ``'cuda' if args.gpu is not None else 'cpu'`` (``--gpu``
is an ``int`` that cannot be ``None``, so it always asks for CUDA) is replaced by ``'cuda' if
torch.cuda.is_available() else 'cpu'``; ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` lets torch ≥ 2.6 load its
``TensorDataset`` files as torch 2.1 did; and where the interpreter has no working ``torchvision`` (its
``utils.py`` imports ``datasets, transforms`` and never uses them for synthetic data), an empty stand-in package
is put on ``PYTHONPATH``. The reference reads ``../data`` from its working directory, so it runs in ``run/``.

Usage::

    python benchmarks/reference_upcycled.py /path/to/Upcycled-FL --python /path/to/venv/bin/python \\
        --seeds 0 1 2 3 4 5 [--experiments upcycled fedavg private] [--report reports/bench/reference-upcycled.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "reference-upcycled.md"
LAST = 10
DEVICE_LINE = "self.device = 'cuda' if args.gpu is not None else 'cpu'"
CPU_LINE = "self.device = 'cuda' if torch.cuda.is_available() else 'cpu'"
ROUND_LINE = re.compile(r"^At round (\d+) accuracy: ([0-9.eE+-]+)\s*$")

COMMON = ["--baseline", "avg", "--local_ep", "10", "--local_bs", "32", "--alpha", "0", "--gpu", "0"]
EXPERIMENTS = {
    "upcycled": {
        "title": "Non-private Upcycled-FedAvg on synthetic_1_1 (README settings, 30 % stragglers)",
        "dataset": "synthetic_1_1",
        "reference": ["--algorithm", "Upcycled", "--dataset", "synthetic_1_1", "--epochs", "160", "--frac", "0.3", "--lr", "5e-3",
                      "--upcycled_param", "0.9", "--clip", "0", "--sigma", "0", "--straggler", "0.3"],
    },
    "fedavg": {
        "title": "Non-private FedAvg on synthetic_1_1 (the control: same settings without Upcycled)",
        "dataset": "synthetic_1_1",
        "reference": ["--algorithm", "Vanilla", "--dataset", "synthetic_1_1", "--epochs", "80", "--frac", "0.3", "--lr", "5e-3",
                      "--upcycled_param", "0", "--clip", "0", "--sigma", "0", "--straggler", "0.3"],
    },
    "private": {
        "title": "README private run: output-perturbation FedAvg on synthetic_iid (σ = 1 drawn as std σ², clip 10)",
        "dataset": "synthetic_iid",
        "reference": ["--algorithm", "Vanilla", "--dataset", "synthetic_iid", "--epochs", "80", "--frac", "1", "--lr", "7e-2",
                      "--upcycled_param", "0", "--clip", "10", "--sigma", "1", "--straggler", "0"],
    },
}


@dataclass
class Run:
    seed: int
    accuracies: list[float]
    cpu: float

    @property
    def final(self) -> float:
        return self.accuracies[-1]

    @property
    def last(self) -> float:
        return statistics.fmean(self.accuracies[-LAST:])


def prepare(reference: Path, python: str, scratch: Path) -> dict[str, str]:
    """A scratch copy of the checkout with the CPU device line; the environment its runs need."""
    shutil.copytree(reference, scratch / "ref", ignore=shutil.ignore_patterns(".git", "femnist", "logs"))
    for name in ("client/avg.py",):
        path = scratch / "ref" / name
        text = path.read_text()
        if DEVICE_LINE not in text:
            raise SystemExit(f"error: {path} has no line {DEVICE_LINE!r}: not the reference commit 4dd7400?")
        path.write_text(text.replace(DEVICE_LINE, CPU_LINE))
    (scratch / "ref" / "run").mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    probe = subprocess.run([python, "-c", "import torchvision.datasets, torchvision.transforms"], capture_output=True, env=env)
    if probe.returncode != 0:
        shim = scratch / "shim" / "torchvision"
        shim.mkdir(parents=True)
        (shim / "__init__.py").write_text('"""Empty stand-in: the reference imports torchvision and never uses it on synthetic data."""\n')
        (shim / "datasets.py").write_text("")
        (shim / "transforms.py").write_text("")
        env["PYTHONPATH"] = str(scratch / "shim")
    return env


def run_reference(python: str, scratch: Path, env: dict[str, str], experiment: str, seed: int, log_dir: Path) -> Run:
    args = [python, "-u", "../train.py", *COMMON, *EXPERIMENTS[experiment]["reference"], "--seed", str(seed)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, cwd=scratch / "ref" / "run", env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    (log_dir / f"reference-{experiment}-seed{seed}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise SystemExit(f"error: the reference run failed ({experiment}, seed {seed}): {done.stderr.strip().splitlines()[-1:]}")
    rounds = {}
    for line in done.stdout.splitlines():
        match = ROUND_LINE.match(line.strip())
        if match:
            rounds[int(match.group(1))] = float(match.group(2))
    accuracies = [rounds[r] for r in sorted(rounds) if r > 0]  # round 0 is the initial model
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Run(seed, accuracies, cpu)


def run_privaudit(reference: Path, experiment: str, seed: int, datasets: dict) -> Run:
    import torch

    from privaudit.fl.algorithms.registry import make_algorithm
    from privaudit.fl.engine.config import FederationConfig, LocalTrainingConfig
    from privaudit.fl.engine.round_loop import run_federation
    from privaudit.fl.run import run_training
    from privaudit.papers.upcycled.readme_run import readme_spec
    from privaudit.papers.upcycled.reference_data import load_reference_synthetic

    torch.set_num_threads(1)
    name = EXPERIMENTS[experiment]["dataset"]
    if name not in datasets:
        datasets[name] = load_reference_synthetic(reference, name)
    dataset = datasets[name]
    started = time.process_time()
    if experiment == "private":
        result = run_training(readme_spec(seed), dataset=dataset, progress=False)
    else:
        upcycled = experiment == "upcycled"
        algorithm = make_algorithm("upcycled-fedavg" if upcycled else "fedavg", {"upcycle": 0.9} if upcycled else {})
        config = FederationConfig(
            rounds=160 if upcycled else 80,
            local=LocalTrainingConfig(epochs=10, batch_size=32, lr=5e-3, momentum=0.5, double_softmax=True),
            clients_per_round=0.3, stragglers=0.3, seed=seed, eval_train_loss=True,
        )
        result = run_federation(dataset, "logreg", algorithm, config, progress=False)
    cpu = time.process_time() - started
    return Run(seed, [float(m.test_accuracy) for m in result.history], cpu)


def _spread(values: list[float]) -> str:
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * mean:.2f} ± {100 * std:.2f} ({100 * min(values):.1f}–{100 * max(values):.1f})"


def _welch(a: list[float], b: list[float]) -> str:
    if len(a) < 2 or len(b) < 2:
        return "—"
    from scipy import stats

    return f"{stats.ttest_ind(a, b, equal_var=False).pvalue:.2f}"


def section(experiment: str, reference: list[Run], ours: list[Run]) -> list[str]:
    lines = [f"## {EXPERIMENTS[experiment]['title']}", "",
             "Reference command (plus `--seed S`): `python -u train.py " + " ".join(COMMON + EXPERIMENTS[experiment]["reference"]) + "`", "",
             "| seed | reference final | reference last-10 | reference CPU s | privaudit final | privaudit last-10 | privaudit CPU s |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for r, p in zip(reference, ours, strict=True):
        lines.append(f"| {r.seed} | {100 * r.final:.2f} | {100 * r.last:.2f} | {r.cpu:.1f} | {100 * p.final:.2f} | {100 * p.last:.2f} | {p.cpu:.1f} |")
    ref_cpu, our_cpu = sum(r.cpu for r in reference), sum(p.cpu for p in ours)
    lines += ["",
              f"* final test accuracy, mean ± std (range) over {len(reference)} seeds: reference {_spread([r.final for r in reference])} %, "
              f"privaudit {_spread([p.final for p in ours])} % (Welch p = {_welch([r.final for r in reference], [p.final for p in ours])})",
              f"* mean of the last {LAST} iterations: reference {_spread([r.last for r in reference])} %, privaudit "
              f"{_spread([p.last for p in ours])} % (Welch p = {_welch([r.last for r in reference], [p.last for p in ours])})",
              f"* CPU: reference {ref_cpu:.0f} s, privaudit {our_cpu:.0f} s — the reference takes {ref_cpu / max(our_cpu, 1e-9):.1f}× privaudit's CPU", ""]
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path, help="a checkout of osu-srml/Upcycled-FL at 4dd7400 (with its data/ files)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs the reference (torch, numpy, tqdm, tensorboardX)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--experiments", nargs="+", choices=tuple(EXPERIMENTS), default=list(EXPERIMENTS))
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--logs", type=Path, default=None, help="keep the reference's logs here (default: a temporary folder)")
    parser.add_argument("--append", action="store_true", help="add this run's sections to the report instead of replacing it")
    args = parser.parse_args(argv)
    if not (args.reference / "train.py").is_file():
        raise SystemExit(f"error: {args.reference} is not an Upcycled-FL checkout (no train.py)")
    command = "python benchmarks/reference_upcycled.py REFERENCE --python PY --seeds " + " ".join(map(str, args.seeds)) + \
              " --experiments " + " ".join(args.experiments)
    title = ["# Upcycled-FL: reference code vs privaudit on the reference's data files", ""]
    if args.append and args.report.is_file():
        title = [args.report.read_text().rstrip("\n"), "", "---", ""]
    lines = [*title,
             f"Written by `{command}` (`benchmarks/reference_upcycled.py`), every number below until the next such line from "
             "that one run, "
             f"on {platform.machine()} with {os.cpu_count()} cores shared with other jobs (CPU seconds, not wall time). "
             "The reference is osu-srml/Upcycled-FL@4dd7400 run as described in the script's docstring (CPU device line, "
             "`TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`, one thread); privaudit trains on the same `data/<name>/data/*` files "
             "with the same settings and seeds (seeds are labels: the two codes draw different random streams from them). "
             "Accuracy: test accuracy of the global model on the pooled test file, in %.", ""]
    with tempfile.TemporaryDirectory(prefix="reference-upcycled-") as tmp:
        scratch = Path(tmp)
        log_dir = args.logs or scratch / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = prepare(args.reference, args.python, scratch)
        datasets: dict = {}
        for experiment in args.experiments:
            reference, ours = [], []
            for seed in args.seeds:
                reference.append(run_reference(args.python, scratch, env, experiment, seed, log_dir))
                ours.append(run_privaudit(args.reference, experiment, seed, datasets))
                print(f"{experiment} seed {seed}: reference {100 * reference[-1].final:.2f} ({reference[-1].cpu:.0f} s), "
                      f"privaudit {100 * ours[-1].final:.2f} ({ours[-1].cpu:.0f} s)", flush=True)
            lines += section(experiment, reference, ours)
            args.report.parent.mkdir(parents=True, exist_ok=True)
            args.report.write_text("\n".join(lines))  # after every experiment, so a long run leaves what it measured
            print(f"wrote {args.report}", flush=True)


if __name__ == "__main__":
    main()
