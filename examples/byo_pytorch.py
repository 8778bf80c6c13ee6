"""Bring your own PyTorch federation: a plain federated loop, recorded for privaudit.

DP-FedAvg (McMahan et al. 2018, "Learning Differentially Private Recurrent Language Models", Algorithm 1) on
scikit-learn's 8×8 digits, written in plain PyTorch: each round samples every client independently with
probability q (Poisson), each sampled client runs local SGD from the global model, clips its update to L2 norm C,
and the server adds Gaussian noise N(0, σ²C²) to the sum of the clipped updates and divides by the expected number
of clients q·K. ``--sampling fixed-size`` draws exactly m = round(q·K) clients instead (``random.sample``-style, as
most loops and Flower do) and divides by m; the recorded release says so (``sampling="fixed-size"``), and its
guarantee is far weaker: an added client displaces a sampled one. With ``--noise 0`` it is plain FedAvg over the
sampled clients (no DP guarantee).

The only privaudit lines are the :class:`~privaudit.interop.DatasetReference` (which records each client trained on,
which were held out), the :class:`~privaudit.interop.FederationRecorder` and one ``record_round`` per round.
``--canary-clients m`` adds a white-box audit's canary clients (:class:`~privaudit.interop.LoopCanaries`, Andrew et
al. 2024): the present ones join the population the loop samples from, a sampled canary's update is its direction at
the clip norm, and the loop clips, noises and averages it like any client (the denominator counts them too). Then::

    python examples/byo_pytorch.py --out runs/byo
    privaudit compute-epsilon --checkpoint runs/byo --delta 1e-5
    privaudit attack membership --checkpoint runs/byo --attack loss
    privaudit attack inversion --checkpoint runs/byo --client 0 --round 1 --attack ig   # with --save-client-releases
    python examples/byo_pytorch.py --out runs/byo-cc --client-rate 1 --noise 3 --hidden 256 --canary-clients 10000
    privaudit audit --checkpoint runs/byo-cc --client-canaries 10000 --out audits/byo-cc

Runs in a few seconds on one CPU core; everything is seeded (``--seed``).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from sklearn.datasets import load_digits
from torch import nn

from privaudit.interop import DatasetReference, FederationRecorder, GaussianRelease, LoopCanaries, NoDP

HIDDEN = 64


def make_model(hidden: int = HIDDEN) -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def local_sgd(global_model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, lr: float, epochs: int, batch_size: int,
              generator: torch.Generator) -> dict[str, torch.Tensor]:
    """The client's model after ``epochs`` of mini-batch SGD from the global weights."""
    model = make_model(global_model[1].out_features)
    model.load_state_dict(global_model.state_dict())
    optimiser = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator)
        for start in range(0, len(y), batch_size):
            rows = order[start : start + batch_size]
            optimiser.zero_grad()
            nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
            optimiser.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="checkpoint directory to write")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--client-rate", type=float, default=0.75, help="sampling rate q of the clients per round")
    parser.add_argument("--sampling", choices=("poisson", "fixed-size"), default="poisson",
                        help="poisson: each client independently with probability q; fixed-size: exactly round(q·K) clients")
    parser.add_argument("--noise", type=float, default=0.3, help="noise multiplier σ (0: no noise, no DP)")
    parser.add_argument("--clip", type=float, default=1.0, help="L2 clip C of each client's update")
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-client-releases", action="store_true", help="also record each sampled client's model")
    parser.add_argument("--hidden", type=int, default=HIDDEN, help="width of the hidden layer")
    parser.add_argument("--canary-clients", type=int, default=0,
                        help="m canary clients for a white-box audit (each present w.p. ½, then sampled like any client)")
    parser.add_argument("--overwrite", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.time()

    # -- your data: half the records split over the clients, the other half never trained on --------------------
    digits = load_digits()
    x_all = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y_all = digits.target.astype(np.int64)
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(y_all))
    members, held_out = order[: len(order) // 2], order[len(order) // 2 :]
    partition = {k: rows for k, rows in enumerate(np.array_split(members, args.clients))}
    data = DatasetReference.from_arrays("sklearn-digits", x_all, y_all, partition=partition, non_members=held_out, store=True)

    torch.set_num_threads(1)  # a small model: one thread is fastest
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    model = make_model(args.hidden)
    canaries = (LoopCanaries(model, args.canary_clients, clip=args.clip, first_id=args.clients, seed=args.seed)
                if args.canary_clients else None)
    population = [*range(args.clients), *(canaries.client_ids if canaries else [])]
    x_test, y_test = torch.from_numpy(x_all[held_out]), torch.from_numpy(y_all[held_out])
    recorder = FederationRecorder(args.out, model=model, dataset=data, algorithm="dp-fedavg" if args.noise > 0 else "fedavg",
                                  seed=args.seed, overwrite=args.overwrite,
                                  local_training={"lr": args.lr, "epochs": args.epochs, "batch_size": args.batch_size, "momentum": 0.0},
                                  config={"client_rate": args.client_rate, "sampling": args.sampling, "noise_multiplier": args.noise,
                                          "clip": args.clip})
    with recorder:
        fixed = max(1, round(args.client_rate * len(population)))  # the number drawn each round with --sampling fixed-size
        for round_ in range(1, args.rounds + 1):
            if args.sampling == "poisson":
                sampled = [k for k in population if torch.rand(1, generator=generator).item() < args.client_rate]
            else:
                sampled = sorted(population[i] for i in torch.randperm(len(population), generator=generator)[:fixed].tolist())
            real = [k for k in sampled if k < args.clients]  # canary clients are not the dataset's clients
            base = {k: v.detach().clone() for k, v in model.state_dict().items()}
            released, total = {}, {k: torch.zeros_like(v) for k, v in base.items()}
            for k in sampled:
                if canaries is not None and canaries.is_canary(k):
                    update = canaries.update(k, like=base)  # C·c_j: a client of its own, clipped and noised like any
                else:
                    x, y = (torch.from_numpy(a) for a in data.client_data(k))
                    released[k] = local_sgd(model, x, y, lr=args.lr, epochs=args.epochs, batch_size=args.batch_size,
                                            generator=generator)
                    update = {name: released[k][name] - base[name] for name in base}
                norm = torch.sqrt(sum((u**2).sum() for u in update.values()))
                factor = min(1.0, args.clip / max(float(norm), 1e-12)) if args.noise > 0 else 1.0
                for name in base:
                    total[name] += update[name] * factor
            if args.noise > 0:
                for name in base:
                    total[name] += torch.randn(base[name].shape, generator=generator) * args.noise * args.clip
                poisson = args.sampling == "poisson"
                denominator = args.client_rate * len(population) if poisson else fixed
                events = [GaussianRelease("server", noise_multiplier=args.noise, clip=args.clip, level="client",
                                          sample_rate=args.client_rate if poisson else fixed / len(population),
                                          sampling=args.sampling)]
            else:
                denominator = max(len(sampled), 1)
                events = [NoDP(real, "FedAvg without noise")] if real else []
            model.load_state_dict({name: base[name] + total[name] / denominator for name in base})
            with torch.no_grad():
                accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
            recorder.record_round(round_, global_model=model, sampled_clients=real, privacy_events=events,
                                  client_releases=released if args.save_client_releases else None,
                                  metrics={"test_accuracy": accuracy})
            print(f"round {round_:2d}: {len(real)} client(s){f' + {len(sampled) - len(real)} canaries' if canaries else ''}, "
                  f"test accuracy {accuracy:.3f}")
    if canaries is not None:
        print(f"canary clients: {canaries.save(recorder.path)} ({len(canaries.client_ids)} of {canaries.count} present)")
    print(f"checkpoint: {recorder.path}  ({time.time() - started:.1f} s)")


if __name__ == "__main__":
    main()
