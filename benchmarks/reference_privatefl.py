"""PrivateFL side by side: the reference code (BHui97/PrivateFL) and privaudit on the same MNIST clients, LDP and CDP.

Not a test. The reference repository is too large to bring here whole, so REFERENCE is a folder holding the three
files its MNIST run needs, as they are in the repository: ``FedUser.py`` and ``FedServer.py`` (commit 39711e6) and
``modelUtil.py`` (commit 0ff71d6). Its driver ``FedAverage.py`` (0ff71d6) builds torchvision MNIST loaders and runs
the rounds; here a small driver (:func:`reference_run`, run by ``--python``, an interpreter with torch, opacus ≤ 1.2 and
torchmetrics 0.10: the reference's per-sample rule for its ``InputNorm`` takes the activations as one tensor, which
opacus passes as a list from 1.3 on; ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` lets opacus 1.2 reload a model under
torch ≥ 2.6) does what that driver does on privaudit's own clients instead:

* the same arrays: privaudit's ``mnist5k`` clients (20 clients × 2 classes with equal shares, 225 training images
  each; :func:`privaudit.papers.privatefl.experiment.load_privatefl_dataset`) are written to an ``.npz`` file and
  each client's train/test split becomes a ``DataLoader(batch 64, shuffle=True)`` (the reference shuffles both);
* the driver's settings: ``mnist_fully_connected_IN``, E = 1, B = 64, ``LEARNING_RATE_DIS = 0.1`` for every user, ε = 8,
  δ = 1e-3, every client every round (``sample_rate = 1``); LDP: ``LDPUser`` (opacus ``make_private_with_epsilon``
  for E·R epochs, clip 2); CDP: ``CDPUser`` (flr 0.1) and ``CDPServer`` with σ from opacus ``get_noise_multiplier(ε,
  δ, sample_rate, steps=R)`` and ``sample_clients = sr·N``; each round ``np.random.choice`` picks ⌊sr·N⌋ users, they
  train, LDP averages their state dicts with ``agg_weights`` and CDP calls ``agg_updates``; every user loads the
  result (its own 'norm' layer kept) and ``evaluate_global`` counts each user's correct test predictions with its
  own model (the personalised accuracy);
* what the driver leaves to chance is seeded: ``np.random.seed(S)`` and ``torch.manual_seed(S)`` before the users
  are built (the reference seeds neither: its model initialisation and noise follow torch's unseeded generator).
  torchvision is only imported by ``modelUtil.py`` for models this run does not build; where the interpreter has
  none that works, an empty stand-in is put on ``PYTHONPATH``.

privaudit runs PrivateFL with the reference's options (``--ldp-rate loader --personal-layers reference``; CDP
``--cdp-variant reference``, lr 0.1, transformation lr 0.1), the same clients, rounds and seeds, and reports the same
personalised accuracy (:func:`~privaudit.papers.privatefl.experiment.evaluate_privatefl`). CPU seconds: the reference's
process (``getrusage(RUSAGE_CHILDREN)``) and privaudit's training (``time.process_time``), one thread each.

Usage::

    python benchmarks/reference_privatefl.py REFERENCE --python PY [--seeds 0 1 2] [--rounds 10] [--modes ldp cdp]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "reports" / "bench" / "reference-privatefl.md"
FILES = ("FedUser.py", "FedServer.py", "modelUtil.py")
EPSILON, DELTA, LR, BATCH, CLIENTS = 8.0, 1e-3, 0.1, 64, 20


# -- the reference side (runs under --python, with REFERENCE on sys.path) ---------------------------------------------
def reference_run(data_file: str, mode: str, seed: int, rounds: int) -> dict:
    import numpy as np
    import opacus
    import torch
    from FedServer import CDPServer, LDPServer
    from FedUser import CDPUser, LDPUser
    from modelUtil import agg_weights
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    data = np.load(data_file)
    num = int(data["num_clients"])

    def loader(x, y):
        return DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=BATCH, shuffle=True)

    train = [loader(data[f"x_train_{i}"], data[f"y_train_{i}"]) for i in range(num)]
    test = [loader(data[f"x_test_{i}"], data[f"y_test_{i}"]) for i in range(num)]
    np.random.seed(seed)
    torch.manual_seed(seed)
    sample_rate, model = 1, "mnist_fully_connected_IN"
    user_param = {"disc_lr": LR, "epochs": 1}
    server_param = {}
    if mode == "ldp":
        user_obj, server_obj = LDPUser, LDPServer
        user_param.update(rounds=rounds, target_epsilon=EPSILON, target_delta=DELTA)
    else:
        user_obj, server_obj = CDPUser, CDPServer
        server_param["noise_multiplier"] = opacus.accountants.utils.get_noise_multiplier(
            target_epsilon=EPSILON, target_delta=DELTA, sample_rate=sample_rate, steps=rounds)
        server_param["sample_clients"] = sample_rate * num
    users = [user_obj(i, "cpu", model, 10, train[i], **user_param) for i in range(num)]
    server = server_obj("cpu", model, 10, **server_param)
    for i in range(num):
        users[i].set_model_state_dict(server.get_model_state_dict())
    accuracies = []
    for _ in range(rounds):
        chosen = np.random.choice(num, int(sample_rate * num), replace=False)
        for index in chosen:
            users[index].train()
        if mode == "ldp":
            merged = agg_weights([users[index].get_model_state_dict() for index in chosen])
            for i in range(num):
                users[i].set_model_state_dict(merged)
        else:
            server.agg_updates([users[index].get_model_state_dict() for index in chosen])
            for i in range(num):
                users[i].set_model_state_dict(server.get_model_state_dict())
        corrects = total = 0
        for i in range(num):
            right, count = users[i].evaluate(test[i])
            corrects += int(right)
            total += int(count)
        accuracies.append(corrects / total)
    out = {"accuracies": accuracies}
    if mode == "ldp":
        out["max_epsilon"] = max(float(u.epsilon) for u in users)
    else:
        out["noise_multiplier"] = float(server_param["noise_multiplier"])
    return out


# -- privaudit's side and the comparison ------------------------------------------------------------------------------
def _config(mode: str, seed: int, rounds: int):
    from privaudit.papers.privatefl.experiment import PrivateFLConfig

    common = {"dataset": "mnist5k", "num_clients": CLIENTS, "classes_per_client": 2, "shares": "equal", "rounds": rounds,
              "local_epochs": 1, "batch_size": BATCH, "momentum": 0.0, "seed": seed, "data_seed": 0, "eval_every": rounds,
              "privacy": mode, "epsilon": EPSILON, "delta": DELTA, "lr": LR, "personal_layers": "reference"}
    if mode == "ldp":
        return PrivateFLConfig(**common, clip_norm=2.0, ldp_rate="loader")
    return PrivateFLConfig(**common, cdp_variant="reference", transform_lr=0.1)


def export(path: Path) -> None:
    import numpy as np

    from privaudit.papers.privatefl.experiment import load_privatefl_dataset

    dataset = load_privatefl_dataset(_config("ldp", 0, 1))
    arrays = {"num_clients": np.array(dataset.num_clients)}
    for i, c in enumerate(dataset.clients):
        arrays.update({f"x_train_{i}": c.x_train, f"y_train_{i}": c.y_train, f"x_test_{i}": c.x_test, f"y_test_{i}": c.y_test})
    np.savez(path, **arrays)


def privaudit_run(mode: str, seed: int, rounds: int) -> tuple[float, float]:
    import torch

    from privaudit.papers.privatefl.experiment import (
        evaluate_privatefl,
        load_privatefl_dataset,
        train_privatefl,
    )

    torch.set_num_threads(1)
    config = _config(mode, seed, rounds)
    dataset = load_privatefl_dataset(config)
    started = time.process_time()
    result = train_privatefl(config, dataset=dataset)
    cpu = time.process_time() - started
    return float(evaluate_privatefl(result, dataset).personalised_accuracy), cpu


def _shim(scratch: Path, python: str, env: dict) -> None:
    probe = subprocess.run([python, "-c", "import torchvision.models"], capture_output=True, env=env)
    if probe.returncode == 0:
        return
    shim = scratch / "shim" / "torchvision"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text('"""Empty stand-in: modelUtil imports torchvision for models the MNIST run never builds."""\n'
                                      '__version__ = "0.0.0"  # torchmetrics reads it\n'
                                      "from . import models, datasets, transforms  # noqa: F401\n")
    (shim / "models.py").write_text("def alexnet(*args, **kwargs):\n    raise NotImplementedError('stand-in')\n\n\n"
                                    "def resnet18(*args, **kwargs):\n    raise NotImplementedError('stand-in')\n")
    (shim / "datasets.py").write_text("")
    (shim / "transforms.py").write_text("")
    env["PYTHONPATH"] = os.pathsep.join([str(scratch / "shim"), env["PYTHONPATH"]])


def _spread(values: list[float]) -> str:
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * statistics.fmean(values):.2f} ± {100 * std:.2f} ({100 * min(values):.1f}–{100 * max(values):.1f})"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path, nargs="?", help="folder with FedUser.py, FedServer.py, modelUtil.py of BHui97/PrivateFL")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the reference (torch, opacus, torchmetrics 0.10)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--modes", nargs="+", choices=("ldp", "cdp"), default=["ldp", "cdp"])
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--run-reference", nargs=4, metavar=("DATA", "MODE", "SEED", "ROUNDS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_reference:  # the reference side, in the reference's interpreter
        data, mode, seed, rounds = args.run_reference
        print(json.dumps(reference_run(data, mode, int(seed), int(rounds))))
        return
    if args.reference is None or any(not (args.reference / f).is_file() for f in FILES):
        raise SystemExit(f"error: the reference folder must hold {', '.join(FILES)}")
    lines = ["# PrivateFL: reference code vs privaudit on the same MNIST clients", "",
             f"Written by `python benchmarks/reference_privatefl.py REFERENCE --python PY --seeds {' '.join(map(str, args.seeds))} "
             f"--rounds {args.rounds} --modes {' '.join(args.modes)}` ({platform.machine()}, {os.cpu_count()} cores shared with other "
             "jobs; CPU seconds, one thread each), every number from that one run. REFERENCE holds BHui97/PrivateFL's "
             "`FedUser.py`, `FedServer.py` (39711e6) and `modelUtil.py` (0ff71d6) unchanged; the driver replaying its "
             "`FedAverage.py` on privaudit's clients is in the script (its docstring says what it adds: seeds and the data); "
             "the reference ran under opacus 1.2.0 and torchmetrics 0.10.3 (what its code needs). "
             f"Data: mnist5k, {CLIENTS} clients × 2 classes (equal shares), {args.rounds} rounds, every client every round, "
             f"E = 1, B = {BATCH}, lr {LR}, ε = {EPSILON:g}, δ = {DELTA:g}. Accuracy: the personalised accuracy after the last "
             "round (each client's own test split with its own transformation, the reference's `evaluate_global`), in %.", ""]
    with tempfile.TemporaryDirectory(prefix="reference-privatefl-") as tmp:
        scratch = Path(tmp)
        data_file = scratch / "clients.npz"
        export(data_file)
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(args.reference.resolve()),
               "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # opacus 1.3 reloads a saved model as torch < 2.6 did
        _shim(scratch, args.python, env)
        for mode in args.modes:
            rows, ref_acc, our_acc, ref_cpu, our_cpu = [], [], [], 0.0, 0.0
            for seed in args.seeds:
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                done = subprocess.run([args.python, str(Path(__file__).resolve()), "--run-reference", str(data_file), mode, str(seed),
                                       str(args.rounds)], capture_output=True, text=True, env=env, cwd=scratch)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                if done.returncode != 0:
                    raise SystemExit(f"error: the reference run failed ({mode}, seed {seed}): {done.stderr.strip().splitlines()[-1:]}")
                reference = json.loads(done.stdout.strip().splitlines()[-1])
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
                ours, our_seconds = privaudit_run(mode, seed, args.rounds)
                ref_acc.append(reference["accuracies"][-1])
                our_acc.append(ours)
                ref_cpu += cpu
                our_cpu += our_seconds
                extra = (f"max ε {reference['max_epsilon']:.3g}" if mode == "ldp" else f"σ {reference['noise_multiplier']:.4g}")
                rows.append(f"| {seed} | {100 * ref_acc[-1]:.2f} | {cpu:.1f} | {100 * ours:.2f} | {our_seconds:.1f} | {extra} |")
                print(f"{mode} seed {seed}: reference {100 * ref_acc[-1]:.2f} ({cpu:.0f} s), privaudit {100 * ours:.2f} ({our_seconds:.0f} s)",
                      flush=True)
            lines += [f"## {mode.upper()}", "",
                      "| seed | reference accuracy | reference CPU s | privaudit accuracy | privaudit CPU s | reference's own |",
                      "|---:|---:|---:|---:|---:|---|", *rows, "",
                      f"* mean ± std (range) over {len(args.seeds)} seeds: reference {_spread(ref_acc)} %, privaudit {_spread(our_acc)} %",
                      f"* CPU: reference {ref_cpu:.0f} s, privaudit {our_cpu:.0f} s — the reference takes {ref_cpu / max(our_cpu, 1e-9):.1f}× "
                      "privaudit's CPU", ""]
            args.report.parent.mkdir(parents=True, exist_ok=True)
            args.report.write_text("\n".join(lines))
            print(f"wrote {args.report}", flush=True)


if __name__ == "__main__":
    main()
