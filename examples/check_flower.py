"""Seeded-bug Flower federations for ``privaudit check``: Flower's own DP wrappers, and custom Flower strategies and
mods with one bug each, recorded by privaudit's audit tap.

Everything Flower does here is Flower's: its round loop (``Strategy.start``), ``FedAvg``'s node sampling
(``random.sample``) and weighted mean, the fixed-clipping wrappers (``DifferentialPrivacyServerSideFixedClipping``,
``DifferentialPrivacyClientSideFixedClipping`` with ``fixedclipping_mod``; flwr 1.42), the adaptive-clipping ones
(``DifferentialPrivacy{Server,Client}SideAdaptiveClipping``, the latter with ``adaptiveclipping_mod``; σ_b =
:data:`COUNT_STDDEV`) and their noise (``np.random.normal``). Only the transport is replaced: :class:`InProcessGrid` hands each message to the ClientApp's
function and mods in this process instead of Flower's Ray simulation engine (a federation of ten nodes takes a
fraction of a second, so ``benchmarks/check_bugs.py`` can run hundreds). The ClientApp trains the same small MLP on
scikit-learn's digits as ``examples/check_loops.py``. The tap (:class:`~privaudit.interop.flower.AuditTap`,
``record_client_updates=True``) records what Flower's wrapper *declares*: a custom strategy below subclasses Flower's
wrapper, so the tap records the wrapper's declared mechanism while the subclass does something else — where the bug
lives in a user's Flower code.

The bugs (``--bug``):

``sigma-squared``           a server-side wrapper whose noise std is σ²C/m instead of σC/m
``per-tensor-clip``         a server-side wrapper that clips each array to C on its own
``unnoised-bias``           a server-side wrapper that adds no noise to the bias arrays
``no-clipping``             the client-side wrapper without ``fixedclipping_mod`` on the clients
``noise-before-clipping``   a server-side wrapper that noises each update and then clips it, adding nothing after
``same-seed``               a server-side wrapper that calls ``np.random.seed(0)`` before adding its noise
``realised-divisor``        a wrapper that aggregates the replies that arrived (nodes fail at random) and divides the
                            noise std by their number instead of m

``fixed-size-as-poisson`` cannot live in Flower: its nodes are always a fixed-size sample, and the tap records them so.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.clientapp.mod import adaptiveclipping_mod, fixedclipping_mod
from flwr.serverapp import Grid
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
)
from flwr.supercore.differential_privacy import (
    add_gaussian_noise_inplace,
    compute_clip_model_update,
    compute_stdv,
)
from torch import nn

from privaudit.interop import DatasetReference, FederationRecorder
from privaudit.interop.flower import AuditTap, tap_mod

BUGS = ("sigma-squared", "per-tensor-clip", "unnoised-bias", "no-clipping", "noise-before-clipping", "same-seed",
        "realised-divisor")
CORRECT = ("server-side", "client-side", "server-side-adaptive", "client-side-adaptive")
#: σ_b of the adaptive wrappers' noisy count (Flower's default m/20 refuses the examples' σ = 0.7 with m = 5)
COUNT_STDDEV = 2.0


@dataclass(frozen=True)
class FlowerSizes:
    """N nodes of ``per_client`` digits, R rounds, a fraction q of the nodes trained per round, clip C, multiplier σ."""

    clients: int = 10
    per_client: int = 100
    rounds: int = 6
    fraction: float = 0.5
    clip: float = 0.05
    sigma: float = 0.7
    lr: float = 0.2
    batch_size: int = 25
    dropout: float = 0.0  # probability that a sampled node fails its round (its reply is an error)


def make_model() -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))


# -- the transport ----------------------------------------------------------------------------------------
class InProcessGrid(Grid):
    """Flower's ``Grid`` over nodes that live in this process: each message runs ``app(message, context)``."""

    def __init__(self, app: Callable[[Message, object], Message], num_nodes: int) -> None:
        from flwr.supercore.task_identity import TaskIdentity

        self.app = app
        self.nodes = {1000 + i: i for i in range(num_nodes)}  # node id → partition id
        self._run = None
        # what Flower's ServerApp runtime sets before the strategy builds messages (flwr.server.compat.app)
        TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, 0

    def set_run(self, run) -> None:
        self._run = run

    @property
    def run(self):
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content=content, message_type=message_type, dst_node_id=dst_node_id, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        raise NotImplementedError("InProcessGrid answers through send_and_receive only")

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        raise NotImplementedError("InProcessGrid answers through send_and_receive only")

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        replies = []
        for message in messages:
            partition = self.nodes[message.metadata.dst_node_id]
            context = SimpleNamespace(node_config={"partition-id": partition, "num-partitions": len(self.nodes)},
                                      node_id=message.metadata.dst_node_id)
            replies.append(self.app(message, context))
        return replies


