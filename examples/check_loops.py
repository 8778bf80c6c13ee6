"""Seeded-bug federations for ``privaudit check``: a textbook DP-FedAvg loop in plain PyTorch, and the same loop with
one bug that DP-FL users report in frameworks' trackers.

The loop (McMahan, Ramage, Talwar & Zhang 2018, "Learning differentially private recurrent language models", Alg. 1;
the same as ``examples/byo_pytorch.py``, smaller): each round samples every client independently with probability q
(Poisson), each sampled client runs a few steps of local SGD on scikit-learn's digits from the global model, the server
clips every update to L2 norm C over all tensors, adds N(0, σ²C²I) to their sum and divides by the expected number of
clients q·N. It records every round with :class:`~privaudit.interop.FederationRecorder`: the global model, the models
the clients sent, the sampled clients and the release it *declares* — always the textbook one::

    GaussianRelease("server", noise_multiplier=σ, clip=C, sample_rate=q, sampling="poisson", level="client")

The bugs (``--bug``), each changing the code, never the declaration:

``sigma-squared``           noise std σ²C instead of σC (σ < 1: less noise than declared)
``per-tensor-clip``         each tensor clipped to C and noised on its own (declared: one global clip C)
``unnoised-bias``           the bias tensors get no noise
``no-clipping``             updates are summed unclipped
``noise-before-clipping``   each client adds its noise N(0, σ²C²) and then clips; the server adds none
``fixed-size-as-poisson``   exactly q·N clients drawn without replacement each round (``random.sample``), declared Poisson
``same-seed``               the noise generator is re-seeded with the same seed every round
``realised-divisor``        the noisy sum divided by the number of clients sampled instead of q·N

Then ``privaudit check DIR``. ``benchmarks/check_bugs.py`` runs every bug (and correct runs) over many seeds and
measures how often ``check`` flags each.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from privaudit.interop import DatasetReference, FederationRecorder, GaussianRelease

BUGS = ("sigma-squared", "per-tensor-clip", "unnoised-bias", "no-clipping", "noise-before-clipping",
        "fixed-size-as-poisson", "same-seed", "realised-divisor")


@dataclass(frozen=True)
class LoopSizes:
    """The example's sizes: N clients of ``per_client`` digits, R rounds, Poisson rate q, clip C, multiplier σ."""

    clients: int = 10
    per_client: int = 100
    rounds: int = 6
    sample_rate: float = 0.5
    clip: float = 0.05
    sigma: float = 0.7
    lr: float = 0.2
    batch_size: int = 25
    epochs: int = 1


def make_model() -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))


def digits_reference(sizes: LoopSizes, seed: int) -> DatasetReference:
    from privaudit.fl.engine.recorded_data import packaged_pool

    _, y, _, _ = packaged_pool("digits")
    order = np.random.default_rng(seed).permutation(len(y))
    n = sizes.clients * sizes.per_client
    partition = {k: order[k * sizes.per_client:(k + 1) * sizes.per_client] for k in range(sizes.clients)}
    return DatasetReference.packaged("digits", partition=partition, non_members=order[n:n + 200])


def _unpredictable(seed: int, stream: int) -> int:
    """A 63-bit generator seed derived from ``seed`` (a small seed would be a small seed space: ``privaudit check``
    enumerates seeds 0..9999 and would find the noise)."""
    return int(np.random.SeedSequence([seed, stream]).generate_state(2, dtype=np.uint64)[0] >> np.uint64(1))


def local_sgd(start: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, sizes: LoopSizes,
              generator: torch.Generator) -> dict[str, torch.Tensor]:
    model = make_model()
    model.load_state_dict(start)
    optimiser = torch.optim.SGD(model.parameters(), lr=sizes.lr)
    for _ in range(sizes.epochs):
        order = torch.randperm(len(y), generator=generator)
        for begin in range(0, len(y), sizes.batch_size):
            rows = order[begin:begin + sizes.batch_size]
            optimiser.zero_grad()
            nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
            optimiser.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _norm(update: dict[str, torch.Tensor]) -> float:
    return float(torch.sqrt(sum((u.double() ** 2).sum() for u in update.values())))


def _clip(update: dict[str, torch.Tensor], clip: float) -> dict[str, torch.Tensor]:
    norm = _norm(update)
    return {k: v * min(1.0, clip / norm) if norm > 0 else v for k, v in update.items()}


