"""Flower-hosted privaudit algorithms next to privaudit's engine: the same specs, seeds and data, side by side.

For each spec (FedAvg, FedProx, Upcycled-FedProx without privacy, FedAvg under client-level central DP) it runs
:func:`privaudit.fl.run.run_training` (sequential trainer, the reference) and
:func:`privaudit.interop.flower.run_spec_in_flower` (Flower 1.42's simulation engine, Ray backend, one node per
client) and reports wall time, final test accuracy, the largest difference between the two final models and whether
the two ledgers are identical. A Flower run's time includes Ray's start-up and the client actors' imports (its round 1);
the table shows the time outside the rounds and the mean round apart, and a bare ``ray.init`` + one task is timed first.

Writes ``reports/bench/flower.md``. Usage: ``python benchmarks/bench_flower.py [--quick] [--rounds 6] [--clients 6]``.
Wall-clock times on a busy machine are noisy: compare the two columns of one run, not runs taken at different times.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ray_start_seconds() -> float:
    """``ray.init`` (as Flower's backend calls it) + one trivial task + shutdown."""
    import ray

    started = time.perf_counter()
    ray.init(num_cpus=min(os.cpu_count() or 1, 2), include_dashboard=False, logging_level="error", log_to_driver=False)

    @ray.remote
    def one() -> int:
        return 1

    ray.get(one.remote())
    ray.shutdown()
    return time.perf_counter() - started


def specs(rounds: int, clients: int, quick: bool):
    from privaudit.fl.engine.config import LocalTrainingConfig
    from privaudit.fl.run import TrainSpec

    common = dict(dataset="digits", rounds=rounds, model="logreg", num_clients=clients, seed=7, execution="sequential",
                  local=LocalTrainingConfig(epochs=2, batch_size=32, lr=0.2))
    chosen = [
        ("FedAvg", TrainSpec(algorithm="fedavg", clients_per_round=0.5, **common)),
        ("FedProx μ=0.1", TrainSpec(algorithm="fedprox", algorithm_options={"mu": 0.1}, clients_per_round=0.5, **common)),
        ("Upcycled-FedProx", TrainSpec(algorithm="upcycled-fedprox", algorithm_options={"mu": 0.1}, clients_per_round=0.5,
                                       **common)),
        ("FedAvg + cdp (σ=0.5, C=1, Poisson q=0.5)",
         TrainSpec(algorithm="fedavg", privacy="cdp", privacy_options={"clip": 1.0, "noise": 0.5}, clients_per_round=0.5,
                   sampling="poisson", **common)),
    ]
    return chosen[::3] if quick else chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two specs (FedAvg and FedAvg + cdp)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench" / "flower.md"))
    args = parser.parse_args()

    import flwr

    from privaudit.fl.engine import params as P
    from privaudit.fl.run import run_training
    from privaudit.interop.flower import run_spec_in_flower

    ray_seconds = ray_start_seconds()
    rows = []
    for name, spec in specs(args.rounds, args.clients, args.quick):
        started = time.perf_counter()
        engine = run_training(spec, progress=False)
        engine_seconds = time.perf_counter() - started
        started = time.perf_counter()
        flower = run_spec_in_flower(spec)
        flower_seconds = time.perf_counter() - started
        difference = max(float((engine.state[k] - flower.state[k]).abs().max()) for k in engine.state)
        in_rounds = sum(m.seconds for m in flower.history)
        rows.append((name, engine_seconds, flower_seconds, flower_seconds - in_rounds, in_rounds / len(flower.history),
                     engine.final_accuracy, flower.final_accuracy, engine.history[-1].test_loss, flower.history[-1].test_loss,
                     difference, engine.ledger.to_dict() == flower.ledger.to_dict(), engine.ledger.summary(1e-5).max_epsilon))
        print(f"{name}: engine {engine_seconds:.1f} s acc {engine.final_accuracy:.4f} | flower {flower_seconds:.1f} s "
              f"acc {flower.final_accuracy:.4f} | max |Δθ| {difference:.2e} | ledgers equal {rows[-1][10]}", flush=True)
        assert P.allclose(engine.state, flower.state, rtol=1e-4, atol=1e-5), f"{name}: the two runs' models differ"

    lines = [
        "# Flower-hosted privaudit algorithms vs privaudit's engine",
        "",
        f"`python benchmarks/bench_flower.py{' --quick' if args.quick else ''} --rounds {args.rounds} --clients {args.clients}` "
        f"— digits, logreg, {args.clients} clients, {args.rounds} rounds, 2 local epochs, seed 7; flwr {flwr.__version__} "
        f"(simulation engine, Ray backend, one node per client, one CPU per actor); {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores. Engine: `run_training` with the sequential trainer.",
        "",
        f"Bare Ray start-up (`ray.init` + one task + shutdown): {ray_seconds:.1f} s.",
        "",
        "| spec | engine s | Flower s | Flower s outside rounds (Ray + actors start, node discovery, shutdown) | "
        "Flower s per round (mean) | engine accuracy | Flower accuracy | engine test loss | Flower test loss | "
        "max abs Δ final model | ledgers identical | ε (δ = 1e-5) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, es, fs, outside, per_round, ea, fa, el, fl, diff, same, eps in rows:
        lines.append(f"| {name} | {es:.1f} | {fs:.1f} | {outside:.1f} | {per_round:.2f} | {ea:.4f} | {fa:.4f} | {el:.4f} | "
                     f"{fl:.4f} | {diff:.1e} | {'yes' if same else 'NO'} | {eps:.4g} |")
    lines += ["", "Times are wall-clock (other load on the machine shifts them: compare the columns of one row). The Flower "
              "time includes Ray's start-up and the client actors importing torch and privaudit (outside the rounds), paid "
              "once per run; the engine's first row also pays this process's first imports and data load."]
    target = Path(args.out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"written: {target}")


if __name__ == "__main__":
    main()