def with_mods(train: Callable, mods: Sequence[Callable]) -> Callable:
    """The ClientApp's function wrapped in its mods (first mod outermost, as Flower's ClientApp applies them)."""
    call = train
    for mod in reversed(list(mods)):
        call = (lambda m, inner: lambda message, context: m(message, context, inner))(mod, call)
    return call


# -- the buggy strategies (each subclasses Flower's wrapper: the tap records the wrapper's declaration) ----------
class SquaredSigma(DifferentialPrivacyServerSideFixedClipping):
    def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
        arrays = aggregated_arrays.to_numpy_ndarrays()
        add_gaussian_noise_inplace(arrays, compute_stdv(self.noise_multiplier ** 2, self.clipping_norm,
                                                        self.num_sampled_clients))
        return ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(aggregated_arrays.keys(), arrays, strict=True)})


class UnnoisedBias(DifferentialPrivacyServerSideFixedClipping):
    def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
        std = compute_stdv(self.noise_multiplier, self.clipping_norm, self.num_sampled_clients)
        out = {}
        for key, array in zip(aggregated_arrays.keys(), aggregated_arrays.to_numpy_ndarrays(), strict=True):
            if not key.endswith("bias"):
                array = array + np.random.normal(0, std, array.shape).astype(array.dtype)
            out[key] = Array(np.asarray(array))
        return ArrayRecord(out)


class SameSeed(DifferentialPrivacyServerSideFixedClipping):
    def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
        np.random.seed(0)  # "for reproducibility"
        return super()._add_noise_to_aggregated_arrays(aggregated_arrays)


class ReplyDivisor(DifferentialPrivacyServerSideFixedClipping):
    """Tolerates failed nodes (Flower's wrapper skips a round with an error) and divides the noise by the replies."""

    def aggregate_train(self, server_round, replies):
        replies = [r for r in replies if not r.has_error()]
        self._replies = len(replies)
        return super().aggregate_train(server_round, replies)

    def _add_noise_to_aggregated_arrays(self, aggregated_arrays: ArrayRecord) -> ArrayRecord:
        arrays = aggregated_arrays.to_numpy_ndarrays()
        add_gaussian_noise_inplace(arrays, compute_stdv(self.noise_multiplier, self.clipping_norm, max(self._replies, 1)))
        return ArrayRecord({k: Array(np.asarray(v)) for k, v in zip(aggregated_arrays.keys(), arrays, strict=True)})