def run_loop(out: str | Path, *, bug: str | None = None, seed: int = 0, sizes: LoopSizes = LoopSizes(),
             record_releases: bool = True) -> Path:
    """Train and record one federation (``bug`` one of :data:`BUGS`, or None for the textbook loop); returns ``out``.
    ``record_releases=False`` records no client releases (``check`` then lists what its noise checks needed)."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose from {', '.join(BUGS)}")
    torch.manual_seed(seed)
    data = digits_reference(sizes, seed)
    model = make_model()
    rng = np.random.default_rng(seed + 1)
    python_random = random.Random(seed + 2)
    noise_generator = torch.Generator().manual_seed(_unpredictable(seed, 3))
    train_generator = torch.Generator().manual_seed(_unpredictable(seed, 5))
    n, q, clip, sigma = sizes.clients, sizes.sample_rate, sizes.clip, sizes.sigma
    expected = q * n
    with FederationRecorder(out, model=model, dataset=data, seed=seed, overwrite=True, algorithm="textbook-dp-fedavg",
                            config={"bug": bug or "none"}) as recorder:
        for round_ in range(1, sizes.rounds + 1):
            if bug == "fixed-size-as-poisson":
                sampled = sorted(python_random.sample(range(n), round(expected)))
            else:
                sampled = [k for k in range(n) if rng.random() < q]
            start = {k: v.detach().clone() for k, v in model.state_dict().items()}
            released, updates = {}, []
            if bug == "same-seed":
                noise_generator = torch.Generator().manual_seed(1234)
            for client in sampled:
                x, y = (torch.from_numpy(a) for a in data.client_data(client))
                state = local_sgd(start, x, y, sizes, train_generator)
                update = {k: state[k] - start[k] for k in start}
                if bug == "noise-before-clipping":
                    update = _clip({k: u + torch.normal(0.0, sigma * clip, size=u.shape, generator=noise_generator)
                                    for k, u in update.items()}, clip)
                    state = {k: start[k] + update[k] for k in start}
                released[client] = state
                if bug == "per-tensor-clip":
                    update = {k: _clip({k: u}, clip)[k] for k, u in update.items()}
                elif bug not in ("no-clipping", "noise-before-clipping"):
                    update = _clip(update, clip)
                updates.append(update)
            std = sigma * sigma * clip if bug == "sigma-squared" else sigma * clip
            divisor = max(len(sampled), 1) if bug == "realised-divisor" else expected
            new = {}
            for name, value in start.items():
                total = sum((u[name] for u in updates), torch.zeros_like(value))
                noised = bug == "noise-before-clipping" or (bug == "unnoised-bias" and name.endswith("bias"))
                if not noised:
                    total = total + torch.normal(0.0, std, size=value.shape, generator=noise_generator)
                new[name] = value + total / divisor
            model.load_state_dict(new)
            recorder.record_round(round_, global_model=model, client_releases=released if record_releases else None,
                                  sampled_clients=sampled,
                                  privacy_events=[GaussianRelease("server", noise_multiplier=sigma, clip=clip,
                                                                  sample_rate=q, sampling="poisson", level="client")])
    return Path(out)


def run_local_loop(out: str | Path, *, seed: int = 0, noise_seed: int | None = None, clients: int = 4, rounds: int = 3,
                   sizes: LoopSizes = LoopSizes()) -> Path:
    """A local-DP loop (record level): every client clips its update to C, adds N(0, (2σC)²I) itself and sends the
    result; the server averages what it receives. Recorded with each client's release and a record-level
    ``GaussianRelease(clients, noise_std=2σC, clip=C, sensitivity=2C)`` (noise on a whole clipped update). The noise
    cannot be separated from a client's data here, so ``check`` tests its randomness on the releases themselves
    (:mod:`privaudit.check.local`). ``noise_seed``: the bug — every client re-seeds its noise generator with this seed
    (the same noise in every release); None draws fresh noise."""
    torch.manual_seed(seed)
    data = digits_reference(sizes, seed)
    model = make_model()
    train_generator = torch.Generator().manual_seed(_unpredictable(seed, 5))
    noise_generator = torch.Generator().manual_seed(_unpredictable(seed, 3))
    clip, std = sizes.clip, 2 * sizes.sigma * sizes.clip
    with FederationRecorder(out, model=model, dataset=data, seed=seed, overwrite=True, algorithm="local-dp-fedavg",
                            config={"noise_seed": noise_seed}) as recorder:
        for round_ in range(1, rounds + 1):
            start = {k: v.detach().clone() for k, v in model.state_dict().items()}
            released = {}
            for client in range(clients):
                if noise_seed is not None:
                    noise_generator = torch.Generator().manual_seed(noise_seed)
                x, y = (torch.from_numpy(a) for a in data.client_data(client))
                update = _clip({k: v - start[k] for k, v in local_sgd(start, x, y, sizes, train_generator).items()}, clip)
                released[client] = {k: start[k] + u + torch.normal(0.0, std, size=u.shape, generator=noise_generator)
                                    for k, u in update.items()}
            model.load_state_dict({k: sum(r[k] for r in released.values()) / clients for k in start})
            recorder.record_round(round_, global_model=model, client_releases=released, sampled_clients=list(released),
                                  privacy_events=[GaussianRelease(list(released), noise_std=std, clip=clip,
                                                                  sensitivity=2 * clip)])
    return Path(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="checkpoint directory to write")
    parser.add_argument("--bug", choices=BUGS, default=None, help="the bug to seed (default: the textbook loop)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = run_loop(args.out, bug=args.bug, seed=args.seed)
    print(f"recorded {args.bug or 'the textbook loop'} into {path}; now: privaudit check {path}")


if __name__ == "__main__":
    main()
