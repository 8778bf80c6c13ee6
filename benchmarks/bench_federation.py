"""Federation benchmark: batched (stacked clients) vs sequential local training, same seeds, one run.

Workload (Upcycled-FL's synthetic setting: 003 §7 and osu-srml/Upcycled-FL@4dd7400:train.py): Synthetic iid with d = 20, C = 2 (the shape of
the Upcycled-FL data; generator seed 0), 30 clients, full participation, FedProx (μ = 0.1), logistic
regression, E = 10 local epochs, batch 32, lr 0.05, momentum 0.5, 80 rounds, run seed 0.

Each mode runs in its own subprocess (so peak RSS is its own) with one torch thread unless ``--threads``;
the script prints a table and writes ``reports/bench/federation.md``: wall time, mean and median time per
round, peak resident memory (``resource``) and peak traced Python allocation (``tracemalloc``), final test
accuracy, and the largest parameter difference between the two final models.

Why batched is faster, and by how much it can be: local SGD of one client is sequential, so a round lasts at
least the largest client's number of steps; batched training runs ``max_i steps_i`` stacked steps where the
sequential loop runs ``Σ_i steps_i`` single ones. The table reports that ratio next to the speed-up.

Usage: ``python benchmarks/bench_federation.py [--rounds 80] [--threads 1] [--repeats 1]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "federation.md"


def _workload():
    from privaudit.data.synthetic import synthetic
    from privaudit.fl.algorithms.fedprox import FedProx
    from privaudit.fl.engine.config import LocalTrainingConfig

    dataset = synthetic(0.0, 0.0, iid=True, num_clients=30, dim=20, num_classes=2, seed=0)
    return dataset, FedProx(mu=0.1), LocalTrainingConfig(epochs=10, batch_size=32, lr=0.05, momentum=0.5)


def run_mode(mode: str, rounds: int, threads: int, state_path: str, model: str = "logreg") -> dict:
    """Run one federation in this process and return its measurements."""
    import resource
    import tracemalloc

    import torch
    from safetensors.torch import save_file

    from privaudit.fl.engine.config import FederationConfig
    from privaudit.fl.engine.round_loop import run_federation

    torch.set_num_threads(threads)
    dataset, algorithm, local = _workload()
    config = FederationConfig(rounds=rounds, local=local, clients_per_round=1.0, seed=0, execution=mode)
    tracemalloc.start()
    started = time.perf_counter()
    result = run_federation(dataset, model, algorithm, config, progress=False)
    wall = time.perf_counter() - started
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    save_file({k: v.contiguous() for k, v in result.state.items()}, state_path)
    per_round = [m.seconds for m in result.history]
    steps = [int(n) for n in dataset.client_sizes]
    return {
        "mode": result.info.execution_mode,
        "wall_s": wall,
        "round_mean_s": statistics.fmean(per_round),
        "round_median_s": statistics.median(per_round),
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "traced_peak_mib": traced_peak / 2**20,
        "final_accuracy": result.final_accuracy,
        "client_sizes": steps,
        "threads": threads,
    }


def step_costs(threads: int, repeats: int = 400) -> dict:
    """µs per local step on the workload's shapes: one client (sequential), 30 lanes via the fx layer program,
    30 lanes via ``vmap(functional_call)``. Forward, cross-entropy, backward; the optimiser update excluded."""
    import torch
    import torch.nn.functional as F
    from torch.func import functional_call

    from privaudit.fl.engine.seeding import seeded_torch_global
    from privaudit.fl.engine.stacked import layer_program, vmap_program
    from privaudit.models import build_model

    torch.set_num_threads(threads)
    model = seeded_torch_global(0, lambda: build_model("logreg", (20,), 2))
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(30, 32, 20, generator=generator), torch.randint(0, 2, (30, 32), generator=generator)
    target = F.one_hot(y, 2).float() / 32
    stacked = {n: p.detach().unsqueeze(0).repeat(30, *[1] * p.dim()) for n, p in model.named_parameters()}
    single = {n: p.detach() for n, p in model.named_parameters()}

    def sequential_step():
        leaves = {n: p.detach().requires_grad_() for n, p in single.items()}
        loss = F.cross_entropy(functional_call(model, leaves, (x[0],)), y[0])
        torch.autograd.grad(loss, list(leaves.values()))

    def stacked_step(program):
        def step():
            leaves = {n: p.detach().requires_grad_() for n, p in stacked.items()}
            per_lane = -(torch.log_softmax(program(leaves, x), dim=-1) * target).sum(dim=(1, 2))
            torch.autograd.grad(per_lane.sum(), list(leaves.values()))

        return step

    out = {}
    for name, step in (("sequential (1 client)", sequential_step), ("layers (30 lanes)", stacked_step(layer_program(model))),
                       ("vmap (30 lanes)", stacked_step(vmap_program(model)))):
        for _ in range(50):
            step()
        started = time.perf_counter()
        for _ in range(repeats):
            step()
        out[name] = (time.perf_counter() - started) / repeats * 1e6
    return out


def _child(mode: str, rounds: int, threads: int, state_path: str, model: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    command = [sys.executable, __file__, "--child", mode, "--rounds", str(rounds), "--threads", str(threads), "--state", state_path,
               "--model", model]
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


MODELS = {
    "logreg": "logistic regression",
    "upcycled-mlp": "the Upcycled MLP (hidden 196, ReLU, dropout 0.5: per-lane seeded masks when batched)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1, help="alternate batched/sequential runs this many times")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--child", choices=("batched", "sequential"))
    parser.add_argument("--model", default="logreg", choices=list(MODELS), help=argparse.SUPPRESS)
    parser.add_argument("--state")
    parser.add_argument("--no-report", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_mode(args.child, args.rounds, args.threads, args.state, args.model)))
        return

    lines = [
        "# Federation benchmark: batched vs sequential local training",
        "",
        f"Workload: Synthetic iid (d = 20, C = 2, generator seed 0), 30 clients, full participation, FedProx μ = 0.1, "
        f"E = 10, batch 32, lr 0.05, momentum 0.5, {args.rounds} rounds, run seed 0; one section per model.",
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, torch threads {args.threads}, "
        f"best of {args.repeats} run(s) per mode, each mode in its own process, modes alternated.",
        "",
    ]
    for model in args.models:
        lines += _section(model, args)
    costs = step_costs(args.threads)
    lines += [
        "Cost of one local step of logistic regression (forward, cross-entropy, backward) on these shapes, µs, measured in "
        "the same run (why stacked steps use the fx layer program rather than `vmap`):",
        "",
        "| step | µs |",
        "|---|---|",
        *[f"| {name} | {value:.0f} |" for name, value in costs.items()],
        "",
        f"Regenerate: `python benchmarks/bench_federation.py --rounds {args.rounds} --threads {args.threads} --repeats {args.repeats}"
        f" --models {' '.join(args.models)}`.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_report:
        REPORT.parent.mkdir(parents=True, exist_ok=True)
        REPORT.write_text(text)


def _section(model: str, args: argparse.Namespace) -> list[str]:
    import math
    import tempfile

    from safetensors.torch import load_file

    from privaudit.progress import progress_bar

    runs: dict[str, list[dict]] = {"batched": [], "sequential": []}
    with tempfile.TemporaryDirectory() as tmp, progress_bar(f"federation benchmark: {model}", 2 * args.repeats) as bar:
        for repeat in range(args.repeats):
            for mode in ("batched", "sequential"):
                runs[mode].append(_child(mode, args.rounds, args.threads, f"{tmp}/{mode}{repeat}.safetensors", model))
                bar.advance()
        batched_state, sequential_state = load_file(f"{tmp}/batched0.safetensors"), load_file(f"{tmp}/sequential0.safetensors")
        max_diff = max(float((batched_state[k] - sequential_state[k]).abs().max()) for k in batched_state)

    sizes = runs["batched"][0]["client_sizes"]
    steps = [10 * math.ceil(n / 32) for n in sizes]
    bound = sum(steps) / max(steps)

    def best(mode: str, key: str) -> float:
        return min(r[key] for r in runs[mode])

    speedup = best("sequential", "wall_s") / best("batched", "wall_s")
    lines = [
        f"## {model}: {MODELS[model]}",
        "",
        f"Client train sizes {min(sizes)}–{max(sizes)} (total {sum(sizes)}); load average {os.getloadavg()[0]:.2f} after this section.",
        "",
        "| mode | wall time (s) | mean s/round | median s/round | peak RSS (MiB) | peak traced Python (MiB) | final test accuracy |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in ("batched", "sequential"):
        r = min(runs[mode], key=lambda x: x["wall_s"])
        lines.append(
            f"| {r['mode']} | {r['wall_s']:.2f} | {r['round_mean_s']:.4f} | {r['round_median_s']:.4f} | {r['peak_rss_mib']:.0f} | "
            f"{r['traced_peak_mib']:.1f} | {r['final_accuracy']:.4f} |"
        )
    lines += [
        "",
        f"**Speed-up (sequential / batched wall time): {speedup:.2f}×** "
        + ("(target ≥ 5×)." if model == "logreg" else "(the ≥ 5× target is set for logistic regression; each batched "
                                                         "step here also draws 30 lanes' dropout masks one generator at a time)."),
        f"Step-count ratio Σ_i steps_i / max_i steps_i = {sum(steps)} / {max(steps)} = {bound:.2f} sequential steps per stacked step "
        "each round; the speed-up is about this ratio times (cost of a sequential step / cost of a stacked step, data gathering "
        "and optimiser update included).",
        f"Same seeds, same final accuracy ({runs['batched'][0]['final_accuracy']:.4f} vs {runs['sequential'][0]['final_accuracy']:.4f}); "
        f"largest parameter difference between the final models: {max_diff:.2e} (float32 summation order).",
        "",
    ]
    return lines


if __name__ == "__main__":
    main()