class _ClippingOverride(DifferentialPrivacyServerSideFixedClipping):
    """Server-side wrappers whose clipping differs: ``transform`` replaces each reply's arrays given the arrays sent."""

    add_noise = True

    def transform(self, update: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError

    def aggregate_train(self, server_round, replies):
        replies = [r for r in replies if not r.has_error()]
        if not replies:
            return None, None
        current = self.current_arrays.to_numpy_ndarrays()
        for reply in replies:
            for name, record in list(reply.content.array_records.items()):
                arrays = record.to_numpy_ndarrays()
                update = self.transform([a - c for a, c in zip(arrays, current, strict=True)])
                reply.content[name] = ArrayRecord({k: Array(np.asarray(c + u)) for k, c, u
                                                   in zip(record.keys(), current, update, strict=True)})
        aggregated, metrics = self.strategy.aggregate_train(server_round, replies)
        if aggregated is not None and self.add_noise:
            aggregated = self._add_noise_to_aggregated_arrays(aggregated)
        return aggregated, metrics


class PerTensorClip(_ClippingOverride):
    def transform(self, update):
        out = []
        for u in update:
            norm = float(np.linalg.norm(u))
            out.append(u * min(1.0, self.clipping_norm / norm) if norm > 0 else u)
        return out


class NoiseBeforeClipping(_ClippingOverride):
    add_noise = False

    def transform(self, update):
        std = self.noise_multiplier * self.clipping_norm
        noised = [u + np.random.normal(0, std, u.shape).astype(u.dtype) for u in update]
        current = [np.zeros_like(u) for u in noised]
        compute_clip_model_update(noised, current, self.clipping_norm)  # clips noised in place (param2 = 0)
        return noised


# -- one federation --------------------------------------------------------------------------------------------
def _digits(sizes: FlowerSizes, seed: int) -> DatasetReference:
    from privaudit.fl.engine.recorded_data import packaged_pool

    _, y, _, _ = packaged_pool("digits")
    order = np.random.default_rng(seed).permutation(len(y))
    n = sizes.clients * sizes.per_client
    partition = {k: order[k * sizes.per_client:(k + 1) * sizes.per_client].tolist() for k in range(sizes.clients)}
    return DatasetReference.packaged("digits", partition=partition, non_members=order[n:n + 200].tolist())


def _entropy(seed: int, stream: int, bits: int = 32) -> int:
    """A seed drawn from ``seed`` (never a small number: ``privaudit check`` enumerates seeds 0..9999)."""
    return int(np.random.SeedSequence([seed, stream]).generate_state(1, dtype=np.uint64)[0] >> np.uint64(64 - bits))


def run_flower(out: str | Path, *, bug: str | None = None, variant: str = "server-side", seed: int = 0,
               sizes: FlowerSizes = FlowerSizes()) -> Path:
    """One Flower federation (Flower's ``variant`` wrapper, or ``bug`` one of :data:`BUGS`), recorded into ``out``."""
    if bug is not None and bug not in BUGS:
        raise ValueError(f"unknown bug {bug!r}; choose from {', '.join(BUGS)}")
    if variant not in CORRECT:
        raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(CORRECT)}")
    data = _digits(sizes, seed)
    torch.manual_seed(seed)
    net = make_model()
    random.seed(_entropy(seed, 1))  # Flower samples nodes with Python's random
    np.random.seed(_entropy(seed, 2))  # Flower's noise: np.random.normal (a seeded run; a deployment leaves it unseeded)
    failures = np.random.default_rng(_entropy(seed, 3))
    recorder = FederationRecorder(out, model=net, dataset=data, seed=seed, overwrite=True, algorithm="flower-fedavg",
                                  framework="flwr", config={"bug": bug or "none", "variant": variant})
    m = max(1, int(sizes.clients * sizes.fraction))
    inner = FedAvg(fraction_train=sizes.fraction, fraction_evaluate=0.0, min_train_nodes=m,
                   min_available_nodes=sizes.clients)
    client_side = bug == "no-clipping" or (bug is None and variant.startswith("client-side"))
    if bug is None and variant.endswith("adaptive"):
        adaptive = DifferentialPrivacyClientSideAdaptiveClipping if client_side else DifferentialPrivacyServerSideAdaptiveClipping
        strategy = adaptive(inner, sizes.sigma, m, initial_clipping_norm=sizes.clip, clipped_count_stddev=COUNT_STDDEV)
    else:
        wrapper = {None: DifferentialPrivacyClientSideFixedClipping if client_side else DifferentialPrivacyServerSideFixedClipping,
                   "no-clipping": DifferentialPrivacyClientSideFixedClipping, "sigma-squared": SquaredSigma,
                   "per-tensor-clip": PerTensorClip, "unnoised-bias": UnnoisedBias,
                   "noise-before-clipping": NoiseBeforeClipping, "same-seed": SameSeed, "realised-divisor": ReplyDivisor}[bug]
        strategy = wrapper(inner, sizes.sigma, sizes.clip, m)
    tap = AuditTap(strategy, recorder=recorder, record_client_updates=True)
    dropout = sizes.dropout if bug != "realised-divisor" else max(sizes.dropout, 0.3)
    train_generator = torch.Generator().manual_seed(_entropy(seed, 4))

    def train(message: Message, context) -> Message:
        partition = int(context.node_config["partition-id"])
        if dropout and failures.random() < dropout:
            raise RuntimeError("node failed")
        x, y = (torch.from_numpy(a) for a in data.client_data(partition))
        model = make_model()
        model.load_state_dict(message.content["arrays"].to_torch_state_dict())
        optimiser = torch.optim.SGD(model.parameters(), lr=sizes.lr)
        order = torch.randperm(len(y), generator=train_generator)
        for begin in range(0, len(y), sizes.batch_size):
            rows = order[begin:begin + sizes.batch_size]
            optimiser.zero_grad()
            nn.functional.cross_entropy(model(x[rows]), y[rows]).backward()
            optimiser.step()
        return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()),
                                   "metrics": MetricRecord({"num-examples": len(y)})}), reply_to=message)

    def failing(message: Message, context) -> Message:
        try:
            return train(message, context)
        except RuntimeError:
            from flwr.app import Error

            return Message(Error(code=0, reason="node failed"), reply_to=message)

    clipping_mod = adaptiveclipping_mod if variant.endswith("adaptive") and bug is None else fixedclipping_mod
    mods = [tap_mod, clipping_mod] if (client_side and bug != "no-clipping") else [tap_mod]
    grid = InProcessGrid(with_mods(failing, mods), sizes.clients)
    tap.start(grid=grid, initial_arrays=ArrayRecord(net.state_dict()), num_rounds=sizes.rounds,
              train_config=ConfigRecord({}))
    return Path(out)


def quiet_flower() -> None:
    """Flower logs every round; the benchmark runs hundreds of federations."""
    import logging

    logging.getLogger("flwr").setLevel(logging.ERROR)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="checkpoint directory to write")
    parser.add_argument("--bug", choices=BUGS, default=None, help="the bug to seed (default: Flower's own wrapper)")
    parser.add_argument("--variant", choices=CORRECT, default="server-side", help="Flower's wrapper when no bug is seeded")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    quiet_flower()
    path = run_flower(args.out, bug=args.bug, variant=args.variant, seed=args.seed)
    print(f"recorded {args.bug or 'Flower ' + args.variant} into {path}; now: privaudit check {path}")


if __name__ == "__main__":
    main()
